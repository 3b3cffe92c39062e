"""The report on overload: per model every stack's bursts (the overload section), how every stack behaved at the
highest burst it ran (the glance under the recommendation), and a burst in a few words."""

from __future__ import annotations

import json

from markupsafe import Markup

from tasks.core.metrics import number
from tasks.core.results import is_overload
from tasks.report.formatting import REASON_IN_TABLE_CHARS, cell_value, format_value
from tasks.report.recommend import stack_of
from tasks.report.templating import render
from tasks.report.wires import row_wire


def recovery_words(recovered: bool, recovery_s: float | None, overload_class: str | None) -> str:
    """How a burst ended: "recovered in 0.5 s", "server died" or "did not recover"."""
    if recovered:
        return f"recovered in {format_value(recovery_s)} s"
    return "server died" if overload_class == "fails" else "did not recover"


def burst_view(point: dict) -> dict:
    """A stack under overload (a `recommend` burst point) in a few words: its class, recovery and goodput."""
    return {"stack": point["stack"], "wire": point.get("wire"), "overload_class": point["overload_class"],
            "factor": format_value(point["overload_factor"]), "goodput": f"{point['goodput_pct']:.0f}",
            "recovery": recovery_words(point["recovered"], point["recovery_s"], point["overload_class"])}


def _burst_row(row: dict) -> dict:
    detail = json.loads(row["overload"]) if row.get("overload") else {}
    recovery = (f"{format_value(number(row['recovery_s']))} s" if row.get("recovered")
                else str(detail.get("recovery") or "–"))
    return {"model": row["model"], "stack": stack_of(row), "wire": row_wire(row),
            "batch": cell_value(row.get("batch_size")), "load": cell_value(number(row.get("load"))),
            "capacity": cell_value(number(row.get("capacity_rps"))), "overload_class": row.get("overload_class") or "–",
            "goodput": cell_value(number(row.get("goodput_pct"))), "errors": cell_value(row.get("errors")),
            "requests": cell_value(row.get("requests")), "timeouts": cell_value(row.get("timeouts")),
            "p99_before": cell_value(number(row.get("pre_burst_p99_ms"))),
            "p99_during": cell_value(number(row.get("burst_p99_ms"))), "recovery": recovery,
            "judged": _judged_on(detail), "status": row["status"],
            "reason": None if row["status"] == "ok" else str(row.get("reason") or "")[:REASON_IN_TABLE_CHARS]}


def _judged_on(detail: dict) -> str:
    """What a burst's recovery was judged on: the limit, the percentile before the burst it is 1.2 × of with its
    count, and the requests each window after the burst held ("" for a record without them)."""
    level, phases = detail.get("recovery_level"), detail.get("phases") or {}
    burst_end = float(phases.get("pre_s", 0.0)) + float(phases.get("burst_s", 0.0))
    counts = [w["requests"] for w in detail.get("windows") or [] if isinstance(w, dict)
              and w["start_s"] >= burst_end - 1e-6]
    if level is None or not counts:
        return ""
    name = "median" if float(level) == 50.0 else f"p{float(level):g}"
    held = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}–{max(counts)}"
    return (f"limit {format_value(detail.get('recovery_limit_ms'))} ms: 1.2 × the {name} of "
            f"{detail.get('pre_requests')} requests before; windows of {format_value(detail.get('window_s'))} s "
            f"after it held {held} requests")


def overload_section(rows: list[dict]) -> Markup:
    """Per model, every stack's overload rows (each stack on its best wire): the burst, the class, goodput, p99
    before and during, the recovery; "" when the run measured no overload."""
    bursts = [r for r in rows if is_overload(r)]
    if not bursts:
        return Markup("")
    ordered = sorted(bursts, key=lambda r: (str(r["model"]), stack_of(r), r.get("batch_size") or 0,
                                            number(r.get("load")) or 0.0))
    return render("overload.html", bursts=[_burst_row(r) for r in ordered])


def _highest_bursts(rows: list[dict]) -> dict[tuple[str, int], dict[str, dict]]:
    """(model, batch size) -> stack -> its overload row at the highest burst it ran (ok or failed, classed)."""
    bursts: dict[tuple[str, int], dict[str, dict]] = {}
    for r in rows:
        if not is_overload(r) or r.get("status") not in ("ok", "failed") or not r.get("overload_class"):
            continue
        cell = bursts.setdefault((str(r["model"]), int(r.get("batch_size") or 0)), {})
        factor = number(r.get("overload_factor")) or 0.0
        held = cell.get(stack_of(r))
        if held is None or factor > (number(held.get("overload_factor")) or 0.0):
            cell[stack_of(r)] = r
    return bursts


def overload_glance(rows: list[dict]) -> Markup:
    """Per model and batch size, how every stack behaved at the highest burst it ran (its class, goodput and
    recovery, or that its server died), one line of stacks; "" when the run measured no overload."""
    bursts = _highest_bursts(rows)
    if not bursts:
        return Markup("")
    stacks = sorted({s for cell in bursts.values() for s in cell})
    factors = {number(r.get("overload_factor")) or 0.0 for cell in bursts.values() for r in cell.values()}
    one = factors.pop() if len(factors) == 1 else None  # every stack's highest burst the same: said once
    lines = []
    for (model, batch), cell in sorted(bursts.items()):
        seen = []
        for stack in stacks:
            r = cell.get(stack)
            if r is None:
                seen.append(None)
                continue
            goodput = number(r.get("goodput_pct"))
            seen.append({"overload_class": r["overload_class"],
                         "factor": None if one is not None else f"{number(r.get('overload_factor')) or 0.0:g}",
                         "goodput": "–" if goodput is None else f"{goodput:.0f} %",
                         "recovery": recovery_words(bool(r.get("recovered")), number(r.get("recovery_s")),
                                                    r["overload_class"])})
        lines.append({"model": model, "batch": batch, "stacks": seen})
    return render("overload_glance.html", factor=None if one is None else f"{one:g}", stacks=stacks, lines=lines)
