"""The order the night's regression work is done in: what the answers and the team need first.

    order = work_order(groups, rows, plan)       # in the regression check; regressions.json `order`

Tonight's A/A duet of the control cell goes before all of it (it sets the night's noise floor: tasks/regress/
night_duets.py). Then the changed load points, each one's duet, then its size, then its attribution, before the next
point's: round by round, one load point of each changed planned cell in a round, and in each round the cells the
answers rest on (`answer_cells(plan.night)`, tasks/plan/night.py) before the others, in the plan's order. A sweep
cell's rows are its points (tasks/plan/cells.py `rows_of`): its first is the one its answer rests on, its fastest ok
point within the run's bound (Param p99_bound_ms: the bound holds there; without a bound, its fastest), the others
after it fastest first. A load point whose row belongs to no planned cell comes last.
"""

from __future__ import annotations

from tasks.core.confidence import row_verdict
from tasks.core.metrics import number
from tasks.plan.cells import Plan, rows_of
from tasks.plan.night import answer_cells
from tasks.regress.size_rounds import POINT_FIELDS


def _row_of(group: dict, point: dict, rows: list[dict]) -> dict:
    """Tonight's row of a group's load point (its session's fields and the point's)."""
    want = {**{k: v for k, v in group["session"].items()}, **point}
    found = [r for r in rows if all(r.get(k) == v for k, v in want.items())]
    return found[0] if found else want


def _answer_first(rows: list[dict], bound_ms: float | None) -> list[dict]:
    """A cell's points, the one its answer rests on first (its fastest ok point within the bound), then fastest
    first."""
    def speed(row: dict) -> float:
        return number(row.get("throughput_rps")) or 0.0

    ordered = sorted(rows, key=speed, reverse=True)
    within = [r for r in ordered if r.get("status", "ok") == "ok"
              and (bound_ms is None or row_verdict(r, bound_ms) == "holds")]
    if not within:
        return ordered
    return [within[0], *[r for r in ordered if r is not within[0]]]


def work_order(groups: list[dict], rows: list[dict], plan: Plan) -> list[dict]:
    """Every changed load point of the night's duet groups, in the order its work is done: each as its group's
    `duet_id`, its `point` index, its planned `cell_id`, whether the answers rest on it (`answer`) and its `round`
    (1: its cell's first point)."""
    answers = answer_cells(plan.night)
    cells = plan.cells
    by_cell: dict[int, list[tuple[dict, dict, int]]] = {}  # plan position -> (row, group, point index)
    for group in groups:
        for index, point in enumerate(group["points"]):
            row = _row_of(group, point, rows)
            position = next((i for i, cell in enumerate(cells) if rows_of(cell, [row])), len(cells))
            by_cell.setdefault(position, []).append((row, group, index))
    entries = []
    for position, found in by_cell.items():
        cell_id = cells[position].cell_id if position < len(cells) else None
        answer = cell_id in answers
        first = _answer_first([row for row, _, _ in found], plan.config.p99_bound_ms)
        for round_, row in enumerate(first, start=1):
            _, group, index = next(f for f in found if f[0] is row)
            entries.append({"duet_id": group["duet_id"], "point": index, "cell_id": cell_id, "answer": answer,
                            "round": round_, "position": position,
                            **{k: group["points"][index].get(k) for k in POINT_FIELDS}})
    entries.sort(key=lambda e: (e["round"], not e["answer"], e["position"]))
    return [{k: v for k, v in e.items() if k != "position"} for e in entries]
