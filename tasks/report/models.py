"""The report's section of one model: its plots (latency against throughput, scaling, efficiency, cost at the
bound), what each stack costs within each p99 bound, and the table of its rows, all over each stack's best wire."""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.metrics import METRICS, metrics_where, number
from tasks.core.results import is_overload
from tasks.report.contention import host_state_text
from tasks.report.formatting import (
    DASH,
    REASON_IN_TABLE_CHARS,
    bounds_text,
    cell_value,
    count_or_figure,
    format_value,
    label,
    latency_text,
    load_text,
    unit,
)
from tasks.report.plots import Series, bar_chart, line_chart
from tasks.report.recommend import (
    bounds_for,
    cheapest_per_stack,
    cost_at_bound,
    cost_basis,
    efficiency,
    ok_rows,
    stack_of,
)
from tasks.report.templating import render
from tasks.report.wires import row_wire

REPORT_METRICS = metrics_where("reported")
MODE_NAMES = {"concurrency": "closed loop", "rate": "open loop"}
LOAD_NAMES = {"concurrency": "concurrency", "rate": "rate (req/s)"}


def _series_name(row: dict, batches: int, modes: int) -> str:
    name = stack_of(row)
    if batches > 1:
        name += f" b{row.get('batch_size')}"
    if modes > 1:
        name += f" {MODE_NAMES.get(str(row.get('mode')), row.get('mode'))}"
    return name


def _series(rows: list[dict], y_metric: str, x_metric: str | None = None, claims: bool = False) -> list[Series]:
    """One series per stack (and batch size / loop kind where the model has several), points ordered by load.
    `claims` (a latency percentile): each point with its 95 % interval (`<y>_ci_low`, `_ci_high`), and a point
    whose percentile is only a lower bound (`<y>` null) drawn at `<y>_at_least`, marked as one."""
    ok = ok_rows(rows)
    batches = len({r.get("batch_size") for r in ok})
    modes = len({r.get("mode") for r in ok})
    groups: dict[str, list[dict]] = {}
    for row in ok:
        groups.setdefault(_series_name(row, batches, modes), []).append(row)
    out = []
    for name in sorted(groups):
        points, labels, intervals, at_least = [], [], [], []
        for row in sorted(groups[name], key=lambda r: number(r.get("load")) or 0.0):
            x = number(row.get(x_metric)) if x_metric else number(row.get("load"))
            y = number(row.get(y_metric))
            bound = claims and y is None and number(row.get(f"{y_metric}_at_least")) is not None
            if bound:
                y = number(row.get(f"{y_metric}_at_least"))
            if x is not None and y is not None:
                points.append((x, y))
                labels.append(load_text(row.get("mode"), row.get("load")))
                at_least.append(bound)
                intervals.append((number(row.get(f"{y_metric}_ci_low")), number(row.get(f"{y_metric}_ci_high")))
                                 if claims else None)
        out.append(Series(name, tuple(points), tuple(labels), tuple(intervals), tuple(at_least)))
    return out


