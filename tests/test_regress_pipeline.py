"""The regression check in the pipeline: the logical-date cut, exclusions through the CLI, and confirmation by
re-measuring with real servers (a slowed cell confirmed, a one-off blip unconfirmed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from benchmarks.regression_nights import hogged_custom_server
from tasks.core.metadata import collect_host_metadata
from tasks.core.results import SCHEMA_VERSION, to_frame, to_parquet_bytes
from tasks.pipeline import run_pipeline
from tasks.plan.config import RunConfig
from tasks.regress.check import judge_run
from tasks.serve.servers import SERVERS, register_server
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store
from tests.dagrun import REPO, fast_conf, load_dag_module, read_json_object, read_run

CELL = {"model": "mlp", "format": "onnx", "server": "custom", "launcher": "process", "device": "cpu",
        "batch_size": 1, "mode": "concurrency", "load": 1.0, "protocol": "kserve_v2_rest"}
CELL_ID = "mlp.onnx.custom.process.cpu.b1.concurrency1"
DAY = datetime(2026, 2, 1, 2, 0, tzinfo=UTC)


def night(i: int) -> str:
    return (DAY + timedelta(days=i)).isoformat()


def fake_run(store: S3Store, i: int, throughput_rps: float, run_id: str | None = None, **cell) -> str:
    """Publish a run of one ok row (logical date DAY + i days) without measuring anything."""
    run_id = run_id or f"fake{i:02d}"
    host = collect_host_metadata()
    row = {**CELL, **cell, **{k: host[k] for k in ("cpu_model", "cpu_count", "gpu_name")}, "run_id": run_id,
           "logical_date": night(i), "schema_version": SCHEMA_VERSION, "status": "ok",
           "throughput_rps": throughput_rps, "latency_ms_p50": 1000.0 / throughput_rps, "requests": 1000, "errors": 0,
           "error_rate": 0.0, "cv": 0.02, "windows": 4}
    publish_run(store, run_id=run_id, logical_date=night(i), status="complete", provenance={"host": host},
                files={"results.parquet": to_parquet_bytes(to_frame([row]))})
    return run_id


def tonight(i: int, throughput_rps: float) -> tuple[dict, list[dict]]:
    host = collect_host_metadata()
    run = {"run_id": f"tonight{i}", "logical_date": night(i), "host": host}
    row = {**CELL, **{k: host[k] for k in ("cpu_model", "cpu_count", "gpu_name")}, "run_id": run["run_id"],
           "logical_date": night(i), "status": "ok", "throughput_rps": throughput_rps, "requests": 1000, "errors": 0,
           "error_rate": 0.0, "latency_ms_p50": 1000.0 / throughput_rps, "cv": 0.02, "windows": 4}
    return run, [row]


def throughput_record(regressions: dict) -> dict:
    return next(r for r in regressions["records"] if r.get("metric") == "throughput_rps")


@pytest.fixture()
def store(embedded_s3, bucket) -> S3Store:
    return S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))


def test_only_runs_before_the_logical_date_form_the_baseline(store, bucket):
    for i in range(6):
        fake_run(store, i, 1000.0 + i)
    fake_run(store, 10, 100.0)  # a later night, far slower: a backfill of night 6 must not see it
    config = RunConfig.from_params(fast_conf(bucket))
    run, rows = tonight(6, 1000.0)
    judged = judge_run(store, run, rows, [], config)
    record = throughput_record(judged)
    assert judged["history_runs"] == 6 and judged["history_before"] == night(6)
    assert [n["run_id"] for n in record["baseline_nights"]] == [f"fake{i:02d}" for i in range(6)]
    assert record["verdict"] == "no_change" and 1000 <= record["baseline"] <= 1005
    run, rows = tonight(3, 1000.0)  # a backfill of night 3: nights 0-2 only (night 3 itself is not before)
    assert judge_run(store, run, rows, [], config)["history_runs"] == 3


def test_a_run_excluded_through_the_cli_leaves_the_baseline(store, bucket, embedded_s3):
    for i in range(5):
        fake_run(store, i, 1000.0)
    fake_run(store, 5, 400.0, run_id="hog_night")  # the night someone ran a CPU hog next to the server
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tasks.cli", *args, "--bucket", bucket, "--prefix", "eval"],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=120)

    bad = cli("exclude", "no_such_run", "--reason", "x")
    assert bad.returncode == 2 and "run='no_such_run'" in bad.stderr
    bad = cli("exclude", "hog_night", "--cell", "nope", "--reason", "x")
    assert bad.returncode == 2 and "--cell='nope'" in bad.stderr and CELL_ID in bad.stderr
    done = cli("exclude", "hog_night", "--cell", CELL_ID, "--reason", "CPU hog on the server's core")
    assert done.returncode == 0, done.stderr
    listed = cli("exclusions")
    assert "hog_night" in listed.stdout and "CPU hog on the server's core" in listed.stdout

    config = RunConfig.from_params(fast_conf(bucket))
    run, rows = tonight(6, 1000.0)
    judged = judge_run(store, run, rows, [], config)
    record = throughput_record(judged)
    assert "hog_night" not in [n["run_id"] for n in record["baseline_nights"]]
    assert record["baseline"] == pytest.approx(1000.0) and record["verdict"] == "no_change"
    assert [e["reason"] for e in judged["exclusions"]] == ["CPU hog on the server's core"]

    exclusion_id = listed.stdout.split()[0]
    assert cli("include", exclusion_id).returncode == 0
    record = throughput_record(judge_run(store, run, rows, [], config))
    assert "hog_night" in [n["run_id"] for n in record["baseline_nights"]]


def test_the_dag_confirms_in_the_host_pool_between_regressions_and_publish():
    dag = load_dag_module().serving_eval_dag
    confirm = dag.get_task("confirm_local")  # one per measuring host (tasks/plan/hosts.py); `local` by default
    assert confirm.pool == "serving_eval_host_local"
    assert "regressions" in confirm.upstream_task_ids and "publish" in confirm.downstream_task_ids
    # empty in the form (the suite's value, else the default: the MLP on the custom service, confirmation on)
    assert dag.params["control_cell"] is None and dag.params["confirm_regressions"] is None
    from tasks.plan.config import RunConfig

    scheduled = RunConfig.from_params({k: dag.params[k] for k in dag.params})
    assert scheduled.control_cell == "mlp/onnx/custom" and scheduled.confirm_regressions is True


# --- real servers -------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_cli_run_with_a_logical_date_is_a_backfill(embedded_s3, bucket, store):
    fake_run(store, 30, 50.0)  # a later run that a backfill must not be compared with
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tasks.cli", "run", "--logical-date", "2026-02-05",
                           "--conf", json.dumps(fast_conf(bucket, concurrencies=[1]))],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [k for k in store.list_keys("eval/runs/") if k.endswith("manifest.json")]
    backfill = next(store.get_json(k) for k in runs if "dt=2026-02-05" in k)
    assert backfill["run_id"] == "cli__backfill__20260205T0000"
    regressions = read_json_object(store, backfill, "regressions.json")
    assert regressions["history_before"] == "2026-02-05T00:00:00+00:00" and regressions["history_runs"] == 0
    assert read_run(store)[0]["run_id"] == "fake30"  # a backfill never moves latest.json back


@pytest.fixture(scope="module")
def hogged_history(embedded_s3):
    """Three real nights of the MLP (ONNX: the control; TorchScript: the stack under test) on the custom
    service, whose class can put a busy thread into the TorchScript server for its next N starts."""
    embedded_s3.create_bucket("confirm-history")
    original = SERVERS["custom"]
    server_cls = register_server(hogged_custom_server())
    conf = fast_conf("confirm-history", formats=["onnx", "torchscript"], concurrencies=[1],
                     confirm_max_neighbour_pct=100)  # the development machine is shared: gate off here
    conn = embedded_s3.connection("serving_eval_s3")
    try:
        for i in range(4):
            run_pipeline(conf, run_id=f"history{i}", logical_date=night(i), conn=conn)
        yield server_cls, conf, conn
    finally:
        SERVERS["custom"] = original


def _torchscript(regressions: dict, metric: str = "throughput_rps") -> dict:
    return next(r for r in regressions["records"] if r.get("format") == "torchscript" and r["metric"] == metric)


@pytest.mark.integration
def test_a_stack_slowed_tonight_and_when_re_measured_is_a_confirmed_regression(hogged_history, embedded_s3):
    server_cls, conf, conn = hogged_history
    server_cls.duty_by_format, server_cls.starts_left = {"torchscript": 1.0}, {}  # every start is slowed
    summary, _ = run_pipeline(conf, run_id="slowed", logical_date=night(10), conn=conn)
    store = S3Store("confirm-history", "eval", conn)
    manifest = next(store.get_json(k) for k in store.list_keys("eval/runs/") if "run=slowed/manifest" in k)
    regressions = read_json_object(store, manifest, "regressions.json")
    record = _torchscript(regressions)
    assert record["verdict"] == "regression", json.dumps(record, indent=1, default=str)[:3000]
    confirmation = record["confirmation"]
    assert confirmation["outcome"] == "confirmed" and confirmation["change_pct"] < -30
    assert record["change_pct"] < -30 and record["history_n"] >= 3
    sessions = regressions["confirmation"]["sessions"]  # the control before and after the slowed stack's session
    at = next(i for i, s in enumerate(sessions) if s["role"] == "suspect" and ".torchscript." in s["session_id"])
    assert sessions[at - 1]["role"] == sessions[at + 1]["role"] == "control"
    assert regressions["control"]["measured"] and "throughput_rps" in regressions["control"]["drift"]
    assert any(r["metric"] == "throughput_rps" and r["format"] == "torchscript" for r in summary["regressions"])
    assert any(o["name"].startswith("logs/confirm") for o in manifest["objects"])  # the re-measurement's logs


@pytest.mark.integration
def test_a_one_off_blip_that_a_re_measurement_does_not_reproduce_is_unconfirmed(hogged_history):
    server_cls, conf, conn = hogged_history
    server_cls.duty_by_format, server_cls.starts_left = {"torchscript": 1.0}, {"torchscript": 1}  # tonight only
    # The busy-host gate on (its default): on a shared machine a re-measurement during other work may itself be
    # slow, and then it is no evidence (host_busy); on a quiet one it is simply not slow (not_reproduced); on a
    # host that slowed down meanwhile without visible neighbours (a VM's noisy host), the control moved too and the
    # stack's own part is not beyond it (host_drift).
    conf = {**conf, "confirm_max_neighbour_pct": 25.0}
    summary, _ = run_pipeline(conf, run_id="blip", logical_date=night(10), conn=conn)
    store = S3Store("confirm-history", "eval", conn)
    manifest = next(store.get_json(k) for k in store.list_keys("eval/runs/") if "run=blip/manifest" in k)
    regressions = read_json_object(store, manifest, "regressions.json")
    record = _torchscript(regressions)
    assert record["verdict"] == "unconfirmed", json.dumps(record, indent=1, default=str)[:3000]
    assert record["confirmation"]["outcome"] in ("not_reproduced", "host_busy", "host_drift")
    assert record["confirmation"]["reason"]
    assert record["change_pct"] < -30  # what the night measured, published next to why it is not an alarm
    assert not any(r["format"] == "torchscript" and r["metric"] == "throughput_rps" for r in summary["regressions"])
