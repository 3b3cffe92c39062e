"""The engines section (tasks/report/configs.py): a stack served slower than its engine in process shows the gap;
one served faster than the engine's figure cannot be, so that figure is flagged as in doubt, never a negative gap."""

from __future__ import annotations

import json
import re

from tasks.report.configs import configurations_section, engine_section


def _row(server: str, served: float, engine: float) -> dict:
    return {"model": "resnet50", "format": "onnx", "server": server, "engine": "onnxruntime", "status": "ok",
            "mode": "concurrency", "load": 1.0, "batch_size": 1, "wire": "grpc", "config_id": "default",
            "throughput_rps": served, "engine_inprocess_rps": engine}


def test_a_stack_faster_than_its_engines_figure_flags_the_figure_not_a_negative_gap():
    page = str(engine_section([_row("triton", 11.6, 9.58), _row("torchserve", 4.33, 6.21)]))
    cells = dict(re.findall(r"<td class=l>(\w+)/onnx</td>.*?<td(?: class=bad)?>([^<]*)</td>\s*</tr>", page, re.S))
    assert cells == {"triton": "in doubt: served 21 % faster than this figure", "torchserve": "30 %"}
    assert "-21 %" not in page and page.count("class=bad") == 2  # both marked: one a real gap, one a doubt


def _tuned_row(config_id: str, throughput: float, p99: float, verdict: str) -> dict:
    return {**_row("triton", throughput, 9.58), "config_id": config_id, "best_config": config_id != "default",
            "latency_ms_p99": p99, "config": '{"instances": 2}' if config_id != "default" else None,
            "p99_bounds": json.dumps({"200.0": {"verdict": verdict, "exceed": 0, "effective": 40.0,
                                                "more_requests": 259 if verdict == "undecided" else 0}})}


def test_the_tuned_table_scores_only_points_whose_bound_holds_not_a_p99_under_it():
    """A point of 40 requests whose p99 estimate is under the bound is undecided at it: no score, whatever its
    throughput (docs/measuring.md#confidence: a bound is decided, not compared)."""
    search = {"model": "resnet50", "server": "triton", "format": "onnx", "p99_bound_ms": 200.0,
              "best": {"config_id": "c1"}, "trials": []}
    rows = [_tuned_row("default", 9.0, 150.0, "holds"), _tuned_row("c1", 12.0, 150.0, "undecided")]
    page = str(configurations_section(rows, {"searches": [search]}))
    assert "+33.3 %" not in page, page  # the undecided trial is not the tuned figure: no gain claimed
    rows[1] = _tuned_row("c1", 12.0, 150.0, "holds")
    assert "+33.3 %" in str(configurations_section(rows, {"searches": [search]}))
