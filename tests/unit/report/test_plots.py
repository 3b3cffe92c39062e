"""Plots (tasks/report/plots.py): plain SVG, log axes for wide ranges."""

from __future__ import annotations

from tasks.report.plots import Series, bar_chart, line_chart


def test_plots_are_plain_svg_with_log_axes_for_wide_ranges():
    chart = line_chart("x", "t <b>", [Series("a/b", ((1.0, 1.0), (1000.0, 500.0)))], "req/s", "ms")
    assert chart.startswith("<svg") and chart.endswith("</svg>") and "t &lt;b&gt;" in chart
    assert "(log scale)" in chart and chart == line_chart("x", "t <b>", [Series("a/b", ((1.0, 1.0),
                                                                                          (1000.0, 500.0)))],
                                                           "req/s", "ms")
    assert "no points to draw" in line_chart("x", "t", [], "a", "b")
    assert bar_chart("b", "t", [("x", 2.0), ("y", 1.0)], "MiB").count("<rect") == 2
