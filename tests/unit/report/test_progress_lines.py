"""What each pipeline step's progress line says (tasks/report/progress_lines.py), from the step's own output."""

from __future__ import annotations

from tasks.report.progress_lines import (
    check_figure,
    collected_figure,
    conversion_figure,
    plan_figure,
    publish_figure,
    regress_figure,
    validation_figure,
)


def test_each_steps_figure_is_read_from_its_output():
    started = {"sessions": [{"cells": [1, 2]}, {"cells": [3]}], "night": {"deferred": [{"cell_id": "c"}]}}
    assert plan_figure(started) == "2 server sessions, 3 cells, 1 deferred"
    cached = {"model": "mlp", "format": "onnx", "cache_hit": True}
    assert conversion_figure(cached) == "mlp/onnx from the artifact cache"
    assert conversion_figure({"model": "mlp", "format": "tensorrt", "skipped": "needs a GPU"}) == "mlp/tensorrt skipped"
    assert conversion_figure({"model": "mlp", "format": "onnx", "error": "boom"}) == "mlp/onnx failed"
    assert collected_figure({"rows": [{"status": "ok"}, {"status": "failed"}]}) == "1 of 2 rows ok"
    assert validation_figure({"success": False}) == "failed"
    assert check_figure({"duets": [{}, {}]}) == "2 changed cells to measure beside their reference"
    assert regress_figure({"regressions": 1, "not_settled": 2}) == "1 regressions, 2 not settled, 0 left"
    assert publish_figure({"status": "partial", "manifest": None}) == "status partial, kept for tasks.cli publish"
