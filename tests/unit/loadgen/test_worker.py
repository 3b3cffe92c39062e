"""A load generator worker's job (tasks/loadgen/worker.py): what the coordinator writes is what the worker reads,
typed; its share of the load adds up to the load point."""

from __future__ import annotations

import pytest

from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.worker import WorkerJob, worker_share


def test_the_job_the_coordinator_writes_is_the_job_the_worker_reads():
    settings = LoadSettings(mode="rate", load=40.0, workers=2)
    job = WorkerJob("127.0.0.1", 8000, "mlp", "kserve_v2_rest", None, settings.to_dict(), "/tmp/x/schedule.npy")
    back = WorkerJob.from_json(job.to_json())
    assert back.load_settings == settings and back.schedule_file == "/tmp/x/schedule.npy"
    assert (back.host, back.port, back.model_name, back.protocol, back.spec) == ("127.0.0.1", 8000, "mlp",
                                                                              "kserve_v2_rest", None)


def test_a_job_missing_a_field_is_refused_by_name():
    with pytest.raises(TypeError, match="settings"):
        WorkerJob.from_json('{"host": "127.0.0.1", "port": 1, "model_name": "m", "protocol": "p", "spec": null}')


def test_the_workers_shares_make_the_load_point():
    shares = [worker_share(LoadSettings(mode="rate", load=40.0, workers=3, seed=5), i) for i in range(3)]
    assert [s["offset"] for s in shares] == [0, 1, 2] and {s["stride"] for s in shares} == {3}
    assert [s["seed"] for s in shares] == [5, 6, 7]
