"""The report's section on how each stack lives (schema 1.6): per server life, its start-up to ready, to its first
correct answer, its idle and peak memory and their growth over the load points, its processes and threads, and the
size of what it runs from; with bar charts of the time to the first correct answer and of the idle memory."""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.metrics import METRICS, number
from tasks.report.formatting import DASH, count_or_figure
from tasks.report.plots import bar_chart
from tasks.report.recommend import stack_of
from tasks.report.templating import render

LIFE_FIGURES = ("startup_s", "first_correct_s", "idle_rss_mb", "session_rss_peak_mb", "rss_growth_mb",
                "server_processes", "server_threads", "runtime_size_mb")
HEADINGS = {"server_processes": "processes", "server_threads": "threads"}



def server_lives(rows: list[dict]) -> list[dict]:
    """One record per server life: its stack, launcher, configuration and figures (the first row of each distinct
    set of them; a restarted server is a second life), in stack order; rows without figures (before 1.6, or not
    measured) are left out."""
    lives: dict[tuple, dict] = {}
    for row in rows:
        if number(row.get("first_correct_s")) is None and number(row.get("idle_rss_mb")) is None:
            continue
        key = (str(row.get("model")), stack_of(row), str(row.get("launcher")), str(row.get("config_id") or ""),
               *(number(row.get(f)) for f in LIFE_FIGURES))
        lives.setdefault(key, {"model": row.get("model"), "stack": stack_of(row), "launcher": row.get("launcher"),
                               "config_id": row.get("config_id"), "role": row.get("role"),
                               "runtime_image_kind": row.get("runtime_image_kind"),
                               **{f: _figure(row.get(f)) for f in LIFE_FIGURES}})
    return [lives[k] for k in sorted(lives, key=lambda k: k[:4])]


def _figure(value: object) -> float | int | None:
    """A figure as a number: counts (processes, threads) stay integers."""
    figure = number(value)
    return int(figure) if figure is not None and isinstance(value, int) else figure


def lifecycle_section(rows: list[dict]) -> Markup:
    """The section, or a line saying the run recorded none."""
    lives = server_lives(rows)
    lines = [{"model": life["model"], "stack": life["stack"], "control": life["role"] == "control",
              "launcher": life["launcher"], "config_id": life["config_id"] or DASH,
              "figures": [count_or_figure(life[f]) for f in LIFE_FIGURES]} for life in lives]
    heads = [(HEADINGS.get(f) or METRICS[f].label, None if f in HEADINGS else METRICS[f].unit) for f in LIFE_FIGURES]
    measured = [life for life in lives if life["role"] != "control"]
    first = [(f"{life['model']} {life['stack']}", life["first_correct_s"]) for life in measured
             if life["first_correct_s"] is not None]
    idle = [(f"{life['model']} {life['stack']}", life["idle_rss_mb"]) for life in measured
            if life["idle_rss_mb"] is not None]
    plots = []
    if first:
        plots.append(bar_chart("lifecycle-first-correct", "Start to the first correct answer", first,
                               METRICS["first_correct_s"].unit))
    if idle:
        plots.append(bar_chart("lifecycle-idle-memory", "Memory after load-in, before any load", idle,
                               METRICS["idle_rss_mb"].unit))
    return render("lifecycle.html", lives=lines, heads=heads, plots=plots)
