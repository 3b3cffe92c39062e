"""A trace as planned cells (`python -m tasks.cli run` with Params traces, trace_search): the speed search on a real
stack ends decided, its rows carry the trace's workload and are kept out of the fixed request's answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks.core.confidence import row_verdict
from tasks.loadgen.load_shapes import shape_trace
from tasks.loadgen.trace import TRACES_ENV, write_trace
from tasks.store.s3 import S3Store
from tests.dagrun import REPO, fast_conf, read_run, results_frame

pytestmark = pytest.mark.integration
BOUND_MS = 100.0


def test_a_trace_speed_search_on_the_custom_service_ends_decided(embedded_s3, bucket, tmp_path):
    """800 requests in 2 s (400 req/s) replayed faster and faster: the search claims the largest speed whose bound
    holds, and the next faster one it ran did not pass."""
    trace = shape_trace("step", {"rates_rps": [400.0], "step_s": 2.0}, name="steady-400")
    write_trace(tmp_path / "steady-400.csv", trace, made_by="tests/integration/test_trace_cells.py")
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO),
           TRACES_ENV: str(tmp_path)}
    conf = fast_conf(bucket, concurrencies=[1], traces=["steady-400"], trace_search=True, trace_speeds=[1],
                     p99_bound_ms=BOUND_MS)
    proc = subprocess.run([sys.executable, "-m", "tasks.cli", "run", "--run-id", "trace_test", "--conf",
                           json.dumps(conf)], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    rows = results_frame(store, manifest).to_dict("records")
    fixed = [r for r in rows if r["workload"] == "fixed"]
    replays = sorted((r for r in rows if r["workload"] == trace.label), key=lambda r: r["load"])
    assert [r["mode"] for r in fixed] == ["concurrency"]
    assert {r["mode"] for r in replays} == {"trace"}, [(r["mode"], r["load"], r["reason"]) for r in replays]
    assert len(replays) >= 3, [(r["load"], r["status"], r["reason"]) for r in rows]
    holding = [r["load"] for r in replays if r["status"] == "ok" and row_verdict(r, BOUND_MS) == "holds"
               and not r["generator_saturated"]]  # a replay the generator did not keep claims nothing
    assert holding, [(r["load"], r["status"], r["latency_ms_p99"], r["reason"]) for r in replays]
    best = max(holding)
    faster = [r for r in replays if r["load"] > best]
    assert faster, "the search never ran past the speed it claims"
    assert all(r["status"] != "ok" or row_verdict(r, BOUND_MS) != "holds" or r["generator_saturated"]
               for r in faster)
    for r in replays:  # every measured request of a replay is the trace's, none lost
        if r["status"] == "ok":
            assert r["requests"] + r["warmup_requests"] == trace.arrivals and r["errors"] == 0
    page = store.get(f"{manifest['prefix']}/report.html").decode()
    assert "Under a trace" in page and f"holds up to {best:g} × the recorded speed" in page
