"""The pipeline without a scheduler (`python -m tasks.cli run`): the same steps and outputs as the DAG."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks.store.s3 import S3Store
from tests.dagrun import REPO, fast_conf, read_run, results_frame, verify_manifest

pytestmark = pytest.mark.integration


def test_cli_run_publishes_a_run(embedded_s3, bucket):
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tasks.cli", "run", "--run-id", "cli_test",
                           "--conf", json.dumps(fast_conf(bucket, concurrencies=[2]))],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "custom" in proc.stdout and '"status": "complete"' in proc.stdout
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    pointer, manifest = read_run(store)
    assert pointer["run_id"] == "cli_test"
    verify_manifest(store, manifest)
    frame = results_frame(store, manifest)
    assert list(frame["status"]) == ["ok"] and frame["throughput_rps"][0] > 0
    assert frame["host_state"][0] and frame["neighbour_cpu_pct"].notna().all()  # recorded, not judged here
    findings = {f["name"]: f for f in manifest["provenance"]["host_check"]}  # the plan step's pre-flight check
    assert {"cpus", "hw_counters", "memory", "disk"} <= set(findings) and "host check: " in proc.stdout


def test_cli_run_rejects_bad_params_naming_the_field():
    proc = subprocess.run([sys.executable, "-m", "tasks.cli", "run", "--conf", '{"concurrencies": [0]}'],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    assert "concurrencies" in proc.stderr
