"""Report sections about serving configurations and engines (issue "each stack at its best").

- `headline_rows`: the rows the report's plots, tables and recommendation show per stack: its best configuration
  from the run's search (`best_config`) where one ran, else its default. Every configuration's rows stay in
  the published results; only the headline picks one per stack, so lines never mix configurations.
- `configurations_section`: per model, default against tuned for every stack (each configuration's score is its
  highest throughput among ok points with p99 within the search's bound), the knob values that won, the tuned
  ranking, and how throughput scales with instances/workers (table and plot).
- `engine_section`: where stacks serve the same engine, each stack's throughput at concurrency 1 next to the
  engine's own speed in process with the same threads on the same CPUs (`engine_inprocess_rps`): the gap is
  serving overhead.
"""

from __future__ import annotations

import json

from tasks.core.metrics import number
from tasks.report.formatting import escape
from tasks.report.plots import Series, format_value, line_chart
from tasks.report.recommend import ok_rows, stack_of
from tasks.serve.knobs import DEFAULT_CONFIG_ID, describe


def _config_id(row: dict) -> str:
    return str(row.get("config_id") or DEFAULT_CONFIG_ID)


def headline_rows(rows: list[dict]) -> list[dict]:
    """Per (model, stack): the rows of its best configuration when a search chose one, else of its default;
    never the control cell's rows (measured to tell the host's drift, not compared)."""
    best = {(r.get("model"), stack_of(r)): _config_id(r) for r in rows if r.get("best_config") is True}
    return [r for r in rows if r.get("role") != "control"
            and _config_id(r) == best.get((r.get("model"), stack_of(r)), DEFAULT_CONFIG_ID)]


def _score(rows: list[dict], bound: float | None) -> tuple[float | None, dict | None]:
    within = [r for r in ok_rows(rows) if bound is None or (number(r.get("latency_ms_p99")) or float("inf")) <= bound]
    if not within:
        return None, None
    top = max(within, key=lambda r: number(r.get("throughput_rps")) or 0.0)
    return number(top.get("throughput_rps")), top


