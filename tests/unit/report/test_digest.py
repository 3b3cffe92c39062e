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
