"""Plots (tasks/report/plots.py): plain SVG, log axes for wide ranges, intervals and lower bounds drawn."""

from __future__ import annotations

import re

from tasks.report.plots import Series, bar_chart, line_chart


def test_plots_are_plain_svg_with_log_axes_for_wide_ranges():
    chart = line_chart("x", "t <b>", [Series("a/b", ((1.0, 1.0), (1000.0, 500.0)))], "req/s", "ms")
    assert chart.startswith("<svg") and chart.endswith("</svg>") and "t &lt;b&gt;" in chart
    assert "(log scale)" in chart and chart == line_chart("x", "t <b>", [Series("a/b", ((1.0, 1.0),
                                                                                          (1000.0, 500.0)))],
                                                           "req/s", "ms")
    assert "no points to draw" in line_chart("x", "t", [], "a", "b")
    assert bar_chart("b", "t", [("x", 2.0), ("y", 1.0)], "MiB").count("<rect") == 2


def _marks(chart: str, series: str) -> str:
    found = re.search(rf"<g class='series' data-series='{re.escape(series)}'>.*?</g>", chart, re.S)
    assert found, series
    return found.group(0)


def test_a_point_draws_its_interval_and_a_lower_bound_is_a_hollow_triangle():
    closed = Series("a", ((1.0, 10.0), (2.0, 12.0)), ("c1", "c2"), ((9.0, 11.0), None))
    open_above = Series("b", ((1.0, 20.0), (2.0, 30.0)), ("c1", "c2"), ((18.0, None), (25.0, 33.0)), (True, False))
    chart = line_chart("latency-p99", "t", [closed, open_above], "req/s", "ms")
    top = re.search(r"<rect x='64' y='(\d+)'", chart).group(1)

    a = _marks(chart, "a")
    assert a.count("class='interval'") == 1 and "class='at-least'" not in a and a.count("<circle") == 2
    assert "(95 % interval 9.00–11.0)" in a and "12.0 ms</title>" in a  # the second point has no interval
    b = _marks(chart, "b")
    bars = re.findall(r"class='interval' d='([^']*)'", b)
    assert len(bars) == 2
    x = bars[0].split(",")[0][1:]
    assert bars[0].count(f"L{x},{top}.0") == 2  # runs up to the plot's top and ends there in an arrowhead
    assert f",{top}.0" not in bars[1] and len(re.findall(r" M[\d.]+,[\d.]+ L", bars[1])) == 2  # a cap at each end
    assert b.count("class='at-least'") == 1 and b.count("<circle") == 1  # the first point only, hollow
    assert "fill='#fff'" in re.search(r"<path class='at-least'[^>]*>", b).group(0)
    assert "c1: 1.00 req/s, ≥ 20.0 ms (95 % interval 18.0–open)" in b
    assert all(text in chart for text in ("bar: 95 % interval", "arrow: end not bounded", "≥: a lower bound only"))

    plain = line_chart("x", "t", [Series("a", ((1.0, 10.0), (2.0, 12.0)))], "req/s", "ms")
    assert "class='interval'" not in plain and "95 % interval" not in plain and "lower bound" not in plain
    assert chart == line_chart("latency-p99", "t", [closed, open_above], "req/s", "ms")
