"""A whole DAG run (`dag.test()`, moto S3) with launcher=docker over the five stacks that run here from their
images: published `complete`, every row from a project image with its budget, one measuring container up at a
time (the control's A/A duet runs its two at once, by design), nothing left on the engine."""

from __future__ import annotations

import pytest

from tasks.store.s3 import S3Store
from tests.dagrun import fast_conf, load_dag_module, read_json_object, read_run, results_frame, verify_manifest

pytestmark = pytest.mark.integration

FIVE = ["triton", "torchserve", "bentoml", "kserve", "custom"]


def test_dag_run_with_containers_publishes_complete(airflow_db, embedded_s3, monkeypatch, bucket, project_images,
                                                    no_docker_leftovers):
    for key, value in embedded_s3.airflow_conn_env("serving_eval_s3").items():
        monkeypatch.setenv(key, value)
    conf = fast_conf(bucket, launcher="docker", servers=FIVE, formats=["onnx", "torchscript"], concurrencies=[1, 2],
                     server_memory="2g", ready_timeout_s=120, control_cell="mlp/onnx/custom")
    dag_run = load_dag_module().serving_eval_dag.test(run_conf=conf)
    assert dag_run.state == "success"

    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    assert manifest["status"] == "complete"
    verify_manifest(store, manifest)
    frame = results_frame(store, manifest)
    assert set(frame["status"]) == {"ok"}, frame[frame["status"] != "ok"][["server", "format", "reason"]]
    assert set(frame["server"]) == set(FIVE) and set(frame["launcher"]) == {"docker"}
    assert (frame["runtime_image_kind"] == "project").all()
    for _, row in frame.iterrows():
        image = project_images[row["server"]]
        assert row["runtime_image"] == image.label, (row["server"], row["runtime_image"])
    assert frame["server_cpus"].notna().all() and (frame["server_memory"] == "2g").all()
    assert (frame["throughput_rps"] > 0).all() and (frame["server_cpu_pct"] > 0).all()
    assert (frame["server_rss_mb"] > 0).all()

    timelines = sorted(read_json_object(store, manifest, "logs/sessions.json"), key=lambda t: t["start"])
    for earlier, later in zip(timelines, timelines[1:], strict=False):  # one container up at a time
        assert earlier["stopped"] <= later["start"], f"{earlier['session_id']} overlaps {later['session_id']}"
    logs = {o["name"] for o in manifest["objects"] if o["name"].startswith("logs/") and o["name"].endswith(".log")}
    # tonight's A/A duet of the control cell runs its two containers at once, by design (they are not sessions)
    duet_logs = {name for name in logs if name.startswith(("logs/aa.", "logs/duet"))}
    assert duet_logs == {"logs/aa.control.reference.log", "logs/aa.control.candidate.log"}
    assert len(logs - duet_logs) == len(timelines)  # every session's container log saved with the run
