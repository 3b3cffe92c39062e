"""A model's section (tasks/report/models.py): its latency plots draw each point's interval and its lower bounds."""

from __future__ import annotations

import re

from tasks.report.models import model_section


def _row(load: float, rps: float, **latency: float | None) -> dict:
    return {"model": "bert", "format": "onnx", "server": "triton", "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": load, "throughput_rps": rps, "latency_ms_p50": 400.0,
            "latency_ms_p50_ci_low": 390.0, "latency_ms_p50_ci_high": 415.0, "status": "ok", "error_rate": 0.0,
            "latency_samples": 60, **latency}


def test_the_latency_plots_draw_each_points_interval_and_a_lower_bound_at_its_value():
    rows = [_row(1, 3.0, latency_ms_p99=700.0, latency_ms_p99_ci_low=650.0, latency_ms_p99_ci_high=900.0),
            _row(2, 4.0, latency_ms_p99=None, latency_ms_p99_at_least=1200.0, latency_ms_p99_ci_low=1000.0,
                 latency_ms_p99_ci_high=None),
            _row(4, 4.2, latency_ms_p99=1500.0)]  # a row from before the intervals: its point, no bar
    section = model_section("bert", rows, 1000.0)
    p99 = re.search(r"<svg[^>]*data-plot='latency-p99'.*?</svg>", section, re.S).group(0)
    assert re.findall(r"data-series='([^']*)'", p99) == ["triton/onnx"]
    tips = re.findall(r"<(circle|path class='at-least')[^>]*><title>([^<]*)</title>", p99)
    assert [(mark.split()[0], tip.split(": ")[1].split(" ")[0]) for mark, tip in tips] == [
        ("circle", "3.00"), ("path", "4.00"), ("circle", "4.20")]  # by throughput: the lower bound a triangle
    assert "(95 % interval 650–900)" in tips[0][1]
    assert "≥ 1,200" in tips[1][1] and "(95 % interval 1,000–open)" in tips[1][1]
    assert "interval" not in tips[2][1] and p99.count("class='interval'") == 2
    assert "arrow: end not bounded" in p99 and "≥: a lower bound only" in p99
    p50 = re.search(r"<svg[^>]*data-plot='latency-p50'.*?</svg>", section, re.S).group(0)
    assert p50.count("class='interval'") == 3 and "class='at-least'" not in p50 and "lower bound" not in p50
    scaling = re.search(r"<svg[^>]*data-plot='scaling-concurrency'.*?</svg>", section, re.S).group(0)
    assert "class='interval'" not in scaling
