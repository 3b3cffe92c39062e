"""What tonight knows of each planned cell before the night's budget is fitted (tasks/plan/night.py): when it was
last measured on the suite's last nights and how long it has waited, which stacks may be each model's fastest or
cheapest within the run's bound (the candidates) and on which wire, and so each cell's class.

    pasts = {c.cell_id: cell_past(c, nights) for c in plan.cells}
    classes = classify(plan, pasts)        # cell id -> answers | sweeps | wires | overload | rest
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.core.confidence import row_verdict
from tasks.core.results import OVERLOAD_MODE
from tasks.core.workloads import FIXED_WORKLOAD
from tasks.plan.cells import Cell, Plan, efficient_wires, rows_of
from tasks.plan.past_nights import PastNight

# One session's throughput moves this much between nights with nothing changed on the 2-core VM (docs/regressions.md:
# 6-15 % within the hour): two figures of different nights closer than this are not told apart
BETWEEN_NIGHTS_NOISE = 0.15
CANDIDATE_MARGIN = BETWEEN_NIGHTS_NOISE  # a stack within this of its model's best (throughput or cost) may be the best
CLOSED_LOOP = ("concurrency", "concurrency-sweep")


@dataclass(frozen=True)
class CellPast:
    """One cell's last measured night among the suite's last nights (`age` 1: last night; None: not measured on
    them), and how many of the last nights in a row deferred it (`waited`)."""

    age: int | None
    last_run_id: str | None
    last_logical_date: str | None
    waited: int = 0
    rows: tuple[dict, ...] = ()  # that night's rows of the cell (a sweep's points)

    @property
    def staleness(self) -> int:
        """The nights it has gone unmeasured: since its last measurement, or, never measured, since it first
        waited (what coverage K bounds)."""
        return self.age if self.age is not None else self.waited

    def to_dict(self) -> dict:
        return {"age": self.age, "waited": self.waited, "last_run_id": self.last_run_id,
                "last_logical_date": self.last_logical_date}


def cell_past(cell: Cell, nights: list[PastNight]) -> CellPast:
    """When `cell` was last measured (an `ok` row) on `nights` (newest first), and how many nights in a row it was
    deferred before tonight."""
    waited = 0
    for night in nights:
        if cell.cell_id not in night.deferred_ids:
            break
        waited += 1
    for age, night in enumerate(nights, start=1):
        rows = rows_of(cell, night.rows)
        if any(r.get("status") == "ok" for r in rows):
            return CellPast(age, night.run_id, night.logical_date, waited, tuple(rows))
    return CellPast(None, None, None, waited)


def _stack(row_or_cell) -> str:
    get = row_or_cell.get if isinstance(row_or_cell, dict) else lambda k: getattr(row_or_cell, k)
    return f"{get('server')}/{get('format')}"


def stack_figures(plan: Plan, pasts: dict[str, CellPast]) -> dict[tuple[str, int], dict[str, dict]]:
    """(model, batch size) -> {stack: {"wire": its best wire or None, "candidate": bool}} of every stack planned
    tonight. A candidate may be its model's fastest or cheapest within the run's bound: its last figures within
    CANDIDATE_MARGIN of the best (throughput) or of the cheapest (server core-seconds per 1,000), or no decided
    figure yet (never measured, or never decided within the bound). A stack's best wire is its fastest ok row's
    wire within the bound, on its efficient wires."""
    config = plan.config
    bound = config.p99_bound_ms
    best: dict[tuple[str, int], dict[str, dict]] = {}
    stacks: dict[tuple[str, int], set[str]] = {}
    for session in plan.sessions:
        if session.role == "control":
            continue
        fast = efficient_wires(config, session.server)
        for cell in session.cells:
            if (cell.skip or cell.mode == OVERLOAD_MODE or cell.workload != FIXED_WORKLOAD
                    or (cell.wire or "json") not in fast):  # the answers are the fixed request's
                continue
            group = (cell.model, cell.batch_size)
            stacks.setdefault(group, set()).add(_stack(cell))
            for row in pasts[cell.cell_id].rows:
                rps = row.get("throughput_rps")
                if row.get("status") != "ok" or not isinstance(rps, (int, float)) or rps <= 0:
                    continue
                if bound is not None and row_verdict(row, bound) != "holds":
                    continue
                mine = best.setdefault(group, {}).setdefault(_stack(cell), {"rps": 0.0, "wire": None, "cost": None})
                if rps > mine["rps"]:
                    mine.update(rps=rps, wire=cell.wire or "json")
                cost = row.get("server_core_s_per_1k")
                if isinstance(cost, (int, float)) and cost > 0 and (mine["cost"] is None or cost < mine["cost"]):
                    mine["cost"] = cost
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for group, names in stacks.items():
        known = best.get(group, {})
        top = max((k["rps"] for k in known.values()), default=0.0)
        cheapest = min((k["cost"] for k in known.values() if k["cost"]), default=None)
        out[group] = {}
        for stack in sorted(names):
            figures = known.get(stack)
            if figures is None:  # no decided figure: it may be the best
                out[group][stack] = {"wire": None, "candidate": True}
                continue
            near_top = figures["rps"] >= (1 - CANDIDATE_MARGIN) * top
            near_cheapest = bool(cheapest and figures["cost"] and figures["cost"] <= (1 + CANDIDATE_MARGIN) * cheapest)
            out[group][stack] = {"wire": figures["wire"], "candidate": near_top or near_cheapest}
    return out


def classify(plan: Plan, pasts: dict[str, CellPast]) -> dict[str, str]:
    """Cell id -> its class (NIGHT_CLASSES) for every cell of the plan but the control session's."""
    config = plan.config
    figures = stack_figures(plan, pasts)
    out: dict[str, str] = {}
    for session in plan.sessions:
        if session.role == "control":
            continue
        fast = efficient_wires(config, session.server)
        for cell in session.cells:
            wire = cell.wire or "json"
            mine = figures.get((cell.model, cell.batch_size), {}).get(_stack(cell)) or {"wire": None,
                                                                                        "candidate": False}
            if cell.mode == OVERLOAD_MODE:
                out[cell.cell_id] = "overload"
            elif wire not in fast or (mine["wire"] is not None and wire != mine["wire"]):
                out[cell.cell_id] = "wires"
            elif mine["candidate"] and cell.mode in CLOSED_LOOP:
                out[cell.cell_id] = "answers"
            elif cell.is_sweep:
                out[cell.cell_id] = "sweeps"
            else:
                out[cell.cell_id] = "rest"
    return out
