"""The report under a trace: per trace, model and batch size, every stack's replays (speed, requests, p99 with its
claim, the bound's verdict, how late the sends were), the largest speed at which each stack's bound holds, and
whether the stacks rank as they do under the fixed request.

A trace's rows (`workload` trace:<name>@<digest>) answer their own question: they are never ranked with the fixed
request's rows (tasks/core/results.py `is_fixed_workload`), and a stack's answer here is a speed, not a throughput.
"""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.confidence import row_verdict
from tasks.core.metrics import number
from tasks.core.workloads import is_fixed_workload, row_workload, workload_tag
from tasks.report.formatting import REASON_IN_TABLE_CHARS, cell_value, latency_text
from tasks.report.recommend import best_per_stack, stack_of
from tasks.report.templating import render
from tasks.report.wires import row_wire


def trace_rows(rows: list[dict]) -> list[dict]:
    """The rows of replayed traces (every workload but the fixed request)."""
    return [r for r in rows if not is_fixed_workload(r)]


def held_speed(rows: list[dict], bound_ms: float | None) -> float | None:
    """The largest speed among a stack's ok replays at which "p99 within the bound" holds, the generator keeping
    the trace (a saturated generator's replay proves nothing of the stack); None where none holds (or the run set
    no bound: a replay's p99 is then described, not judged)."""
    if bound_ms is None:
        return None
    held = [number(r.get("load")) for r in rows if r.get("status") == "ok" and not r.get("generator_saturated")
            and row_verdict(r, bound_ms) == "holds"]
    return max((s for s in held if s is not None), default=None)


def _speed_answer(rows: list[dict], bound_ms: float | None) -> str:
    speed = held_speed(rows, bound_ms)
    if bound_ms is None:
        return "no bound set: described, not judged"
    if speed is not None:
        return f"holds up to {speed:g} × the recorded speed"
    verdicts = {row_verdict(r, bound_ms) for r in rows if r.get("status") == "ok"}
    if "fails" in verdicts and "undecided" not in verdicts:
        return "fails at every speed measured"
    return "undecided at every speed measured" if verdicts else "no replay measured"


def _replay(row: dict, bound_ms: float | None) -> dict:
    return {"speed": f"{number(row.get('load')) or 0.0:g}", "requests": cell_value(row.get("requests")),
            "p99": latency_text(row, "latency_ms_p99"), "samples": cell_value(row.get("latency_samples")),
            "verdict": (row_verdict(row, bound_ms) or "–") if bound_ms is not None else "–",
            "late": cell_value(row.get("late_starts")), "generator_late": cell_value(row.get("generator_late_starts")),
            "lag_p99": cell_value(number(row.get("schedule_lag_ms_p99"))),
            "saturated": bool(row.get("generator_saturated")), "status": row.get("status"),
            "reason": None if row.get("status") == "ok" else str(row.get("reason") or "")[:REASON_IN_TABLE_CHARS]}


def ranking(fixed_rows: list[dict], traced: dict[str, list[dict]], bound_ms: float | None) -> dict:
    """The stacks in order under the fixed request (best throughput within the bound) and under the trace (largest
    speed held), over the stacks both rank, and whether the order changes."""
    under_fixed = [stack_of(r) for r in best_per_stack(fixed_rows, bound_ms)] if bound_ms is not None else []
    speeds = {stack: held_speed(rows, bound_ms) for stack, rows in traced.items()}
    under_trace = sorted((s for s, v in speeds.items() if v is not None), key=lambda s: (-speeds[s], s))
    both = [s for s in under_fixed if s in under_trace]
    in_trace_order = [s for s in under_trace if s in both]
    return {"fixed": under_fixed, "trace": under_trace, "changes": len(both) >= 2 and both != in_trace_order,
            "compared": len(both)}


def traces_section(rows: list[dict], bound_ms: float | None) -> Markup:
    """Every replayed trace's rows, per model and batch size, each stack's answer and the ranking against the fixed
    request's; "" when the run replayed no trace."""
    replays = trace_rows(rows)
    if not replays:
        return Markup("")
    fixed = [r for r in rows if is_fixed_workload(r)]
    groups = []
    for workload, model, batch in sorted({(row_workload(r), str(r["model"]), int(r.get("batch_size") or 0))
                                          for r in replays}):
        mine = [r for r in replays if row_workload(r) == workload and str(r["model"]) == model
                and int(r.get("batch_size") or 0) == batch]
        stacks: dict[str, list[dict]] = {}
        for r in sorted(mine, key=lambda r: (stack_of(r), row_wire(r), number(r.get("load")) or 0.0)):
            stacks.setdefault(stack_of(r), []).append(r)
        peers = [r for r in fixed if str(r["model"]) == model and int(r.get("batch_size") or 0) == batch]
        groups.append({
            "trace": workload_tag(workload), "workload": workload, "model": model, "batch": batch,
            "stacks": [{"stack": stack, "answer": _speed_answer(points, bound_ms),
                        "points": [{**_replay(r, bound_ms), "wire": row_wire(r)} for r in points]}
                       for stack, points in stacks.items()],
            "ranking": ranking(peers, stacks, bound_ms)})
    return render("traces.html", groups=groups, bound=bound_ms)
