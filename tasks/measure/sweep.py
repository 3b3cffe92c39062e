"""A sweep cell of a server life: its load points one after another (tasks/loadgen/sweep.py's concurrency sweep, or
its rate search over rates or, for a trace, over the replay's speed), one row per point, until the sweep's stop rule
or a point that ends it; the point the sweep's answer hinges on looked at longer where the run lengthens
(tasks/measure/bounds.py), its row replaced by that look's; not where a point of the server life (another wire's,
another sweep's) already holds as fast."""

from __future__ import annotations

from tasks.core.errors import ConfigError
from tasks.loadgen.measurement import Measurement
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.sweep import LongerLook, SearchLimits, concurrency_sweep, rate_sweep
from tasks.measure.bounds import bound_rule
from tasks.measure.context import ServerLife, SessionContext, not_measured
from tasks.measure.point import SERVER_FAILED, lengthen_point, measure_point
from tasks.plan.cells import SWEEP_MODES, Cell, lengthens
from tasks.validate.outcome import MEASURED_STATUSES


class _SweepStopped(Exception):
    """A sweep's point failed (its row says why): the sweep ends there."""


def measure_sweep(ctx: SessionContext, life: ServerLife, cell: Cell) -> list[dict]:
    """A sweep cell: one row per load point it ran (mode and load of the point), the stop rule in the timeline.

    A point that failed only because its load was more than the server sustains (errors or timeouts, the server
    alive and ready after it, a lower load of the same sweep ok) is the sweep's answer, not a fault: its row stays
    `failed` with its reason and is marked `beyond_capacity`, and the sweep goes on (a rate search bisects
    below it). A point whose server died or hung, or that could not run, ends the sweep."""
    config = ctx.config
    rows: list[dict] = []

    def run_point(settings: LoadSettings) -> Measurement:
        load = float(settings.load)  # a trace search's: the speed (its point's settings are the replay's)
        row, measurement = measure_point(ctx, life, cell.point(SWEEP_MODES[cell.mode], load), lengthen=False)
        lower_ok = any(r["status"] in MEASURED_STATUSES and r["load"] < load for r in rows)
        rows.append(row)
        if measurement is None or row.get(SERVER_FAILED):
            raise _SweepStopped(row["reason"])
        if row["status"] not in MEASURED_STATUSES:  # a contended point goes on: its row says what its figures are
            if not lower_ok:
                raise _SweepStopped(row["reason"])
            row["beyond_capacity"] = True
        return measurement

    def look_longer(load: float, first: Measurement) -> Measurement | None:
        measured = [i for i, r in enumerate(rows) if r["load"] == load and r["status"] in MEASURED_STATUSES]
        if not measured:  # its point was not published as measured: no answer hinges on it
            return None
        index = measured[-1]
        rows[index], measurement = lengthen_point(ctx, life, cell.point(SWEEP_MODES[cell.mode], load), rows[index],
                                                  first)
        if rows[index].get(SERVER_FAILED):
            raise _SweepStopped(rows[index]["reason"])
        if rows[index]["status"] not in MEASURED_STATUSES and any(
                r["status"] in MEASURED_STATUSES and r["load"] < load for r in rows):
            rows[index]["beyond_capacity"] = True  # held for the longer look, the load was more than it sustains
        return measurement

    def held_rps() -> float:  # the server life's fastest ok point where the bound holds, this sweep's included
        return life.best_holding_rps

    longer = LongerLook(look_longer, held_rps) if lengthens(cell, config) else None
    first_load = config.workers if cell.mode == "concurrency-sweep" else cell.load
    base = ctx.load_settings(cell, mode=SWEEP_MODES[cell.mode], load=first_load)
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    try:
        if cell.mode == "concurrency-sweep":
            result = concurrency_sweep(run_point, base, start=config.workers, max_concurrency=int(cell.load),
                                       bound=bound_rule(config), longer=longer)
        else:
            rule = bound_rule(config)
            if rule is None:
                raise ConfigError("p99_bound_ms", None, f"must be set (> 0 ms) when "
                                                        f"{cell.mode.replace('-', '_')} is on")
            result = rate_sweep(run_point, base, start_rps=cell.load, bound=rule, max_error_rate=config.max_error_rate,
                                longer=longer, limits=SearchLimits(unit="req/s" if cell.mode == "rate-search"
                                                                   else "x speed"))
        events["sweep"] = {"stop_reason": result.stop_reason, "best_load": result.best_load, "points": len(rows)}
    except _SweepStopped as exc:
        events["sweep"] = {"stop_reason": f"a point failed: {exc}"[:500], "best_load": None, "points": len(rows)}
    except Exception as exc:  # noqa: BLE001 - e.g. bad sweep bounds: the sweep cell fails, the session goes on
        reason = f"{type(exc).__name__}: {exc}"
        events["sweep"] = {"stop_reason": reason[:500], "best_load": None, "points": len(rows)}
        if not rows:
            return [not_measured(ctx.run, cell, "failed", reason, **life.served)]
    return rows
