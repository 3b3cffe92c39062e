"""The engines section (tasks/report/configs.py): a stack served slower than its engine in process shows the gap;
one served faster than the engine's figure cannot be, so that figure is flagged as in doubt, never a negative gap."""

from __future__ import annotations

import re

from tasks.report.configs import engine_section


def _row(server: str, served: float, engine: float) -> dict:
    return {"model": "resnet50", "format": "onnx", "server": server, "engine": "onnxruntime", "status": "ok",
            "mode": "concurrency", "load": 1.0, "batch_size": 1, "wire": "grpc", "config_id": "default",
            "throughput_rps": served, "engine_inprocess_rps": engine}


def test_a_stack_faster_than_its_engines_figure_flags_the_figure_not_a_negative_gap():
    page = str(engine_section([_row("triton", 11.6, 9.58), _row("torchserve", 4.33, 6.21)]))
    cells = dict(re.findall(r"<td class=l>(\w+)/onnx</td>.*?<td(?: class=bad)?>([^<]*)</td>\s*</tr>", page, re.S))
    assert cells == {"triton": "in doubt: served 21 % faster than this figure", "torchserve": "30 %"}
    assert "-21 %" not in page and page.count("class=bad") == 2  # both marked: one a real gap, one a doubt
