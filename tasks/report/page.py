"""The run's HTML report: one self-contained page published next to the results as `report.html`.

It is rendered only from the run's published files (REPORT_INPUTS and the manifest's run id, date, status
and provenance), at publish time and by `rebuild_report` from the store, through the same function: the
rebuilt page is byte-identical. No timestamp of the rendering, no unordered iteration, plots as inline SVG
(`tasks.report.plots`), no script, font or stylesheet from anywhere.

Sections: the recommendation (`tasks.report.recommend`), per model the plots (latency against throughput, scaling,
efficiency) and the table of rows — both over each stack's best wire (`tasks.report.wires`) — the serving
configurations, the engines, the wires (the JSON tax and where a request's time goes), how each stack lives
(`tasks.report.lifecycle`), its features and ease of use (`tasks.report.features`), the changes since the
previous comparable run (`trend.json`, `regressions.json`), every planned cell, failed and skipped cells with their
reasons, parity and served-output checks, validation, provenance. Units and good directions come from
`tasks.core.metrics.METRICS`; nothing here decides what is better.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass

from tasks.core.metrics import METRICS, metrics_where, number
from tasks.core.results import frame_records, is_overload
from tasks.plan.cells import Cell, rows_of
from tasks.report.configs import configurations_section, engine_section, headline_rows
from tasks.report.features import features_section
from tasks.report.formatting import escape
from tasks.report.lifecycle import lifecycle_section
from tasks.report.plots import Series, bar_chart, format_value, line_chart
from tasks.report.recommend import (
    bounds_for,
    cheapest_per_stack,
    cost_at_bound,
    cost_basis,
    efficiency,
    group_by_answer,
    ok_rows,
    recommend,
    stack_of,
)
from tasks.report.trend import run_suite
from tasks.report.wires import best_wire_rows, row_wire, wires_section

REPORT_INPUTS = ("results.parquet", "parity.json", "validation.json", "regressions.json", "trend.json", "plan.json",
                 "tuning.json")
REPORT_METRICS = metrics_where("reported")
MODE_NAMES = {"concurrency": "closed loop", "rate": "open loop"}
LOAD_NAMES = {"concurrency": "concurrency", "rate": "rate (req/s)"}
REASON_CHARS = 2000
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}.failed{color:#b00}.skipped{color:#888}.contended{color:#a50}
.best{font-weight:bold;background:#eef8ee}.bad,.worse{color:#b00;font-weight:bold}.better{color:#070;font-weight:bold}
.plots{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}.note{color:#555}
pre{background:#f7f7f7;padding:8px;white-space:pre-wrap;max-width:1200px}nav a{margin-right:1em}"""


@dataclass(frozen=True)
class PublishedRun:
    """What the report is made of: the run's published objects, parsed, and its manifest's identity."""

    run: dict  # run_id, logical_date, status, provenance (as in the manifest)
    rows: list[dict]
    parity: list[dict]
    validation: dict
    regressions: dict
    trend: dict | None
    plan: dict | None
    tuning: dict | None = None

    @classmethod
    def from_files(cls, files: Mapping[str, bytes], run: dict) -> PublishedRun:
        """From the published bytes (name -> bytes); objects a run did not publish are None/empty."""
        import pandas as pd

        def obj(name: str, default):
            return json.loads(files[name]) if name in files else default

        rows = frame_records(pd.read_parquet(io.BytesIO(files["results.parquet"])))
        return cls({k: run.get(k) for k in ("run_id", "logical_date", "status", "provenance")}, rows,
                   obj("parity.json", []), obj("validation.json", {}), obj("regressions.json", {}),
                   obj("trend.json", None), obj("plan.json", None), obj("tuning.json", None))


def rebuild_report(store, manifest: dict) -> str:
    """The report of a published run, rendered again from its objects in the store (through its manifest)."""
    files = {o["name"]: store.get(o["key"]) for o in manifest["objects"] if o["name"] in REPORT_INPUTS}
    return render_report(PublishedRun.from_files(files, manifest))



def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    return f"{value:,.2f}" if isinstance(value, float) else escape(str(value))


def _unit(metric: str) -> str:
    return METRICS[metric].unit


def _label(metric: str) -> str:
    return METRICS[metric].label


def _load_text(mode: object, load: object) -> str:
    value = number(load)
    return f"{mode} {value:g}" if value is not None else str(mode)


def _series_name(row: dict, batches: int, modes: int) -> str:
    name = stack_of(row)
    if batches > 1:
        name += f" b{row.get('batch_size')}"
    if modes > 1:
        name += f" {MODE_NAMES.get(str(row.get('mode')), row.get('mode'))}"
    return name


def _series(rows: list[dict], y_metric: str, x_metric: str | None = None) -> list[Series]:
    """One series per stack (and batch size / loop kind where the model has several), points ordered by load."""
    ok = ok_rows(rows)
    batches = len({r.get("batch_size") for r in ok})
    modes = len({r.get("mode") for r in ok})
    groups: dict[str, list[dict]] = {}
    for row in ok:
        groups.setdefault(_series_name(row, batches, modes), []).append(row)
    out = []
    for name in sorted(groups):
        points, labels = [], []
        for row in sorted(groups[name], key=lambda r: number(r.get("load")) or 0.0):
            x = number(row.get(x_metric)) if x_metric else number(row.get("load"))
            y = number(row.get(y_metric))
            if x is not None and y is not None:
                points.append((x, y))
                labels.append(_load_text(row.get("mode"), row.get("load")))
        out.append(Series(name, tuple(points), tuple(labels)))
    return out