def configurations_section(rows: list[dict], tuning: dict | None) -> str:
    """The search's results per model, or "" when the run searched no configuration."""
    searches = (tuning or {}).get("searches") or []
    if not searches and len({_config_id(r) for r in rows}) <= 1:
        return ""
    by_session = {(s.get("model"), s.get("server"), s.get("format")): s for s in searches}
    parts = ["<h2 id=configurations>Serving configurations</h2>",
             "<p class=note>Each stack was measured in every configuration its search tried (the same load points "
             "each time); a configuration's score is its highest throughput among ok points with p99 within the "
             "search's bound. The headline figures above use each stack's best configuration.</p>"]
    for model in sorted({str(r.get("model")) for r in rows}):
        model_rows = [r for r in rows if str(r.get("model")) == model]
        table, ranking, scaling = [], [], {}
        for stack in sorted({stack_of(r) for r in model_rows}):
            server, fmt = stack.split("/", 1)
            search = by_session.get((model, server, fmt)) or {}
            bound = search.get("p99_bound_ms")
            mine = [r for r in model_rows if stack_of(r) == stack]
            default_score, _ = _score([r for r in mine if _config_id(r) == DEFAULT_CONFIG_ID], bound)
            best_id = (search.get("best") or {}).get("config_id") or next(
                (_config_id(r) for r in mine if r.get("best_config") is True), DEFAULT_CONFIG_ID)
            best_rows = [r for r in mine if _config_id(r) == best_id]
            best_score, best_row = _score(best_rows, bound)
            defaults = search.get("defaults") or {}
            values = json.loads(best_rows[0]["config"]) if best_rows and best_rows[0].get("config") else {}
            gain = (100.0 * (best_score / default_score - 1)) if best_score and default_score else None
            tried = len({_config_id(r) for r in mine})
            table.append(f"<tr><td class=l>{escape(stack)}</td><td>{_fmt(default_score)}</td>"
                         f"<td>{_fmt(best_score)}</td>"
                         f"<td>{'–' if gain is None else f'{gain:+.1f} %'}</td>"
                         f"<td class=l>{escape(describe(values, defaults) if defaults else best_id)}</td>"
                         f"<td>{tried}</td><td>{_fmt(bound)}</td>"
                         f"<td class=l>{escape(search.get('method') or '–')}: "
                         f"{escape(search.get('stop_reason') or '–')}"
                         f"</td></tr>")
            if best_score is not None:
                ranking.append((best_score, stack, best_row))
            for trial in search.get("trials") or []:
                instances = (trial.get("config") or {}).get("instances")
                if instances is not None and trial.get("score_rps") is not None:
                    points = scaling.setdefault(stack, {})
                    points[instances] = max(points.get(instances, 0.0), float(trial["score_rps"]))
        parts.append(f"<h3>{escape(model)}: default against tuned</h3><table><tr><th class=l>stack</th>"
                     "<th>default (req/s)</th><th>tuned (req/s)</th><th>gain</th><th class=l>winning knobs</th>"
                     "<th>configurations</th><th>p99 bound (ms)</th><th class=l>search</th></tr>"
                     + "".join(table) + "</table>")
        if ranking:
            ranked = "".join(f"<li>{escape(stack)}: {_fmt(score)} req/s (p99 {_fmt(number(row.get('latency_ms_p99')))} "
                             f"ms)</li>" for score, stack, row in sorted(ranking, key=lambda x: (-x[0], x[1])))
            parts.append(f"<p>Tuned ranking:</p><ol>{ranked}</ol>")
        if any(len(p) > 1 for p in scaling.values()):
            counts = sorted({n for p in scaling.values() for n in p})
            head = "".join(f"<th>{n}</th>" for n in counts)
            body = "".join(f"<tr><td class=l>{escape(stack)}</td>"
                           + "".join(f"<td>{_fmt(points.get(n))}</td>" for n in counts) + "</tr>"
                           for stack, points in sorted(scaling.items()))
            parts.append(f"<p>Best throughput (req/s) by instances/workers, the other knobs as the search had "
                         f"them:</p><table><tr><th class=l>stack</th>{head}</tr>{body}</table>")
            series = [Series(stack, tuple(sorted((float(n), s) for n, s in points.items())),
                             tuple(f"{n} instances" for n in sorted(points)))
                      for stack, points in sorted(scaling.items()) if len(points) > 1]
            plot = line_chart("scaling-instances", f"{model}: throughput against instances", series,
                              "instances / workers", "throughput (req/s)")
            parts.append(f"<div class=plots>{plot}</div>")
    return "".join(parts)


def engine_section(rows: list[dict]) -> str:
    """Stacks next to their engine's own speed in process (concurrency 1, default configuration)."""
    lines = []
    for row in sorted(ok_rows(rows), key=lambda r: (str(r.get("model")), str(r.get("engine")), stack_of(r),
                                                    str(r.get("wire") or ""))):
        engine = number(row.get("engine_inprocess_rps"))
        if engine is None or row.get("mode") != "concurrency" or number(row.get("load")) != 1.0 \
                or _config_id(row) != DEFAULT_CONFIG_ID:
            continue
        served = number(row.get("throughput_rps")) or 0.0
        gap = 100.0 * (1 - served / engine) if engine else None
        cls = " class=bad" if gap is not None and gap > 20 else ""
        lines.append(f"<tr><td class=l>{escape(row.get('model'))}</td><td class=l>{escape(row.get('engine'))}</td>"
                     f"<td class=l>{escape(stack_of(row))}</td><td class=l>{escape(row.get('wire') or '–')}</td>"
                     f"<td>{row.get('batch_size')}</td><td>{_fmt(engine)}</td>"
                     f"<td>{_fmt(served)}</td><td{cls}>{'–' if gap is None else f'{gap:.0f} %'}</td></tr>")
    if not lines:
        return ""
    return ("<h2 id=engines>Engines against the stacks that serve them</h2><p class=note>The engine's own speed: the "
            "artifact run in process, one call after another, with the server's threads on the server's CPUs. A "
            "stack at concurrency 1 does the same work plus serving it (protocol, encoding, queues); the gap is "
            "that overhead (over 20 % is marked; the wires section says where its time goes).</p><table><tr>"
            "<th class=l>model</th><th class=l>engine</th><th class=l>stack</th><th class=l>wire</th><th>batch</th>"
            "<th>in process (calls/s)</th><th>served at concurrency 1 (req/s)"
            "</th><th>gap</th></tr>" + "".join(lines) + "</table>")


def _fmt(value: float | None) -> str:
    return "–" if value is None else format_value(float(value))
