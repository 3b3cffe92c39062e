"""The CLI's store commands (runs, report, compare, trend) against the moto S3 server."""

from __future__ import annotations

import json

from tasks.cli.main import main
from tasks.pipeline import publish_step
from tests.dagrun import fast_conf

HOST = {"hostname": "h", "cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None, "gpu_driver": None}


def _row(run_id: str, date: str, server: str, rps: float, version: str = "1") -> dict:
    return {"run_id": run_id, "logical_date": date, "schema_version": "1.3", "pipeline_version": "0.1.0",
            "git_sha": "abc", "model": "mlp", "format": "onnx", "server": server, "launcher": "process",
            "device": "cpu", "batch_size": 1, "mode": "concurrency", "load": 2.0, "protocol": "kserve_v2_rest",
            "throughput_rps": rps, "latency_ms_p50": 1.0, "latency_ms_p99": 2.0, "cv": 0.01, "stable": True,
            "error_rate": 0.0, "server_cpu_pct": 95.0, "server_rss_mb": 200.0, "startup_s": 1.0,
            "server_version": version, "status": "ok", "suite": "smoke", **{k: HOST[k] for k in HOST}}


def publish(conn, bucket: str, run_id: str, day: int, rps: dict[str, float], version: str = "1",
            regressions: int = 0, tmp_path=None) -> dict:
    date = f"2026-11-{day:02d}T02:00:00+00:00"
    rows = [_row(run_id, date, server, value, version) for server, value in sorted(rps.items())]
    cells = [{k: r[k] for k in ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load",
                                "protocol")} | {"cell_id": f"mlp.onnx.{r['server']}.c2"} for r in rows]
    run_dir = tmp_path / run_id
    (run_dir / "logs").mkdir(parents=True)
    planned = {"config": fast_conf(bucket, servers=sorted(rps)), "conversions": [{"model": "mlp", "format": "onnx"}],
               "sessions": [{"session_id": c["cell_id"], "cells": [c]} for c in cells],
               "run": {"run_id": run_id, "logical_date": date, "run_dir": str(run_dir), "host": HOST,
                       "code": {"pipeline_version": "0.1.0", "git_sha": "abc"}}}
    flagged = [{"model": "mlp", "format": "onnx", "server": "triton", "load": 2.0, "metric": "throughput_rps",
                "unit": "req/s", "baseline": 1.0, "current": 0.5, "change_pct": -50.0, "method": "noise_band",
                "history_n": 3, "verdict": "regression"}] * regressions
    return publish_step(planned, {"rows": rows, "timelines": []}, [], {"success": True, "failed_expectations": []},
                        conn, {"records": flagged})




def test_runs_report_and_compare_read_the_published_runs(store_env, bucket, tmp_path, capsys):
    conn, store, opts = store_env
    publish(conn, bucket, "night1", 27, {"triton": 1000.0, "custom": 500.0}, tmp_path=tmp_path)
    publish(conn, bucket, "night2", 28, {"triton": 1005.0, "custom": 498.0}, tmp_path=tmp_path)
    summary = publish(conn, bucket, "night3", 29, {"triton": 700.0, "custom": 500.0}, regressions=1, tmp_path=tmp_path)

    trend = store.get_json(f"{summary['prefix']}/trend.json")
    assert trend["previous"]["run_id"] == "night2" and [n["run_id"] for n in trend["nights"]] == [
        "night1", "night2", "night3"]
    assert {c["server"]: c["verdict"] for c in trend["changes"]} == {"custom": "same", "triton": "worse"}
    capsys.readouterr()  # the publish steps' progress lines

    assert main(["runs", *opts]) == 0
    out = capsys.readouterr().out
    lines = out.split("\n\n")[0].splitlines()  # the runs; each stack's record over the nights after them
    assert "each stack's record over the last 3 nights of suite smoke" in out
    assert lines[0].split() == ["dt", "run_id", "status", "suite", "regressions", "git"]
    assert [line.split()[1:5] for line in lines[1:]] == [["night1", "complete", "smoke", "0"],
                                                        ["night2", "complete", "smoke", "0"],
                                                        ["night3", "complete", "smoke", "1"]]

    assert main(["runs", "--limit", "1", "--json", *opts]) == 0
    assert [(r["run_id"], r["suite"], r["regressions"]) for r in json.loads(capsys.readouterr().out)] == [
        ("night3", "smoke", 1)]

    out = tmp_path / "night3.html"
    assert main(["report", "night3", "--out", str(out), "--check", *opts]) == 0
    assert "identical to the published report.html" in capsys.readouterr().out
    assert out.read_bytes() == store.get(f"{summary['prefix']}/report.html")
    page = out.read_text()
    assert "Previous comparable run: <code>night2</code>" in page and "data-plot='trend-throughput_rps'" in page

    assert main(["compare", "night2", "night3", *opts]) == 1  # triton lost 30 % with a 1 % CV
    text = capsys.readouterr().out
    assert "mlp/onnx/triton b1 concurrency 2" in text and "1,005.00 -> 700.00 (-30.3%) --" in text
    assert "2 cells: 1 worse, 0 better, 1 same" in text
    assert main(["compare", "night1", "night2", *opts]) == 0  # within noise and the minimum change


def test_compare_json_and_unknown_runs(store_env, bucket, tmp_path, capsys):
    conn, _, opts = store_env
    publish(conn, bucket, "a", 27, {"triton": 1000.0}, tmp_path=tmp_path)
    publish(conn, bucket, "b", 28, {"triton": 1001.0, "custom": 400.0}, tmp_path=tmp_path)
    capsys.readouterr()
    assert main(["compare", "a", "b", "--json", *opts]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["incomparable"] == [] and {c["server"]: c["verdict"] for c in data["cells"]} == {
        "custom": "new", "triton": "same"}
    assert main(["compare", "a", "nope", *opts]) == 2
    assert "run='nope'" in capsys.readouterr().err
    assert main(["report", "latest", "--out", str(tmp_path / "l.html"), *opts]) == 0


def test_trend_skips_runs_with_other_server_versions(store_env, bucket, tmp_path):
    conn, store, _ = store_env
    publish(conn, bucket, "v1", 27, {"triton": 1000.0}, tmp_path=tmp_path)
    newer = publish(conn, bucket, "v2", 28, {"triton": 1000.0}, version="2", tmp_path=tmp_path)
    assert store.get_json(f"{newer['prefix']}/trend.json")["previous"] is None
    latest = publish(conn, bucket, "v1-again", 29, {"triton": 990.0}, tmp_path=tmp_path)
    trend = store.get_json(f"{latest['prefix']}/trend.json")
    assert trend["previous"]["run_id"] == "v1" and "v2 (triton 2 → 1)" in trend["previous_note"]
    assert len(trend["nights"]) == 3  # the trend keeps every night of the suite on this host