def _model_plots(model: str, rows: list[dict], p99_bound_ms: float | None = None) -> str:
    thr = f"{_label('throughput_rps')} ({_unit('throughput_rps')})"
    plots = [line_chart(f"latency-{p}", f"{model}: {_label(m)} against throughput", _series(rows, m, "throughput_rps"),
                        thr, f"{_label(m)} ({_unit(m)})")
             for p, m in (("p99", "latency_ms_p99"), ("p50", "latency_ms_p50"))]
    for mode in ("concurrency", "rate"):
        mode_rows = [r for r in rows if r.get("mode") == mode]
        if ok_rows(mode_rows):
            plots.append(line_chart(f"scaling-{mode}", f"{model}: throughput against {LOAD_NAMES[mode]}",
                                    _series(mode_rows, "throughput_rps"), LOAD_NAMES[mode], thr))
    eff = efficiency(rows)
    batches = len({e["batch_size"] for e in eff})

    def name(e: dict) -> str:
        return e["stack"] + (f" b{e['batch_size']}" if batches > 1 else "")

    per_core = [(name(e), e["throughput_rps_per_core"]) for e in eff if e["throughput_rps_per_core"] is not None]
    memory = [(name(e), e["server_rss_mb"]) for e in eff if e["server_rss_mb"] is not None]
    if per_core:
        plots.append(bar_chart("efficiency-cpu", f"{model}: {_label('throughput_rps_per_core')} at each stack's peak",
                               per_core, _unit("throughput_rps_per_core")))
    if memory:
        plots.append(bar_chart("efficiency-memory", f"{model}: {_label('server_rss_mb')} at each stack's peak", memory,
                               _unit("server_rss_mb")))
    plots.append(_cost_chart(model, rows, p99_bound_ms))
    return f"<div class=plots>{''.join(plots)}</div>"


def _cost_chart(model: str, rows: list[dict], p99_bound_ms: float | None) -> str:
    """What a stack costs at the bound: each stack's cheapest ok point with p99 within the run's bound (none: any
    ok point), as the price of a million inferences where the run had prices, else core-seconds per 1,000."""
    costs = cost_at_bound(rows, number(p99_bound_ms))
    if not costs:
        return ""
    basis = costs[0]["basis"]
    batches = len({c["batch_size"] for c in costs})
    bars = [(c["stack"] + (f" b{c['batch_size']}" if batches > 1 else ""), c[basis]) for c in costs]
    within = "with p99 within " + (f"{p99_bound_ms:,g} ms" if number(p99_bound_ms) is not None else "no bound")
    return bar_chart("cost-at-bound", f"{model}: {_label(basis)}, each stack's cheapest point {within}", bars,
                     _unit(basis))


def cost_table(rows: list[dict], p99_bound_ms: float | None = None) -> str:
    """What each stack costs within each p99 bound (`bounds_for` the run's): per stack and batch size, its cheapest ok
    point within the bound, as CPU-core-seconds (GPU-seconds) per 1,000 inferences and, with prices, the price of a
    million; "" without a costed point."""
    bounds = bounds_for(number(p99_bound_ms))
    basis = cost_basis(rows)
    per_bound = {b: {(stack_of(r), r.get("batch_size")): r for r in cheapest_per_stack(rows, b, basis)}
                 for b in bounds}
    keys = sorted({key for found in per_bound.values() for key in found}, key=lambda k: (k[0], k[1] or 0))
    if not keys:
        return ""
    batches = len({k[1] for k in keys})

    def cell(row: dict | None) -> str:
        if row is None:
            return "<td>–</td>"
        figures = [f"{format_value(number(row.get('server_core_s_per_1k')))} core-s"]
        if number(row.get("gpu_s_per_1k")) is not None:
            figures.append(f"{format_value(number(row.get('gpu_s_per_1k')))} GPU-s")
        if number(row.get("price_per_million")) is not None:
            figures.append(f"<b>{format_value(number(row.get('price_per_million')))}</b> / 1M")
        return (f"<td>{', '.join(figures)}<br><small>at {escape(_load_text(row.get('mode'), row.get('load')))}"
                "</small></td>")

    head = "".join(f"<th>{_bounds_text([b])}</th>" for b in bounds)
    parts = ["<table class=cost><tr><th class=l>stack</th>" + ("<th>batch</th>" if batches > 1 else "") +
             f"{head}</tr>"]
    for stack, batch in keys:
        parts.append(f"<tr><td class=l>{escape(stack)}</td>" + (f"<td>{batch}</td>" if batches > 1 else "") +
                     "".join(cell(per_bound[b].get((stack, batch))) for b in bounds) + "</tr>")
    parts.append("</table>")
    return ("<p class=note>What each stack costs within each p99 bound: its cheapest ok point with p99 within it, "
            "per 1,000 inferences (one inference: one sample), and with prices per million.</p>" + "".join(parts))