def _plots(model: str, rows: list[dict], p99_bound_ms: float | None) -> list[Markup]:
    thr = f"{label('throughput_rps')} ({unit('throughput_rps')})"
    plots = [line_chart(f"latency-{p}", f"{model}: {label(m)} against throughput with each point's 95 % interval",
                        _series(rows, m, "throughput_rps", claims=True), thr, f"{label(m)} ({unit(m)})")
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
        plots.append(bar_chart("efficiency-cpu", f"{model}: {label('throughput_rps_per_core')} at each stack's peak",
                               per_core, unit("throughput_rps_per_core")))
    if memory:
        plots.append(bar_chart("efficiency-memory", f"{model}: {label('server_rss_mb')} at each stack's peak", memory,
                               unit("server_rss_mb")))
    plots.append(_cost_chart(model, rows, p99_bound_ms))
    return plots


def _cost_chart(model: str, rows: list[dict], p99_bound_ms: float | None) -> Markup:
    """What a stack costs at the bound: each stack's cheapest ok point with p99 within the run's bound (none: any
    ok point), as the price of a million inferences where the run had prices, else core-seconds per 1,000."""
    costs = cost_at_bound(rows, number(p99_bound_ms))
    if not costs:
        return Markup("")
    basis = costs[0]["basis"]
    batches = len({c["batch_size"] for c in costs})
    bars = [(c["stack"] + (f" b{c['batch_size']}" if batches > 1 else ""), c[basis]) for c in costs]
    within = "with p99 within " + (f"{p99_bound_ms:,g} ms" if number(p99_bound_ms) is not None else "no bound")
    return bar_chart("cost-at-bound", f"{model}: {label(basis)}, each stack's cheapest point {within}", bars,
                     unit(basis))


def _cost_point(row: dict | None) -> dict | None:
    if row is None:
        return None
    gpu, price = number(row.get("gpu_s_per_1k")), number(row.get("price_per_million"))
    return {"core_s": format_value(number(row.get("server_core_s_per_1k"))),
            "gpu_s": None if gpu is None else format_value(gpu),
            "price": None if price is None else format_value(price),
            "load": load_text(row.get("mode"), row.get("load"))}


def cost_table(rows: list[dict], p99_bound_ms: float | None = None) -> Markup:
    """What each stack costs within each p99 bound (`bounds_for` the run's): per stack and batch size, its cheapest ok
    point within the bound, as CPU-core-seconds (GPU-seconds) per 1,000 inferences and, with prices, the price of a
    million; "" without a costed point."""
    bounds = bounds_for(number(p99_bound_ms))
    basis = cost_basis(rows)
    per_bound = {b: {(stack_of(r), r.get("batch_size")): r for r in cheapest_per_stack(rows, b, basis)}
                 for b in bounds}
    keys = sorted({key for found in per_bound.values() for key in found}, key=lambda k: (k[0], k[1] or 0))
    if not keys:
        return Markup("")
    stacks = [{"stack": stack, "batch": batch, "points": [_cost_point(per_bound[b].get((stack, batch)))
                                                          for b in bounds]} for stack, batch in keys]
    return render("cost_table.html", bounds=[bounds_text([b]) for b in bounds], stacks=stacks,
                  batches=len({k[1] for k in keys}) > 1)


def _best_values(rows: list[dict]) -> dict[str, float]:
    """Per reported metric, the best value among the ok rows (by the metric's good direction)."""
    best = {}
    for name in REPORT_METRICS:
        values = [number(r.get(name)) for r in ok_rows(rows) if number(r.get(name)) is not None]
        if values:
            best[name] = max(values) if METRICS[name].better == "higher" else min(values)
    return best


def _table_row(row: dict, best: dict[str, float]) -> dict:
    cells = []
    for name in REPORT_METRICS:
        value = number(row.get(name))
        text = latency_text(row, name) if name.startswith("latency_ms_p") else cell_value(value)
        cells.append((text, row.get("status") == "ok" and value is not None and value == best.get(name)))
    note = None
    if row["status"] != "ok":
        note = str(row.get("reason") or "")[:REASON_IN_TABLE_CHARS]
    elif row.get("remeasured"):
        note = "re-measured: its first measurement was contended"
    return {"server": row["server"], "format": row["format"], "wire": row_wire(row),
            "batch": cell_value(row.get("batch_size")), "load": load_text(row.get("mode"), row.get("load")),
            "cells": cells, "requests": count_or_figure(row.get("latency_samples")),
            "verdict": row.get("p99_bound_verdict") or DASH,
            "cv": cell_value(number(row.get("cv"))), "stable": cell_value(row.get("stable")),
            "host": host_state_text(row), "share": cell_value(number(row.get("server_cpu_share_pct"))),
            "other": cell_value(number(row.get("neighbour_cpu_pct"))), "status": row["status"], "note": note}


def model_section(model: str, rows: list[dict], p99_bound_ms: float | None) -> Markup:
    """The model's section: plots, the cost table, and the table of its rows (overload rows have their own)."""
    best = _best_values([r for r in rows if not is_overload(r)])
    table = [_table_row(r, best) for r in sorted(
        (r for r in rows if not is_overload(r)),
        key=lambda r: (str(r["server"]), str(r["format"]), r.get("batch_size") or 0, str(r.get("mode")),
                       number(r.get("load")) or 0.0))]
    return render("model.html", model=model, plots=_plots(model, rows, p99_bound_ms),
                  cost_table=cost_table(rows, p99_bound_ms), metrics=REPORT_METRICS, rows=table)
