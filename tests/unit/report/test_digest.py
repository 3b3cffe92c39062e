"""The digest (tasks/report/digest.py): the best stack per model."""

from __future__ import annotations

import pandas as pd

from tasks.report.digest import best_stacks, render_markdown
from tests.unit.report.test_page import _row


def test_digest_picks_the_best_stack_per_model():
    frame = pd.DataFrame([_row("triton", 3000.0, 1.5), _row("custom", 2000.0, 2.5)])
    best = best_stacks(frame)
    assert best[0]["server"] == "triton" and best[0]["runner_up"]["server"] == "custom"
    md = render_markdown({"logical_date": "2026-11-29", "run_status": "complete", "run_id": "r", "cells": 2,
                          "failed_cells": 0, "best": best, "regressions": []})
    assert "| mlp | 1 | triton/onnx |" in md and "None." in md


def test_the_digest_lists_what_is_not_settled_apart_from_the_regressions():
    from tasks.report.digest import make_digest

    record = {"kind": "duet", "model": "mlp", "format": "onnx", "server": "custom", "load": 1.0,
              "metric": "latency_ms_p50", "verdict": "undecided", "duet_ratio": 1.03, "change_pct": 17.4,
              "change_ci": [-2.0, 40.1], "reference_run_id": "night1"}
    frame = pd.DataFrame([_row("triton", 3000.0, 1.5)])
    manifest = {"run_id": "r", "logical_date": "2026-11-29", "status": "complete", "prefix": "runs/r"}
    digest = make_digest(manifest, frame, {"records": [record, {**record, "verdict": "no_change"}]})
    assert digest["regressions"] == [] and digest["not_settled"] == [record]
    md = render_markdown(digest)
    assert "## Regressions (0)" in md and "## Not settled (1)" in md
    assert "- mlp/onnx/custom/1.0: latency_ms_p50 +17.4 % alone [-2.0, +40.1] (the duet x1.030; undecided)" in md