def _model_table(model: str, rows: list[dict]) -> str:
    ok = ok_rows(rows)
    best = {}
    for name in REPORT_METRICS:
        values = [number(r.get(name)) for r in ok if number(r.get(name)) is not None]
        if values:
            best[name] = max(values) if METRICS[name].better == "higher" else min(values)
    head = "".join(f"<th>{escape(_label(m))}<br>({escape(_unit(m))})</th>" for m in REPORT_METRICS)
    parts = [f"<table><tr><th class=l>server</th><th class=l>format</th><th class=l>wire</th><th>batch</th>"
             f"<th>load</th>{head}<th>CV</th><th>stable</th><th>CPU share of its budget<br>(%)</th>"
             f"<th>other work on the host<br>(%)</th><th class=l>status</th></tr>"]
    for r in sorted(rows, key=lambda r: (str(r["server"]), str(r["format"]), r.get("batch_size") or 0,
                                         str(r.get("mode")), number(r.get("load")) or 0.0)):
        cells = ""
        for m in REPORT_METRICS:
            value = number(r.get(m))
            mark = r.get("status") == "ok" and value is not None and value == best.get(m)
            cells += f"<td class='{'best' if mark else ''}'>{_fmt(value)}</td>"
        status = f"<span class={escape(r['status'])}>{escape(r['status'])}</span>"
        if r["status"] != "ok":
            status += f"<br><small>{escape(str(r.get('reason') or '')[:300])}</small>"
        elif r.get("remeasured"):
            status += "<br><small>re-measured: its first measurement was contended</small>"
        host = f" title='{escape(host_state_text(r))}'"
        parts.append(f"<tr><td class=l>{escape(r['server'])}</td><td class=l>{escape(r['format'])}</td>"
                     f"<td class=l>{escape(row_wire(r))}</td>"
                     f"<td>{_fmt(r.get('batch_size'))}</td><td>{escape(_load_text(r.get('mode'), r.get('load')))}</td>"
                     f"{cells}<td>{_fmt(number(r.get('cv')))}</td><td>{_fmt(r.get('stable'))}</td>"
                     f"<td{host}>{_fmt(number(r.get('server_cpu_share_pct')))}</td>"
                     f"<td{host}>{_fmt(number(r.get('neighbour_cpu_pct')))}</td><td class=l>{status}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def host_state_text(row: dict) -> str:
    """The host's state during a row's point in one line (the cells' hover text): what other work took, the
    server's share and wait, steal, pressure, load."""
    parts = []
    for name, label in (("neighbour_cpu_pct", "other work on the host"), ("steal_pct", "of it steal"),
                        ("server_cpus_neighbour_pct", "other work on the server's CPUs"),
                        ("server_cpu_share_pct", "server CPU share of its budget"),
                        ("server_cpu_wait_pct", "server run-queue wait"),
                        ("host_cpu_pressure_pct", "host CPU pressure")):
        value = number(row.get(name))
        parts.append(f"{label} {'unknown' if value is None else format_value(value) + ' %'}")
    load = number(row.get("load_avg_1m"))
    parts.append(f"load average {'unknown' if load is None else format_value(load)}")
    return "; ".join(parts)


def contention_summary(rows: list[dict]) -> str:
    """The report's first words on the host: how many rows were contended and by how much, or how quiet it was."""
    measured = [r for r in rows if number(r.get("neighbour_cpu_pct")) is not None]
    if not measured:
        return "This run recorded no host state (its rows predate schema 1.5)."
    contended = [r for r in rows if r.get("status") == "contended"]
    remeasured = sum(bool(r.get("remeasured")) for r in rows)

    def values(group: list[dict], name: str) -> list[float]:
        return sorted(v for v in (number(r.get(name)) for r in group) if v is not None)

    if contended:
        were = "was" if len(contended) == 1 else "were"
        text = (f"<b class=bad>{len(contended)} of {len(rows)} rows {were} contended</b>: other work took the host's "
                "CPU while they were measured, also when measured again after waiting for a quiet host")
        other, share = values(contended, "neighbour_cpu_pct"), values(contended, "server_cpu_share_pct")
        if other:
            text += (f"; other work used {other[len(other) // 2]:.0f} % of the host's CPU during them (median; up to "
                     f"{other[-1]:.0f} %)")
        if share:
            text += f" and their servers got as little as {share[0]:.0f} % of their CPUs"
        return (text + ". Their figures are kept (marked <i>contended</i>) but are not the stacks': the "
                "recommendation, the plots and the regression check leave them out.")
    other, steal = values(measured, "neighbour_cpu_pct"), values(measured, "steal_pct")
    text = (f"No row was contended: other work used {other[len(other) // 2]:.0f} % of the host's CPU during a point "
            f"(median; at most {other[-1]:.0f} %)")
    if steal:
        text += f", the hypervisor's steal at most {steal[-1]:.0f} %"
    if remeasured:
        text += f"; {remeasured} point(s) were re-measured after a contended first measurement"
    return text + "."


def _point_text(point: dict | None) -> str:
    if point is None:
        return "–"
    wire = f" over {escape(point['wire'])}" if point.get("wire") else ""
    return (f"<b>{escape(point['stack'])}</b>{wire}<br><small>{_fmt(point['throughput_rps'])} "
            f"{_unit('throughput_rps')}, p99 {_fmt(point['latency_ms_p99'])} ms at "
            f"{escape(_load_text(point['mode'], point['load']))}</small>")


def _cost_text(point: dict | None, basis: str | None) -> str:
    """The cheapest point: its stack and wire, its cost on the record's basis, and its core-seconds per 1,000."""
    if point is None or basis is None:
        return "–"
    wire = f" over {escape(point['wire'])}" if point.get("wire") else ""
    core = "" if basis == "server_core_s_per_1k" else f", {_fmt(point['server_core_s_per_1k'])} core-s / 1k"
    return (f"<b>{escape(point['stack'])}</b>{wire}<br><small>{format_value(point[basis])} "
            f"{escape(_unit(basis))}{core} "
            f"at {escape(_load_text(point['mode'], point['load']))}</small>")


def _cheaper_text(record: dict) -> str:
    """How much more the next cheapest stack costs, in % of the cheapest."""
    if record.get("cheapest") is None:
        return "–"
    if record.get("cheapest_runner_up") is None:
        return "only stack"
    margin = record.get("cheapest_margin_pct")
    runner = escape(record["cheapest_runner_up"]["stack"])
    return "–" if margin is None else f"{margin:.1f} %<br><small>than {runner}</small>"


def _burst_text(point: dict | None) -> str:
    """A stack under overload in a few words: its class, recovery and goodput at the burst."""
    if point is None:
        return "–"
    wire = f" over {escape(point['wire'])}" if point.get("wire") else ""
    recovery = _recovery_words(point["recovered"], point["recovery_s"], point["overload_class"])
    return (f"<b>{escape(point['stack'])}</b>{wire}<br><small>{escape(point['overload_class'])} at "
            f"{format_value(point['overload_factor'])} × capacity, {recovery}, goodput "
            f"{point['goodput_pct']:.0f} % of capacity</small>")


def _recovery_words(recovered: bool, recovery_s: float | None, overload_class: str | None) -> str:
    """How a burst ended: "recovered in 0.5 s", "server died" or "did not recover"."""
    if recovered:
        return f"recovered in {format_value(recovery_s)} s"
    return "server died" if overload_class == "fails" else "did not recover"


def _degrades_cells(record: dict) -> str:
    """The two overload cells of a recommendation row: the stack that degrades best and how far ahead it is."""
    top, runner, margin = record.get("degrades_best"), record.get("degrades_runner_up"), record.get("overload_margin")
    if top is None:
        return "<td class=l>–</td><td>–</td>"
    if runner is None or margin is None:
        ahead = "only stack"
    elif margin["kind"] == "recovery_s":
        ahead = f"{format_value(margin['value'])} s sooner<br><small>than {escape(runner['stack'])}</small>"
    elif margin["kind"] == "not_recovered":
        ahead = f"{escape(runner['stack'])} did not recover"
    else:
        ahead = f"{margin['value']:+.0f} points of capacity<br><small>than {escape(runner['stack'])}</small>"
    return f"<td class=l>{_burst_text(top)}</td><td>{ahead}</td>"


def overload_section(rows: list[dict]) -> str:
    """Per model, every stack's overload rows (each stack on its best wire): the burst, the class, goodput, p99
    before and during, the recovery; "" when the run measured no overload."""
    bursts = [r for r in rows if is_overload(r)]
    if not bursts:
        return ""
    parts = ["<h2 id=overload>Overload and recovery</h2>",
             "<p class=note>After each stack's capacity was measured (the highest throughput of its ok points), an "
             "open-loop burst at 1.5 × and 3 × it between stretches at 0.5 × (docs/measuring.md, \"Overload and "
             "recovery\"). <i>Goodput</i>: successful answers during the burst, % of capacity. <i>Recovery</i>: from "
             "the burst's end until a window's p99 is back within 1.2 × the p99 before it, none failed. "
             "<i>sheds</i>: most failures were fast errors; <i>queues</i>: timeouts, or p99 rose; <i>holds</i>: "
             "neither; <i>fails</i>: the server died.</p>",
             "<table class=overload><tr><th class=l>model</th><th class=l>stack</th><th class=l>wire</th>"
             "<th>batch</th><th>burst (× capacity)</th><th>capacity (req/s)</th><th class=l>class</th>"
             "<th>goodput (% of capacity)</th><th>errors / requests</th><th>timeouts</th>"
             "<th>p99 before → during (ms)</th><th class=l>recovery</th><th class=l>status</th></tr>"]
    for r in sorted(bursts, key=lambda r: (str(r["model"]), stack_of(r), r.get("batch_size") or 0,
                                           number(r.get("load")) or 0.0)):
        detail = json.loads(r["overload"]) if r.get("overload") else {}
        recovery = (f"{format_value(number(r['recovery_s']))} s" if r.get("recovered")
                    else escape(detail.get("recovery") or "–"))
        status = f"<span class={escape(r['status'])}>{escape(r['status'])}</span>"
        if r["status"] != "ok":
            status += f"<br><small>{escape(str(r.get('reason') or '')[:300])}</small>"
        parts.append(f"<tr><td class=l>{escape(r['model'])}</td><td class=l>{escape(stack_of(r))}</td>"
                     f"<td class=l>{escape(row_wire(r))}</td><td>{_fmt(r.get('batch_size'))}</td>"
                     f"<td>{_fmt(number(r.get('load')))}</td><td>{_fmt(number(r.get('capacity_rps')))}</td>"
                     f"<td class=l>{escape(r.get('overload_class') or '–')}</td>"
                     f"<td>{_fmt(number(r.get('goodput_pct')))}</td>"
                     f"<td>{_fmt(r.get('errors'))} / {_fmt(r.get('requests'))}</td><td>{_fmt(r.get('timeouts'))}</td>"
                     f"<td>{_fmt(number(r.get('pre_burst_p99_ms')))} → {_fmt(number(r.get('burst_p99_ms')))}</td>"
                     f"<td class=l>{recovery}</td><td class=l>{status}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _bounds_text(bounds: list[float | None]) -> str:
    """"≤ 10 ms, ≤ 50 ms and no bound": the p99 bounds one answer holds for."""
    texts = ["no bound" if b is None else f"≤ {b:,g} ms" for b in bounds]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def noise_text(record: dict) -> str:
    """Whether the margin is beyond noise, with the figures it was judged on."""
    basis, verdict = record.get("noise"), record["beyond_noise"]
    if record["runner_up"] is None:
        return "–"
    if basis is None or verdict is None:
        return "unknown (no spread published)"
    unit = _unit("throughput_rps")
    if basis["method"] == "intervals":
        (a_lo, a_hi), (b_lo, b_hi) = basis["a"], basis["b"]
        figures = (f"95 % intervals {format_value(b_lo)}–{format_value(b_hi)} (best) and "
                   f"{format_value(a_lo)}–{format_value(a_hi)} {unit} (runner-up)")
        return f"yes: the {figures} do not overlap" if verdict else f"no, within noise: the {figures} overlap"
    figures = (f"the difference {format_value(basis['delta'])} {unit} against 2·sqrt((cv₁·x₁)² + (cv₂·x₂)²) = "
               f"{format_value(basis['threshold'])} {unit} (CVs {100 * basis['cv_b']:.0f} % and "
               f"{100 * basis['cv_a']:.0f} %)")
    return f"yes: {figures}" if verdict else f"no, within noise: {figures}"


def _recommendation(rows: list[dict], p99_bound_ms: float | None = None) -> str:
    records = group_by_answer(recommend(rows, bounds_for(p99_bound_ms)))
    run_bound = "" if number(p99_bound_ms) is None else f" (with this run's own p99_bound_ms, {p99_bound_ms:,g} ms)"
    parts = ["<h2 id=recommendation>Recommendation</h2>"]
    # the explanation follows the tables: the first screen shows the answers
    note = (f"<p class=note>For each model and p99 bound{run_bound}: the stack (server/format, on its best wire) with "
            "the highest throughput among its ok load points whose p99 stays within the bound, the runner-up, and the "
            "margin in % of the runner-up; one row per answer, with the bounds it holds for. Contended points "
            "(measured while other work took the host's CPU) are not ranked. <i>Beyond noise</i>: the two points' "
            "95 % throughput intervals do not overlap, or without intervals the difference exceeds "
            "2·sqrt((cv₁·x₁)² + (cv₂·x₂)²) of the windows' CV. A large margin can still be within noise: an "
            "interval comes from the point's few windows (three windows give about ±4 standard errors), so a short, "
            "unsteady or disturbed point has a wide one; a longer <code>duration_s</code> or a quieter host narrows "
            "it. <i>Cheapest</i>: the stack whose cheapest ok point within the bound costs least per inference — the "
            "price of a million inferences where the run was given <code>price_per_core_hour</code> (and "
            "<code>price_per_gpu_hour</code>), else the server's CPU-core-seconds per 1,000 inferences (a GPU point "
            "then has no comparable cost); <i>costs less by</i>: how much more the next cheapest costs, in % of the "
            "cheapest. <i>Degrades best under overload</i> (runs with <code>overload</code>): at the highest burst "
            "every stack ran (3 × its own capacity), the stack that recovered soonest after it, or, where none "
            "recovered, that still served the most of its capacity during it; <i>ahead by</i>: the runner-up's later "
            "recovery, or its goodput in points of capacity (<a href='#overload'>Overload</a>).</p>")
    if not records:
        return "".join(parts) + "<p>No ok cell to recommend from.</p>" + note
    overload = any(r.get("degrades_best") for r in records)  # the columns only where the run measured overload
    parts.append("<table class=recommendation><tr><th class=l>model</th><th>batch</th><th class=l>p99 bounds</th>"
                 "<th class=l>fastest stack</th><th class=l>runner-up</th><th>margin</th><th class=l>beyond noise</th>"
                 "<th class=l>cheapest stack</th><th>costs less by</th>"
                 f"{'<th class=l>degrades best under overload</th><th>ahead by</th>' if overload else ''}"
                 "<th class=l>caveats</th></tr>")
    for r in records:
        bound = _bounds_text(r["bounds"])
        if r["best"] is None:
            parts.append(f"<tr><td class=l>{escape(r['model'])}</td><td>{r['batch_size']}</td><td class=l>{bound}</td>"
                         f"<td class=l colspan={9 if overload else 7}>none of {r['stacks']} stacks meets it</td>"
                         "</tr>")
            continue
        margin = "only stack" if r["runner_up"] is None else (
            f"+{r['margin_pct']:.1f} %" if r["margin_pct"] is not None else "–")
        parts.append(f"<tr><td class=l>{escape(r['model'])}</td><td>{r['batch_size']}</td><td class=l>{bound}</td>"
                     f"<td class=l>{_point_text(r['best'])}</td><td class=l>{_point_text(r['runner_up'])}</td>"
                     f"<td>{margin}</td>{_noise_cell(r)}"
                     f"<td class=l>{_cost_text(r.get('cheapest'), r.get('cost_basis'))}</td>"
                     f"<td>{_cheaper_text(r)}</td>"
                     f"{_degrades_cells(r) if overload else ''}"
                     f"<td class=l>{escape('; '.join(r['caveats']))}</td></tr>")
    parts.append("</table>")
    return "".join(parts) + overload_glance(rows) + note


def _noise_cell(record: dict) -> str:
    """"yes" or "no, within noise" in the table, the figures it was judged on (`noise_text`) on hover: the rows
    stay one screen."""
    if record["runner_up"] is None:
        short = "–"
    elif record.get("noise") is None or record["beyond_noise"] is None:
        short = "unknown"
    else:
        short = "yes" if record["beyond_noise"] else "no, within noise"
    return f"<td class=l title='{escape(noise_text(record))}'>{short}</td>"


def overload_glance(rows: list[dict]) -> str:
    """Per model and batch size, how every stack behaved at the highest burst it ran (its class, goodput and
    recovery, or that its server died), one line of stacks; "" when the run measured no overload."""
    bursts: dict[tuple[str, int], dict[str, dict]] = {}
    for r in rows:
        if not is_overload(r) or r.get("status") not in ("ok", "failed") or not r.get("overload_class"):
            continue
        cell = bursts.setdefault((str(r["model"]), int(r.get("batch_size") or 0)), {})
        factor = number(r.get("overload_factor")) or 0.0
        held = cell.get(stack_of(r))
        if held is None or factor > (number(held.get("overload_factor")) or 0.0):
            cell[stack_of(r)] = r
    if not bursts:
        return ""
    stacks = sorted({s for cell in bursts.values() for s in cell})
    factors = {number(r.get("overload_factor")) or 0.0 for cell in bursts.values() for r in cell.values()}
    one = factors.pop() if len(factors) == 1 else None  # every stack's highest burst the same: said once
    title = f"Under {one:g} × overload, every stack" if one is not None else "Under overload, every stack"
    parts = [f"<h3>{title}</h3><table class=overload-glance><tr><th class=l>model</th><th>batch</th>"
             + "".join(f"<th class=l>{escape(s)}</th>" for s in stacks) + "</tr>"]
    for (model, batch), cell in sorted(bursts.items()):
        tds = []
        for stack in stacks:
            r = cell.get(stack)
            if r is None:
                tds.append("<td class=l>–</td>")
                continue
            recovery = _recovery_words(bool(r.get("recovered")), number(r.get("recovery_s")), r["overload_class"])
            goodput = number(r.get("goodput_pct"))
            at = "" if one is not None else f" at {number(r.get('overload_factor')) or 0.0:g} ×"
            tds.append(f"<td class=l><b>{escape(r['overload_class'])}</b>{at}<br><small>goodput "
                       f"{'–' if goodput is None else f'{goodput:.0f} %'}, {recovery}</small></td>")
        parts.append(f"<tr><td class=l>{escape(model)}</td><td>{batch}</td>{''.join(tds)}</tr>")
    parts.append("</table>")
    return "".join(parts)


def _change_cell(entry: dict | None, metric: str) -> str:
    if not entry or entry.get("a") is None and entry.get("b") is None:
        return "<td>–</td>"
    text = f"{_fmt(entry['a'])} → {_fmt(entry['b'])}"
    if entry.get("change_pct") is not None:
        text += f" ({entry['change_pct']:+.1f} %)"
    cls = ""
    if entry.get("beyond_noise"):
        cls, text = entry["direction"], text + f" <b>{'▲' if entry['direction'] == 'better' else '▼'}</b>"
    elif entry.get("beyond_noise") is None and entry.get("change_pct") is not None:
        text += " <small>(noise unknown)</small>"
    return f"<td class='{cls}'>{text}</td>"


def changes_table(changes: list[dict], metrics: tuple[str, ...] = ("throughput_rps", "latency_ms_p99")) -> str:
    """The side-by-side table of `tasks.regress.compare.compare_rows` records."""
    head = "".join(f"<th>{escape(_label(m))} ({escape(_unit(m))})</th>" for m in metrics)
    parts = [f"<table class=changes><tr><th class=l>cell</th><th class=l>status</th>{head}<th class=l>verdict</th>"
             "<th class=l>notes</th></tr>"]
    for c in changes:
        status = f"{escape(c['status_a'] or '–')} → {escape(c['status_b'] or '–')}"
        cells = "".join(_change_cell(c["metrics"].get(m), m) for m in metrics)
        parts.append(f"<tr><td class=l>{escape(c['label'])}</td><td class=l>{status}</td>{cells}"
                     f"<td class='l {escape(c['verdict'])}'>{escape(c['verdict'])}</td>"
                     f"<td class=l>{escape('; '.join(c['notes']))}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _trend_plots(trend: dict) -> str:
    nights = trend.get("nights") or []
    ticks = [(float(i), str(n["logical_date"])[5:10]) for i, n in enumerate(nights)]
    models = sorted({m for n in nights for m in n["models"]})
    plots = []
    for model in models:
        for key, stack_key, metric in (("best_throughput_rps", "best_throughput_stack", "throughput_rps"),
                                       ("best_p99_ms", "best_p99_stack", "latency_ms_p99")):
            seen = [(i, n) for i, n in enumerate(nights) if n["models"].get(model, {}).get(key) is not None]
            points = tuple((float(i), n["models"][model][key]) for i, n in seen)
            labels = tuple(f"{n['run_id']} ({n['models'][model][stack_key]})" for _, n in seen)
            what = "best throughput" if metric == "throughput_rps" else "best p99"
            plots.append(line_chart(f"trend-{metric}", f"{model}: {what} of any stack, last {len(nights)} runs",
                                    [Series(model, points, labels)], "run (logical date)",
                                    f"{_label(metric)} ({_unit(metric)})", x_ticks=ticks))
    return f"<div class=plots>{''.join(plots)}</div>"


def _changes(trend: dict | None, regressions: dict) -> str:
    parts = ["<h2 id=changes>Changes since the previous comparable run</h2>"]
    if trend is None:
        parts.append("<p>This run published no <code>trend.json</code> (it predates the trend).</p>")
    else:
        on = trend["comparable_on"]
        versions = "; ".join(f"{s} {v}" for s, v in on["versions"]["servers"].items())
        parts.append(f"<p class=note>Comparable: same suite (<b>{escape(on['suite'] or 'none')}</b>), same host "
                     f"(<code>{escape(on['host'])}</code>), same pipeline version "
                     f"({escape(on['versions']['pipeline_version'])}) and server versions ({escape(versions or '–')}). "
                     "▲/▼: better/worse beyond noise (the rows' 95 % intervals, or 2 CVs, and at least the regression "
                     "check's minimum change).</p>")
        prev = trend.get("previous")
        if prev:
            parts.append(f"<p>Previous comparable run: <code>{escape(prev['run_id'])}</code> of "
                         f"{escape(str(prev['logical_date'])[:19])} (status {escape(prev['status'])}, git "
                         f"<code>{escape(str(prev['git_sha'])[:12])}</code>).</p>")
        if trend.get("previous_note"):
            parts.append(f"<p class=note>{escape(trend['previous_note'])}.</p>")
        changes = trend.get("changes") or []
        if changes:
            changed = [c for c in changes if c["verdict"] != "same"]
            parts.append(f"<p>{len(changed)} of {len(changes)} cells changed beyond noise or in status "
                         f"({sum(c['verdict'] == 'worse' for c in changes)} worse).</p>")
            parts.append(changes_table(changes))
        parts.append("<h3>Trend</h3>" + _trend_plots(trend))
    parts.append(_side_by_side(regressions))
    return "".join(parts)


def _where(record: dict) -> str:
    return "/".join(str(record.get(k)) for k in ("model", "format", "server", "load") if record.get(k) is not None)


def _side_by_side(regressions: dict) -> str:
    """The regression check as it judged tonight: each changed cell beside its reference (a duet), the unchanged
    cells, tonight's A/A duet (the duet's own noise), and how the host moved (the control's history)."""
    records = regressions.get("records", [])
    parts = []
    duets = [r for r in records if r.get("kind") == "duet"]
    flagged = [r for r in duets if r.get("verdict") == "regression"]
    parts.append(f"<h3>Regressions, measured side by side ({len(flagged)})</h3>")
    if duets:
        parts.append("<table><tr><th class=l>cell</th><th class=l>metric</th><th>candidate / reference</th>"
                     "<th>95 % interval</th><th>minimum effect</th><th>pairs</th><th class=l>verdict</th>"
                     "<th class=l>what changed (reference night)</th></tr>")
        for r in duets:
            ratio = f"×{r['ratio']:.3f}" if r.get("ratio") else "–"
            ci = f"×{r['ratio_ci'][0]:.3f}–{r['ratio_ci'][1]:.3f}" if r.get("ratio_ci") else "–"
            effect = f"{r['min_effect_pct']:.1f} %" if r.get("min_effect_pct") is not None else "–"
            pairs = (r.get("duet") or {}).get("pairs")
            cls = " class=bad" if r.get("verdict") == "regression" else ""
            note = "; ".join(r.get("changes") or []) + f" ({r.get('reference_run_id')})"
            if r.get("verdict") == "unconfirmed":
                note = f"{note}: {r.get('reason')}"
            parts.append(f"<tr{cls}><td class=l>{escape(_where(r))}</td><td class=l>{escape(r['metric'])}</td>"
                         f"<td>{ratio}</td><td>{ci}</td><td>{effect}</td><td>{_fmt(pairs)}</td>"
                         f"<td class=l>{escape(r.get('verdict'))}</td>"
                         f"<td class=l>{escape(note[:REASON_CHARS])}</td></tr>")
        parts.append("</table>")
    unchanged = [r for r in records if r.get("kind") == "inputs" and r.get("verdict") == "no_change"]
    new = [r for r in records if r.get("kind") == "inputs" and r.get("verdict") == "no_history"]
    parts.append(f"<p>{len(unchanged)} cell(s) ran with the same inputs as their reference night: a stack cannot "
                 f"regress without a change, so none was measured again; {len(new)} cell(s) had no reference "
                 f"yet; {len(regressions.get('duets') or [])} duet(s) measured changed cells beside their "
                 "reference.</p>")
    aa = regressions.get("aa") or {}
    if aa.get("noise"):
        noise = ", ".join(f"{m} {100 * v:.1f} %" for m, v in sorted(aa["noise"].items()))
        parts.append(f"<p class=note>Tonight's A/A duet of the control cell (the same inputs on both sides, "
                     f"{len((aa.get('measured') or {}).get('pairs') or [])} pairs): a pair's ratio spreads by "
                     f"{escape(noise)} here; the night's duets use it as their noise floor.</p>")
    environment = [r for r in records if r.get("kind") == "environment" and r.get("verdict") == "environment"]
    control = regressions.get("control") or {}
    drift = (control.get("drift") or {}).get("throughput_rps") or {}
    if environment:
        moved = ", ".join(f"{r['metric']} {r['change_pct']:+.1f} %" for r in environment
                          if r.get("change_pct") is not None)
        parts.append(f"<p class=bad>The environment moved: the control cell {escape(str(control.get('name')))} "
                     f"changed beyond its noise against its own history ({escape(moved)}). That is the host "
                     "(kernel, driver, neighbours), not a stack.</p>")
    elif drift.get("change_pct") is not None:
        parts.append(f"<p>Control cell {escape(str(control.get('name')))}: throughput {drift['change_pct']:+.1f} % "
                     "against its own history, within its noise (the host's drift).</p>")
    return "".join(parts)


def _planned_cells(plan: dict | None, rows: list[dict]) -> str:
    parts = ["<h2 id=cells>Planned cells</h2>"]
    if not plan:
        return "".join(parts) + "<p>This run published no plan.json.</p>"
    parts.append("<table class=cells><tr><th class=l>cell</th><th class=l>protocol</th><th>rows</th>"
                 "<th class=l>status</th></tr>")
    for session in plan.get("sessions", []):
        for cell in session["cells"]:
            found = rows_of(Cell.from_dict(cell), rows)
            statuses = ", ".join(f"{s} {sum(r['status'] == s for r in found)}"
                                 for s in sorted({r["status"] for r in found}))
            parts.append(f"<tr><td class=l><code>{escape(cell['cell_id'])}</code></td>"
                         f"<td class=l>{escape(cell.get('protocol') or '')}</td><td>{len(found)}</td>"
                         f"<td class=l>{escape(statuses or 'no row')}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _failures(rows: list[dict]) -> str:
    bad = sorted((r for r in rows if r.get("status") != "ok"),
                 key=lambda r: (str(r["status"]), str(r["model"]), str(r["server"]), str(r["format"]),
                                number(r.get("load")) or 0.0))
    parts = [f"<h2 id=failures>Contended, failed and skipped cells ({len(bad)})</h2>"]
    if not bad:
        return "".join(parts) + "<p>None.</p>"
    parts.append("<table><tr><th class=l>cell</th><th class=l>status</th><th class=l>reason</th></tr>")
    for r in bad:
        label = (f"{r['model']}/{r['format']}/{r['server']} {row_wire(r)} b{r.get('batch_size')} "
                 f"{_load_text(r['mode'], r['load'])}")
        reason = escape(str(r.get("reason") or "")[:REASON_CHARS])
        parts.append(f"<tr><td class=l>{escape(label)}</td><td class=l><span class={escape(r['status'])}>"
                     f"{escape(r['status'])}</span></td><td class=l><pre>{reason}</pre></td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _checks(parity: list[dict], rows: list[dict]) -> str:
    parts = ["<h2 id=checks>Output checks</h2><h3>Parity of the converted artifacts</h3>"]
    if parity:
        parts.append("<table><tr><th class=l>model</th><th class=l>format</th><th class=l>reference</th>"
                     "<th>worst error</th><th class=l>rule</th><th class=l>passed</th></tr>")
        for p in sorted(parity, key=lambda p: (str(p["model"]), str(p["format"]))):
            if p.get("max_err_ratio") is not None:
                err, rule = format_value(float(p["max_err_ratio"])), "|a-b| / (atol + rtol·|b|), pass ≤ 1"
            else:
                err = f"{float(p['max_abs_err']):.3g}"
                rule = f"max |a-b| ≤ atol {float(p['atol']):g} (rtol {p.get('rtol', '–')})"
            passed = "yes" if p.get("passed") else "<span class=bad>no</span>"
            parts.append(f"<tr><td class=l>{escape(p['model'])}</td><td class=l>{escape(p['format'])}</td>"
                         f"<td class=l>{escape(p.get('reference') or '–')}</td><td>{err}</td><td class=l>{rule}</td>"
                         f"<td class=l>{passed}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No parity records.</p>")
    parts.append("<h3>Served outputs before load</h3>")
    sessions: dict[tuple, list[float]] = {}
    for r in rows:
        key = (str(r["model"]), str(r["format"]), str(r["server"]))
        sessions.setdefault(key, [])
        if number(r.get("served_err_ratio")) is not None:
            sessions[key].append(number(r["served_err_ratio"]))
    if not any(sessions.values()):
        parts.append("<p class=note>This run recorded no served-output check "
                     "(<code>served_err_ratio</code> empty).</p>")
        return "".join(parts)
    parts.append("<table><tr><th class=l>model</th><th class=l>format</th><th class=l>server</th>"
                 "<th>worst |a-b| / (atol + rtol·|b|)</th><th class=l>pass ≤ 1</th></tr>")
    for (model, fmt, server), ratios in sorted(sessions.items()):
        worst = max(ratios) if ratios else None
        verdict = "–" if worst is None else ("yes" if worst <= 1 else "<span class=bad>no</span>")
        parts.append(f"<tr><td class=l>{escape(model)}</td><td class=l>{escape(fmt)}</td>"
                     f"<td class=l>{escape(server)}</td>"
                     f"<td>{'–' if worst is None else format_value(worst)}</td><td class=l>{verdict}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _validation(validation: dict) -> str:
    failed = validation.get("failed_expectations") or []
    verdict = "passed" if validation.get("success") else "<span class=bad>failed</span>"
    items = "".join(f"<li class=bad>{escape(f)}</li>" for f in failed)
    return f"<h2 id=validation>Validation</h2><p>Great Expectations: {verdict}.</p>" + (f"<ul>{items}</ul>" if items
                                                                                        else "")


def _provenance(run: dict, rows: list[dict], suite: str | None) -> str:
    prov = run.get("provenance") or {}
    host = prov.get("host") or {}
    first = rows[0] if rows else {}
    items = [("run id", run["run_id"]), ("logical date", run["logical_date"]), ("status", run["status"]),
             ("suite", suite or "–"), ("git sha", prov.get("git_sha") or first.get("git_sha")),
             ("pipeline version", prov.get("pipeline_version") or first.get("pipeline_version")),
             ("results schema", first.get("schema_version")),
             ("host", f"{host.get('hostname', first.get('hostname'))}: {host.get('cpu_model', first.get('cpu_model'))}"
                      f" × {host.get('cpu_count', first.get('cpu_count'))}, GPU {host.get('gpu_name')}"
                      f" (driver {host.get('gpu_driver')})")]
    parts = ["<h2 id=provenance>Provenance</h2><table>"]
    parts += [f"<tr><th class=l>{escape(k)}</th><td class=l>{escape(v)}</td></tr>" for k, v in items]
    parts.append("</table><table><tr><th class=l>stack</th><th class=l>server version</th><th class=l>runtime image"
                 "</th><th class=l>image kind</th><th class=l>engine</th><th class=l>protocol</th>"
                 "<th class=l>config</th><th class=l>CPUs</th><th class=l>memory</th></tr>")
    fields = ("server_version", "runtime_image", "runtime_image_kind", "engine", "protocol", "config_id",
              "server_cpus", "server_memory")
    seen = sorted({(stack_of(r), *[str(r.get(f) or "–") for f in fields]) for r in rows})
    for entry in seen:
        parts.append("<tr>" + "".join(f"<td class=l>{escape(v)}</td>" for v in entry) + "</tr>")
    parts.append("</table>")
    findings = prov.get("host_check") or []
    if findings:
        parts.append("<h3>Host check (the plan step's, <code>python -m tasks.cli doctor</code>)</h3><table><tr>"
                     "<th class=l>severity</th><th class=l>finding</th><th class=l>read</th>"
                     "<th class=l>what it does to the numbers</th></tr>")
        for f in findings:
            cls = " class=bad" if f.get("severity") in ("warning", "refused") else ""
            parts.append(f"<tr><td class=l><span{cls}>{escape(f.get('severity'))}</span></td>"
                         f"<td class=l>{escape(f.get('name'))}</td><td class=l>{escape(f.get('value'))}</td>"
                         f"<td class=l>{escape(f.get('effect'))}</td></tr>")
        parts.append("</table>")
    config = prov.get("config")
    if config:
        parts.append(f"<h3>Run configuration</h3><pre>{escape(json.dumps(config, indent=1, sort_keys=True))}</pre>")
    return "".join(parts)


def render_report(published: PublishedRun) -> str:
    """The page, from `published` alone (same input, same bytes)."""
    run, rows = published.run, published.rows
    # per stack: its best configuration when a search ran (else its default), over its best wire
    headline = best_wire_rows(headline_rows(rows))
    suite = run_suite(run.get("provenance") or {}, rows)
    counts = {s: sum(r.get("status") == s for r in rows) for s in ("ok", "contended", "failed", "skipped")}
    config = (run.get("provenance") or {}).get("config") or (published.plan or {}).get("config") or {}
    planned = sum(len(s["cells"]) for s in (published.plan or {}).get("sessions", []))
    verdict = "passed" if published.validation.get("success") else "<span class=bad>failed</span>"
    host = (run.get("provenance") or {}).get("host") or (rows[0] if rows else {})
    models = sorted({str(r["model"]) for r in headline})
    nav = "".join(f"<a href='#{h}'>{t}</a>" for h, t in (
        ("recommendation", "Recommendation"), *((f"model-{m}", m) for m in models),
        *((("overload", "Overload"),) if any(is_overload(r) for r in headline) else ()),
        ("wires", "Wires"),
        ("lifecycle", "Lifecycle"), ("features", "Features"), ("changes", "Changes"),
        ("cells", "Cells"), ("failures", "Failures"), ("checks", "Output checks"), ("provenance", "Provenance")))
    parts = [f"<!doctype html><html lang=en><head><meta charset='utf-8'>"
             f"<title>Serving evaluation {escape(run['run_id'])}</title><style>{STYLE}</style></head><body>",
             f"<h1>Serving evaluation — {escape(str(run['logical_date'])[:10])}</h1>",
             f"<p>Run <code>{escape(run['run_id'])}</code>, status <b>{escape(run['status'])}</b>, suite "
             f"<b>{escape(suite or '–')}</b>: {planned} planned cells, {len(rows)} rows ({counts['ok']} ok, "
             f"{counts['contended']} contended, {counts['failed']} failed, {counts['skipped']} skipped), validation "
             f"{verdict}. Host: {escape(host.get('cpu_model'))} × {escape(host.get('cpu_count'))}, GPU "
             f"{escape(host.get('gpu_name'))}. {contention_summary(rows)}</p>",
             f"<nav>{nav}</nav>", _recommendation(headline, config.get("p99_bound_ms"))]
    for model in models:
        model_rows = [r for r in headline if str(r["model"]) == model]
        parts.append(f"<section id='model-{escape(model)}'><h2>{escape(model)}</h2>"
                     f"{_model_plots(model, model_rows, config.get('p99_bound_ms'))}"
                     f"{cost_table(model_rows, config.get('p99_bound_ms'))}"
                     f"{_model_table(model, [r for r in model_rows if not is_overload(r)])}"
                     "</section>")
    parts += [overload_section(headline), configurations_section(rows, published.tuning), engine_section(rows),
              wires_section(rows),
              lifecycle_section(rows), features_section(rows), _changes(published.trend, published.regressions),
              _planned_cells(published.plan, rows),
              _failures(rows), _checks(published.parity, rows), _validation(published.validation),
              _provenance(run, rows, suite), "</body></html>"]
    return "\n".join(parts)
