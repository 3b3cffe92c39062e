"""Two measuring hosts on a real CeleryExecutor deployment (PostgreSQL, Redis, API server, scheduler, DAG processor,
two `airflow celery worker`s), the nightly DAG triggered for both hosts.

The workers stand in for two machines: each has its own `SERVING_EVAL_HOST`, its own queue and its own artifact
cache (worker host-a also serves the default queue, so it converts; host-b must fetch the artifacts it serves from
the store). They share the runtime venv cache, as two machines built from one image would have the same runtimes.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from tasks.store.s3 import S3Store
from tests.celery_cluster import celery_cluster, missing_services
from tests.dagrun import (
    NO_CONTROL,
    port_is_free,
    read_json_object,
    read_run,
    results_frame,
    serving_processes,
    session_temp_dirs,
    verify_manifest,
)

pytestmark = pytest.mark.integration

DAG_ID = "nightly_serving_eval"
HOSTS = ("host-a", "host-b")
RUN_TIMEOUT_S = 900


@pytest.fixture()
def services_present():
    missing = missing_services()
    if missing:
        if os.environ.get("CI") or os.environ.get("SERVING_EVAL_CI"):
            pytest.fail(f"Debian packages missing (.ci/run installs them): {missing}", pytrace=False)
        pytest.skip(f"needs Debian's {' and '.join(missing)} (apt-get install -y postgresql redis-server)")


def _wait_for_dag(cluster, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not cluster.query("SELECT 1 FROM dag WHERE dag_id = %s", DAG_ID):
        if time.monotonic() > deadline:
            raise AssertionError(f"the DAG processor did not store {DAG_ID}:\n{cluster.logs()}")
        time.sleep(1)


def _wait_for_run(cluster, run_id: str) -> str:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        rows = cluster.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", DAG_ID, run_id)
        state = rows[0][0] if rows else None
        if state in ("success", "failed"):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {state} after {RUN_TIMEOUT_S} s:\n{cluster.logs()}")
        time.sleep(2)


def _overlap(a: dict, b: dict) -> bool:
    return a["start"] < b["stopped"] and b["start"] < a["stopped"]


def test_two_celery_workers_measure_their_own_hosts_side_by_side(services_present, embedded_s3, bucket, tmp_path):
    artifacts = {h: tmp_path / f"artifacts-{h}" for h in HOSTS}
    for path in artifacts.values():
        path.mkdir()
    hosts = {
        "host-a": {"queues": ["default", "serving_eval_host_host-a"], "concurrency": 2,
                   "env": {"SERVING_EVAL_HOST": "host-a", "SERVING_EVAL_ARTIFACTS": str(artifacts["host-a"])}},
        "host-b": {"queues": ["serving_eval_host_host-b"], "concurrency": 1,
                   "env": {"SERVING_EVAL_HOST": "host-b", "SERVING_EVAL_ARTIFACTS": str(artifacts["host-b"])}},
    }
    deployment = {"SERVING_EVAL_HOSTS": ",".join(HOSTS), **embedded_s3.airflow_conn_env("serving_eval_s3")}
    temp_before = session_temp_dirs()
    conf = {"suite": "smoke", "models": ["mlp", "tiny-cnn"], "formats": ["onnx", "torchscript"],
            "servers": ["custom"], "concurrencies": [1, 2], "duration_s": 2.0, "warmup_s": 0.5, "window_s": 0.5,
            "s3_bucket": bucket, "s3_prefix": "eval", "ready_timeout_s": 120, "hosts": list(HOSTS),
            "max_neighbour_pct": 100.0,  # two "hosts" on one machine are each other's neighbours by construction
            **NO_CONTROL}
    with celery_cluster(hosts, deployment) as cluster:
        _wait_for_dag(cluster)
        cluster.airflow("dags", "unpause", DAG_ID)
        run_id = "celery-two-hosts"
        cluster.airflow("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", json.dumps(conf))
        state = _wait_for_run(cluster, run_id)
        tis = cluster.query("SELECT task_id, map_index, state, queue, pool FROM task_instance "
                            "WHERE dag_id = %s AND run_id = %s", DAG_ID, run_id)
        assert state == "success", f"{tis}\n{cluster.task_logs(DAG_ID, run_id)}\n{cluster.logs()}"
        worker_logs = {h: (cluster.workdir / f"worker-{h}.log").read_text(errors="replace") for h in HOSTS}
        ports = [int(cluster.api_url.rsplit(":", 1)[1]), int(cluster.db_url.split(":")[1].split("/")[0]),
                 int(cluster.env["AIRFLOW__CELERY__BROKER_URL"].rsplit(":", 1)[1].split("/")[0])]
        processes = list(cluster.processes.values())
        workdir = cluster.workdir
    # every process the deployment started is gone, its ports free, its folder removed
    assert all(p.poll() is not None for p in processes)
    assert all(port_is_free(port) for port in ports), ports
    assert not workdir.exists()

    # every measuring task ran in its host's queue and pool, the rest in the default queue
    for task_id, _, _state, queue, pool in tis:
        for h in HOSTS:
            if task_id in (f"measure_{h}", f"duet_{h}", f"sweep_{h}", f"sweep_run_{h}"):
                assert (queue, pool) == (f"serving_eval_host_{h}", f"serving_eval_host_{h}"), task_id
        if task_id in ("plan", "convert", "publish"):
            assert queue == "default", task_id
    measured = {h: [t for t in tis if t[0] == f"measure_{h}"] for h in HOSTS}
    assert all(len(m) == 2 and {t[2] for t in m} == {"success"} for m in measured.values()), measured
    executed = {h: re.findall(r"Executing workload in Celery: .*?task_id='([^']+)'", worker_logs[h]) for h in HOSTS}
    for h in HOSTS:  # each worker executed its own host's measuring tasks and no other host's
        other = next(o for o in HOSTS if o != h)
        assert executed[h].count(f"measure_{h}") == 2 and f"measure_{other}" not in executed[h], executed
    assert "convert" in executed["host-a"] and "convert" not in executed["host-b"]  # host-a serves default

    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    assert manifest["status"] == "complete"
    verify_manifest(store, manifest)
    plan = read_json_object(store, manifest, "plan.json")
    planned = {s["session_id"]: s["host"] for s in plan["sessions"]}
    assert sorted(planned.values()) == ["host-a", "host-a", "host-b", "host-b"]
    frame = results_frame(store, manifest)
    assert len(frame) == 8 and set(frame["status"]) == {"ok"}
    for _, row in frame.iterrows():  # each row carries the host that measured it: its planned host
        session_id = f"{row['model']}.{row['format']}.{row['server']}.{row['launcher']}.{row['device']}"
        assert row["hostname"] == planned[session_id]
    assert set(manifest["provenance"]["hosts"]) == set(HOSTS)

    # host-b converted nothing: what it served came from the store's artifact cache into its own cache
    fetched = {(p.parent.parent.parent.name, p.parent.parent.name)
               for p in artifacts["host-b"].glob("*/*/*/conversion.json")}
    assert fetched == {tuple(sid.split(".")[:2]) for sid, h in planned.items() if h == "host-b"}

    timelines = read_json_object(store, manifest, "logs/sessions.json")
    by_host = {h: sorted((t for t in timelines if t["host"] == h), key=lambda t: t["start"]) for h in HOSTS}
    assert all(len(v) == 2 for v in by_host.values()), timelines
    for h, sessions in by_host.items():  # one server at a time on each host
        for earlier, later in zip(sessions, sessions[1:], strict=False):
            assert earlier["stopped"] <= later["start"], f"{h}: {earlier['session_id']} overlaps {later['session_id']}"
    # ... while the two hosts measured at the same time
    assert any(_overlap(a, b) for a in by_host["host-a"] for b in by_host["host-b"]), by_host

    assert serving_processes() == []
    assert session_temp_dirs() - temp_before == set()

    # the capacity estimate from this run's timelines (docs/scaling.md): two hosts' worth of sessions, gaps measured
    from tasks.cli.main import main

    env = embedded_s3.airflow_conn_env("serving_eval_s3")
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert main(["hosts", "latest", "--bucket", bucket, "--prefix", "eval", "--window-h", "0.01"]) == 0
        assert main(["hosts", "latest", "--bucket", bucket, "--prefix", "eval", "--models", "3", "--stacks", "6",
                     "--loads", "10", "--json"]) == 0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
