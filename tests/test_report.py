"""The HTML report and the digest: the best value per metric marked by the metric table's direction."""

from __future__ import annotations

import pandas as pd

from tasks.digest import best_stacks, render_markdown
from tasks.report import render_report


def _row(server: str, rps: float, p99: float, status: str = "ok", reason: str | None = None) -> dict:
    return {"model": "mlp", "format": "onnx", "server": server, "batch_size": 1, "mode": "concurrency", "load": 4.0,
            "throughput_rps": rps, "latency_ms_p50": p99 / 2, "latency_ms_p99": p99, "error_rate": 0.0,
            "server_cpu_pct": 90.0, "server_rss_mb": 100.0, "startup_s": 1.0, "stable": True, "status": status,
            "reason": reason, "cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None}


def test_report_marks_the_best_value_by_direction_and_shows_failures():
    rows = [_row("triton", 3000.0, 1.5), _row("custom", 2000.0, 2.5),
            _row("torchserve", 0.0, 0.0, status="failed", reason="server exited with code 1 <boom>")]
    page = render_report(rows, [{"model": "mlp", "format": "onnx", "max_abs_err": 1e-7, "atol": 1e-4,
                                 "passed": True}], {"success": True}, {"records": []},
                         {"run_id": "r1", "logical_date": "2026-11-29T02:00:00", "status": "partial"})
    assert "<td class='best'>3,000.00</td>" in page  # throughput: higher is better
    assert "<td class='best'>1.50</td>" in page  # p99: lower is better
    assert "server exited with code 1 &lt;boom&gt;" in page  # reasons are shown, escaped
    assert "status <b>partial</b>" in page


def test_digest_picks_the_best_stack_per_model():
    frame = pd.DataFrame([_row("triton", 3000.0, 1.5), _row("custom", 2000.0, 2.5)])
    best = best_stacks(frame)
    assert best[0]["server"] == "triton" and best[0]["runner_up"]["server"] == "custom"
    md = render_markdown({"logical_date": "2026-11-29", "run_status": "complete", "run_id": "r", "cells": 2,
                          "failed_cells": 0, "best": best, "regressions": []})
    assert "| mlp | 1 | triton/onnx |" in md and "None." in md
