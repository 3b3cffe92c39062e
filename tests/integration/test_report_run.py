"""A real run's report: two nights of the real custom server (ONNX and TorchScript, two stacks) published to the
moto S3 server by the pipeline, then read back with the CLI as a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tasks.pipeline import run_pipeline
from tasks.report.page import rebuild_report
from tasks.store.history import find_run
from tasks.store.s3 import S3Store
from tests.dagrun import REPO, fast_conf, serving_processes, session_temp_dirs

pytestmark = pytest.mark.integration

STACKS = ["custom/onnx", "custom/torchscript"]


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tasks.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)


def test_a_real_runs_report_holds_every_cell_the_plots_the_recommendation_and_the_changes(
        embedded_s3, bucket, tmp_path):
    conn = embedded_s3.connection("serving_eval_s3")
    conf = fast_conf(bucket, formats=["onnx", "torchscript"], concurrencies=[1, 2])
    before = session_temp_dirs()
    for run_id, day in (("night1", 28), ("night2", 29)):
        summary, _ = run_pipeline(conf, run_id=run_id, logical_date=f"2026-11-{day}T02:00:00+00:00", conn=conn)
        assert summary["status"] == "complete", summary
    assert not serving_processes() and session_temp_dirs() <= before

    store = S3Store(bucket, "eval", conn)
    manifest = find_run(store, "night2")
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    assert "trend.json" in names
    page = store.get(names["report.html"]).decode()
    plan = json.loads(store.get(names["plan.json"]))
    cells = [c["cell_id"] for s in plan["sessions"] for c in s["cells"]]
    assert len(cells) == 4
    for cell in cells:
        assert f"<code>{cell}</code>" in page
    for plot in ("latency-p99", "latency-p50", "scaling-concurrency", "efficiency-cpu", "efficiency-memory"):
        svg = re.search(rf"<svg[^>]*data-plot='{plot}'.*?</svg>", page, re.S)
        assert svg and re.findall(r"data-series='([^']*)'", svg.group(0)) == STACKS, plot
    assert "<table class=recommendation>" in page and "no bound" in page
    assert "<h2 id=changes>" in page and "Previous comparable run: <code>night1</code>" in page
    assert "<table class=changes>" in page and "data-plot='trend-throughput_rps'" in page
    assert "<script" not in page
    lifecycle = re.search(r"<table class=lifecycle>.*?</table>", page, re.S).group(0)
    assert all(f"<td class=l>{stack}</td>" in lifecycle for stack in STACKS)  # each server life, with its figures
    features = re.search(r"<table class=features>.*?</table>", page, re.S).group(0)
    assert "<th class=l>custom</th>" in features and features.count("probed ✓") == 4  # metrics, ready, binary, v2

    # Rebuilt from the store alone, the page is the same, byte for byte.
    assert rebuild_report(store, manifest).encode() == store.get(names["report.html"])

    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO)}
    opts = ["--bucket", bucket, "--prefix", "eval"]
    runs = _cli("runs", *opts, env=env)
    assert runs.returncode == 0, runs.stderr[-2000:]
    assert [line.split()[1:3] for line in runs.stdout.split("\n\n")[0].splitlines()[1:]] == [["night1", "complete"],
                                                                           ["night2", "complete"]]
    out = tmp_path / "night2.html"
    report = _cli("report", "night2", "--out", str(out), "--check", *opts, env=env)
    assert report.returncode == 0, report.stdout + report.stderr[-2000:]
    assert out.read_bytes() == store.get(names["report.html"])
    compare = _cli("compare", "night1", "night2", *opts, env=env)
    assert compare.returncode in (0, 1), compare.stderr[-2000:]  # 1: a cell got worse beyond noise on this host
    assert all(f"mlp/{fmt}/custom b1 concurrency {c}" in compare.stdout for fmt in ("onnx", "torchscript")
               for c in (1, 2))
    assert "4 cells:" in compare.stdout
    missing = _cli("report", "no-such-run", *opts, env=env)
    assert missing.returncode == 2 and "run='no-such-run'" in missing.stderr
