"""The report's section on how each stack lives (schema 1.6): per server life, its start-up to ready, to its first
correct answer, its idle and peak memory and their growth over the load points, its processes and threads, and the
size of what it runs from; with bar charts of the time to the first correct answer and of the idle memory."""

from __future__ import annotations

from tasks.core.metrics import METRICS, number
from tasks.report.formatting import escape
from tasks.report.plots import bar_chart, format_value
from tasks.report.recommend import stack_of

LIFE_FIGURES = ("startup_s", "first_correct_s", "idle_rss_mb", "session_rss_peak_mb", "rss_growth_mb",
                "server_processes", "server_threads", "runtime_size_mb")
HEADINGS = {"server_processes": "processes", "server_threads": "threads"}



def _fmt(value: object) -> str:
    figure = number(value)
    if figure is None:
        return "–"
    if isinstance(value, int) or abs(figure) >= 100:
        return f"{figure:,.0f}"
    return format_value(figure)


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


def lifecycle_section(rows: list[dict]) -> str:
    """The section, or a line saying the run recorded none."""
    parts = ["<h2 id=lifecycle>How each stack lives</h2>",
             "<p class=note>Per server life (a start, its load points, its stop): from the start to its first ready "
             "answer, and to the first answer that passed the served-output check (its first request sent once it "
             "is ready: the difference is the first inference's own cost); its memory after load-in and the check, "
             "before any load (summed over its process tree; a container's as <code>docker stats</code> counts it); "
             "its highest memory over the life; what it kept from its load (the memory read after its last point "
             "less after its first, the server idle both times); its processes and threads after load-in; and the "
             "size of what it runs from (the image on the engine, or the runtime venv on disk).</p>"]
    lives = server_lives(rows)
    if not lives:
        return "".join(parts) + "<p>This run recorded no lifecycle figures (its rows predate schema 1.6).</p>"
    head = "".join(f"<th>{escape(HEADINGS.get(f) or METRICS[f].label)}"
                   f"{'' if f in HEADINGS else f'<br>({escape(METRICS[f].unit)})'}</th>" for f in LIFE_FIGURES)
    parts.append(f"<table class=lifecycle><tr><th class=l>model</th><th class=l>stack</th><th class=l>launcher</th>"
                 f"<th class=l>config</th>{head}</tr>")
    for life in lives:
        role = " (control)" if life["role"] == "control" else ""
        parts.append(f"<tr><td class=l>{escape(life['model'])}</td><td class=l>{escape(life['stack'])}{role}</td>"
                     f"<td class=l>{escape(life['launcher'])}</td><td class=l>{escape(life['config_id'] or '–')}</td>"
                     + "".join(f"<td>{_fmt(life[f])}</td>" for f in LIFE_FIGURES) + "</tr>")
    parts.append("</table>")
    first = [(f"{life['model']} {life['stack']}", life["first_correct_s"]) for life in lives
             if life["first_correct_s"] is not None and life["role"] != "control"]
    idle = [(f"{life['model']} {life['stack']}", life["idle_rss_mb"]) for life in lives
            if life["idle_rss_mb"] is not None and life["role"] != "control"]
    plots = []
    if first:
        plots.append(bar_chart("lifecycle-first-correct", "Start to the first correct answer", first,
                               METRICS["first_correct_s"].unit))
    if idle:
        plots.append(bar_chart("lifecycle-idle-memory", "Memory after load-in, before any load", idle,
                               METRICS["idle_rss_mb"].unit))
    return "".join(parts) + (f"<div class=plots>{''.join(plots)}</div>" if plots else "")
