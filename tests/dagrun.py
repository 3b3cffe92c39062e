"""Helpers for whole-run tests: loading the DAG (or a plugin) fresh, reading a published run back, leftover checks."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
DAG_FILE = REPO / "dags" / "nightly_serving_eval.py"


def load_dag_module(path: Path = DAG_FILE, name: str | None = None):
    """Import a DAG file as a fresh module (so Params enums see servers registered by the test), as `dag.test()`
    runs it: without the nightly's deadline alert, which dag.test() does not evaluate and, in Airflow 3.3.2, cannot
    finish a successful run with (tasks/plan/deadline_alert.py; tests/integration/test_deadline_alert.py tests the
    alert under a real scheduler and triggerer)."""
    from tasks.plan.deadline_alert import DEADLINE_ENV, DEADLINE_OFF

    name = name or f"_dag_under_test_{path.stem}_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    before = os.environ.get(DEADLINE_ENV)
    os.environ[DEADLINE_ENV] = DEADLINE_OFF
    try:
        spec.loader.exec_module(module)
    finally:
        if before is None:
            os.environ.pop(DEADLINE_ENV, None)
        else:
            os.environ[DEADLINE_ENV] = before
    return module


def load_reports_plugin():
    """The reports plugin module, imported from its file as Airflow's plugin manager does."""
    spec = importlib.util.spec_from_file_location("serving_eval_reports", REPO / "plugins" / "serving_eval_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Whole-run tests test other things, on a shared machine whose other work would make their points contended and
# their runs partial: they record the host's state but do not judge it. The judgement has its own tests
# (tests/unit/measure/test_hoststate.py, tests/unit/validate/test_outcome.py; tests/integration/test_contention.py
# with a real server and a spinner on its core).
HOST_NOT_JUDGED = {"max_neighbour_pct": 100.0}

# Whole-run tests that do not test the control leave it out: tonight's A/A duet of the control cell (two servers, four
# pairs) and, where the plan holds no control cell, the control's own session cost about 20 s of a 60-80 s run (py-spy
# over tests/integration/test_pipeline_dag.py, 2026-12-03). The control has its own tests: test_regress_pipeline.py,
# test_docker_pipeline.py (they set `control_cell`).
NO_CONTROL = {"control_cell": "none"}


def fast_conf(bucket: str, **overrides) -> dict:
    conf = {"suite": "smoke", "models": ["mlp"], "formats": ["onnx"], "servers": ["custom"], "concurrencies": [1, 2],
            "duration_s": 1.5, "warmup_s": 0.3, "window_s": 0.5, "s3_bucket": bucket, "s3_prefix": "eval",
            "aws_conn_id": "serving_eval_s3", "ready_timeout_s": 60, **HOST_NOT_JUDGED, **NO_CONTROL}
    conf.update(overrides)
    return conf


def read_run(store) -> tuple[dict, dict]:
    """(latest pointer, manifest) of the newest published run."""
    pointer = store.get_json(store.key("latest.json"))
    return pointer, store.get_json(pointer["manifest"])


def verify_manifest(store, manifest: dict) -> None:
    """Exactly the manifest's objects exist under the run prefix, each with the listed size and SHA-256."""
    listed = {o["key"] for o in manifest["objects"]}
    present = set(store.list_keys(manifest["prefix"] + "/")) - {manifest["prefix"] + "/manifest.json"}
    assert present == listed, f"unlisted objects {sorted(present - listed)} / missing {sorted(listed - present)}"
    for obj in manifest["objects"]:
        data = store.get(obj["key"])
        assert len(data) == obj["size_bytes"], obj["key"]
        assert hashlib.sha256(data).hexdigest() == obj["sha256"], obj["key"]


def results_frame(store, manifest: dict):
    import pandas as pd

    return pd.read_parquet(io.BytesIO(store.get(f"{manifest['prefix']}/results.parquet")))


def read_json_object(store, manifest: dict, name: str):
    return json.loads(store.get(f"{manifest['prefix']}/{name}"))


def serving_processes() -> list[psutil.Process]:
    """Live processes started by a server session: the process launcher gives each session's process tree
    TMPDIR=<session workdir>/tmp, under the temp dir's serving-eval-<server>-* folders."""
    marker = str(Path(tempfile.gettempdir()) / "serving-eval-")
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            tmp = proc.environ().get("TMPDIR", "")
            zombie = proc.status() == psutil.STATUS_ZOMBIE
        except (psutil.Error, OSError):
            continue
        if proc.pid != os.getpid() and not zombie and tmp.startswith(marker):
            found.append(proc)
    return found


def session_temp_dirs() -> set[str]:
    """Server session work dirs (serving-eval-<server>-*) in the temp dir."""
    return {p.name for p in Path(tempfile.gettempdir()).glob("serving-eval-*") if "-test-" not in p.name}


def port_is_free(port: int) -> bool:
    """Nothing listens on the port (SO_REUSEADDR: connections in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
