"""The night's budget: what every stage of a run is planned to cost, what fits in Param `night_budget_s` in the order
of Param `night_order`, and the clock the later steps read (docs/design.md#the-nights-budget).

    plan = fit_night(make_plan(config), nights)      # nights: tasks/plan/past_nights.py, newest first

Every planned cell gets a class (`classify`): `answers` (a stack that may be its model's fastest or cheapest within
the run's bound: its last figures within CANDIDATE_MARGIN of the best, or no decided figure yet; its closed-loop
cells on its best wire, every efficient wire while that is unknown), `sweeps` (the other sweeps and rate searches
on a stack's best or efficient wires), `wires` (REST JSON beside a faster wire, an efficient wire that is not the
stack's best), `overload`, `rest`. The cells are then taken in this order, each while it fits the measuring time
left: the control cell (every night), the `answers` class, then cells overdue for coverage, cells whose inputs
changed (tasks/plan/fingerprints.py), the cells measured longest ago (never measured first), and last the classes
in `night_order`. A cell's cost is its estimate (tasks/plan/estimates.py), plus its session's own time when it
opens the session. A session's overload cells at one factor are one unit (the burst runs on the stack's fastest
wire only) and run only where the session measures a capacity tonight. What does not fit is deferred with the
reason and the night it was last measured; the sessions keep only the cells that run, in the order of their first
cell's place.

The measuring time is the budget less the night's fixed stages (plan, validation, the regression check's reads,
publishing: their last actuals), the conversions not in the artifact cache, the runtimes not yet built, and the
reserve for the regression work: tonight's A/A duet and, per changed cell that runs, one load point's duet and
size (at most RESERVE_SHARE of the budget). K, the nights in which every cell is measured at least once, is the
other classes' cost over what a night leaves them after the control and the answers.

The plan's `night` record (`Plan.night`, plan.json and the plan task's XCom; empty without a budget):

    budget_s            Param night_budget_s
    started_at_s        wall-clock time (epoch seconds) the plan step started the run (`start_clock`; absent in a dry
                        `tasks.cli plan`)
    measure_end_s       seconds after the start by which the measuring stage is planned to end: no load point
                        starts after it, no longer look that would end after it
    regress_end_s       seconds after the start by which the regression work (duets, sizes, attribution) must end
    reserve_s           the seconds planned for the regression work of the changed cells
    answer_cells        the cell ids the answers rest on (class `answers`), measured first and judged first
    changed_cells       cell id -> what changed since its last measured night (as the plan step sees it)
    classes             cell id -> its class (one of NIGHT_CLASSES)
    cells               cell id -> {"seconds", "source", "age", "last_run_id", "last_logical_date"} of every cell
    deferred            the cells left for a later night: cell, class, reason, age, last measured night, overdue
    coverage            {"K", "overdue", "note"}: every cell measured at least once every K nights
    stages              stage -> {"planned_s", "source"}; the publish step adds "actual_s"
    elapsed_s, publish_begin_s  the publish step's: the night until night.json was written, and publishing's start
                        (epoch); `past_nights` takes both to the manifest's `published_at`, after the uploads

The later steps read the clock through `measure_deadline`, `regress_deadline` and `answer_cells`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from tasks.convert import find_path
from tasks.convert.core import check_conversion
from tasks.convert.tensorrt import gpu_skip_reason
from tasks.core.results import OVERLOAD_MODE
from tasks.core.spec import load_spec
from tasks.plan.candidates import CLOSED_LOOP, CellPast, cell_past, classify
from tasks.plan.cells import Cell, Plan, Session
from tasks.plan.control import control_cell, is_control_match
from tasks.plan.estimates import CACHED_CONVERSION_S, Estimate, Estimator, ceil_nights
from tasks.plan.fingerprints import planned_changes
from tasks.plan.past_nights import PastNight
from tasks.runtimes.venvs import runtime_built
from tasks.serve.servers import get_server

# The answers take at most this share of a night's measuring time before the other cells: they come first, and the
# other cells still get the rest, so that every cell is measured within K nights however many stacks are candidates
ANSWERS_SHARE = 0.6
RESERVE_SHARE = 0.35  # the regression work's reserve takes at most this share of the budget: the answers come first
RUNTIME_BUILD_S = 10.0  # a runtime venv not in the cache, built before its first use (1-8 s each here with uv)
AA_PAIRS = 4  # tonight's A/A duet of the control cell (tasks/regress/night_duets.py AA_PAIRS)


def _deadline(night: dict, key: str) -> float | None:
    if not night or night.get("started_at_s") is None or night.get(key) is None:
        return None
    return float(night["started_at_s"]) + float(night[key])


def measure_deadline(night: dict) -> float | None:
    """The wall-clock time (epoch seconds) after which no further load point starts; None: no budget."""
    return _deadline(night, "measure_end_s")


def regress_deadline(night: dict) -> float | None:
    """The wall-clock time (epoch seconds) by which the night's regression work must end; None: no budget (the
    Params size_budget_s and duet_max_pairs alone bound it)."""
    return _deadline(night, "regress_end_s")


def answer_cells(night: dict) -> frozenset[str]:
    """The cell ids the night's answers rest on (measured and judged first); empty without a budget."""
    return frozenset((night or {}).get("answer_cells") or ())


@dataclass(frozen=True)
class NightClock:
    """The measuring stage's clock as a session reads it: no cell starts that its estimate says would end after
    `deadline_s` (epoch seconds), and no longer look either."""

    deadline_s: float
    cell_s: dict[str, float]  # cell id -> its planned seconds
    session_s: dict[str, float]  # session id -> its own planned seconds (start-up, checks, stop)
    end_s: float | None = None  # when the night is planned to end (epoch seconds): the progress lines say it

    @classmethod
    def of(cls, night: dict) -> NightClock | None:
        """The clock of a plan's night record (None: no budget, or a plan that was never started)."""
        deadline = measure_deadline(night)
        if deadline is None:
            return None
        started, planned = night.get("started_at_s"), night.get("planned_s")
        return cls(deadline, {c: float(v.get("seconds") or 0.0) for c, v in (night.get("cells") or {}).items()},
                   {s: float(v) for s, v in (night.get("sessions") or {}).items()},
                   None if started is None or planned is None else float(started) + float(planned))

    def left_s(self, now: float | None = None) -> float:
        return self.deadline_s - (time.time() if now is None else now)

    def cut(self, seconds: float, now: float | None = None) -> str | None:
        """Why something planned to take `seconds` does not start now (None: it fits before the deadline)."""
        left = self.left_s(now)
        if seconds <= left:
            return None
        return (f"deferred by the night's clock: {seconds:.0f} s planned, {max(0.0, left):.0f} s left before the "
                "measuring stage's end")

    def cut_cell(self, cell_id: str, now: float | None = None) -> str | None:
        return self.cut(self.cell_s.get(cell_id, 0.0), now)


def start_clock(night: dict, started_at_s: float | None = None) -> dict:
    """The plan's night record with the run's start on the wall clock (the plan step's), so the deadlines hold."""
    if not night:
        return night
    return {**night, "started_at_s": time.time() if started_at_s is None else started_at_s}


# --- the fit --------------------------------------------------------------------------------------------------

@dataclass
class Unit:
    """What the fit runs or defers as one: a planned cell, or a session's overload cells at one factor."""

    session: int  # index into the plan's sessions
    cells: tuple[Cell, ...]
    klass: str
    estimate: Estimate
    changed: bool
    age: int | None
    always: bool = False  # the control cell, and cells this host skips: planned every night
    overdue: bool = False
    order: int = 0
    free: bool = False  # skipped on this host: no server starts for it
    staleness: int = 0  # nights unmeasured (CellPast.staleness): K bounds it
    model_rank: int = 0  # its place among its model's units of its class, in plan order

    @property
    def is_overload(self) -> bool:
        return self.cells[0].mode == OVERLOAD_MODE


def host_skip(plan: Plan, session: Session) -> str | None:
    """Why this host cannot serve the session at all (its server not on this launcher, a GPU-only format without a
    GPU): its cells are skipped rows that cost nothing, planned every night so the report says why."""
    if session.role != "control":
        reason = get_server(session.server).skip_reason(plan.config.launcher, fmt=session.format)
        if reason:
            return reason
        if any(hop.needs_gpu for hop, _ in check_conversion(load_spec(session.model), session.format)):
            return gpu_skip_reason()
    return None


def _units(plan: Plan, costs: Estimator, classes: dict[str, str], changes: dict[str, list[str]],
           pasts: dict[str, CellPast]) -> list[Unit]:
    control = control_cell(plan.config)
    units: list[Unit] = []
    for index, session in enumerate(plan.sessions):
        skipped = host_skip(plan, session)
        bursts: dict[tuple, list[Cell]] = {}
        for cell in session.cells:
            if skipped:
                units.append(Unit(index, (cell,), classes.get(cell.cell_id, "rest"),
                                  Estimate(0.0, f"skipped on this host: {skipped}"), False, None, always=True,
                                  order=len(units), free=True))
                continue
            if cell.mode == OVERLOAD_MODE and not cell.skip:
                bursts.setdefault((cell.batch_size, cell.load), []).append(cell)
                continue
            always = session.role == "control" or (
                control is not None and cell.mode in CLOSED_LOOP and (cell.wire or "json") == "json"
                and is_control_match(cell.to_dict(), control))
            past = pasts[cell.cell_id]
            units.append(Unit(index, (cell,), classes.get(cell.cell_id, "rest"), costs.cell(cell),
                              cell.cell_id in changes, past.age, always=always, order=len(units),
                              staleness=past.staleness))
        for cells in bursts.values():  # the burst runs on one wire: the unit is as fresh as its freshest cell
            mine = [pasts[c.cell_id] for c in cells]
            ages = [p.age for p in mine if p.age is not None]
            units.append(Unit(index, tuple(cells), "overload", costs.cell(cells[0]),
                              any(c.cell_id in changes for c in cells), min(ages) if ages else None,
                              order=len(units), staleness=min(p.staleness for p in mine)))
    seen: dict[tuple[str, str], int] = {}
    for unit in units:
        key = (unit.cells[0].model, unit.klass)
        unit.model_rank = seen.get(key, 0)
        seen[key] = unit.model_rank + 1
    return units


def _rolling_key(unit: Unit, order: tuple[str, ...]) -> tuple:
    """The order of the cells that share the measuring time: overdue, changed, measured longest ago (never measured
    first), then by class, then each model's first cell before any model's second (every model gets its answers)."""
    age = float("inf") if unit.age is None else unit.age
    return (not unit.overdue, not unit.changed, -age, order.index(unit.klass), unit.model_rank, unit.order)


@dataclass(frozen=True)
class Fit:
    run: list[Unit]
    deferred: list[tuple[Unit, str]]
    measure_s: float  # the planned seconds of the units that run, their sessions' own time included
    available_s: float  # the measuring time the night had for them


def _fill(units: list[Unit], plan: Plan, costs: Estimator, available_s: float, order: tuple[str, ...]) -> Fit:
    """Take the units while each fits the measuring time left: the control, then the answers within ANSWERS_SHARE
    of the time, then everything else (the answers over their share among it) in `_rolling_key`'s order. An overload
    unit needs a steady cell of its session to run tonight (its burst is sized on the capacity they measure): one
    whose session has none yet waits, and is taken after the others if its session then has one."""
    opened: set[int] = set()
    steady: set[int] = set()
    spent = 0.0
    run: list[Unit] = []
    deferred: list[tuple[Unit, str]] = []
    waiting: list[Unit] = []

    def take(unit: Unit) -> bool:
        nonlocal spent
        own = 0.0 if unit.session in opened or unit.free else costs.session(plan.sessions[unit.session]).seconds
        cost = unit.estimate.seconds + own
        if not unit.always and spent + cost > available_s:
            deferred.append((unit, f"the night's budget: {cost:.0f} s more did not fit in the {available_s:.0f} s "
                                   f"of measuring time, {spent:.0f} s of it taken"))
            return False
        spent += cost
        if not unit.free:
            opened.add(unit.session)
        if not unit.is_overload:
            steady.add(unit.session)
        run.append(unit)
        return True

    def offer(unit: Unit) -> None:
        if unit.is_overload and unit.session not in steady:
            waiting.append(unit)
        else:
            take(unit)

    for unit in (u for u in units if u.always):
        take(unit)
    answers = sorted((u for u in units if not u.always and u.klass == "answers"), key=lambda u: _rolling_key(u, order))
    later: list[Unit] = []
    allotment = ANSWERS_SHARE * available_s
    for unit in answers:  # the answers first, within their share: what is over it rolls with the rest
        own = 0.0 if unit.session in opened else costs.session(plan.sessions[unit.session]).seconds
        if spent + unit.estimate.seconds + own <= allotment:
            take(unit)
        else:
            later.append(unit)
    rest = [u for u in units if not u.always and u.klass != "answers"]
    for unit in sorted(later + rest, key=lambda u: _rolling_key(u, order)):
        offer(unit)
    for unit in waiting:
        if unit.session in steady:
            take(unit)
        else:
            deferred.append((unit, "its session measures no capacity tonight (its steady cells are deferred)"))
    return Fit(run, deferred, spent, available_s)


def fit_night(plan: Plan, nights: list[PastNight]) -> Plan:
    """`plan` fitted into its budget (unchanged without Param night_budget_s): its sessions keep the cells that run
    tonight, in priority order, and `plan.night` says what was planned and deferred (module docstring)."""
    config = plan.config
    if config.night_budget_s is None:
        return plan
    budget = float(config.night_budget_s)
    costs = Estimator(config, nights)
    pasts = {c.cell_id: cell_past(c, nights) for c in plan.cells}
    changes = planned_changes(plan, nights)
    classes = classify(plan, pasts)
    units = _units(plan, costs, classes, changes, pasts)
    fixed = costs.fixed()
    conversions = [costs.conversion(c) for c in plan.conversions]
    runtimes = _runtime_builds(plan)
    control = next((s for s in plan.sessions if s.role == "control"), None)
    aa = costs.aa_duet(control or _session_of_control(plan), AA_PAIRS)
    before_s = sum(e.seconds for e in fixed.values()) + sum(e.seconds for e in conversions) + runtimes.seconds

    def reserve_for(run: list[Unit]) -> Estimate:
        changed = [u for u in run if u.changed and not u.is_overload]
        work = sum(costs.regress_point(plan.sessions[u.session]).seconds for u in changed)
        cap = RESERVE_SHARE * budget
        seconds = aa.seconds + min(work, cap)
        return Estimate(seconds, f"{aa.source}; {len(changed)} changed cell(s) tonight: one load point each, "
                                 f"{work:.0f} s" + (f", capped at {100 * RESERVE_SHARE:g} % of the budget"
                                                    if work > cap else ""))

    # K on a steady night (conversions cached, runtimes built); a cell whose age reached K must run tonight
    steady = budget - sum(e.seconds for e in fixed.values()) - len(conversions) * CACHED_CONVERSION_S - aa.seconds
    k = coverage_nights(units, plan, costs, steady)
    for unit in units:
        unit.overdue = k is not None and unit.staleness >= k
    reserve = reserve_for([u for u in units if u.changed])
    fit = _fill(units, plan, costs, budget - before_s - reserve.seconds, config.night_order)
    reserve = reserve_for(fit.run)  # only the changed cells that run tonight have regression work
    fit = _fill(units, plan, costs, budget - before_s - reserve.seconds, config.night_order)
    return _fitted(plan, fit, Known(pasts, classes, changes), k,
                   {**{stage: e for stage, e in fixed.items()},
                    "conversions": Estimate(sum(e.seconds for e in conversions),
                                            f"{sum(e.source == 'in the artifact cache' for e in conversions)} of "
                                            f"{len(conversions)} in the artifact cache"),
                    "runtimes": runtimes,
                    "measure": Estimate(fit.measure_s, f"{len(fit.run)} units in {len({u.session for u in fit.run})} "
                                                       "sessions, each session's own time included"),
                    "regress": reserve},
                   {u.session: (0.0 if u.free else costs.session(plan.sessions[u.session]).seconds) for u in fit.run})


def _session_of_control(plan: Plan) -> Session | None:
    control = control_cell(plan.config)
    if control is None:
        return None
    return next((s for s in plan.sessions if s.cells and is_control_match(s.cells[0].__dict__, control)), None)


def _runtime_builds(plan: Plan) -> Estimate:
    names = {get_server(s.server).runtime for s in plan.sessions if not get_server(s.server).skip_reason(
        plan.config.launcher)} if plan.config.launcher == "process" else set()
    for conv in plan.conversions:
        names |= {hop.runtime for hop in find_path(load_spec(conv["model"]), conv["format"]) if not hop.needs_gpu}
    missing = sorted(n for n in names if not runtime_built(n))
    return Estimate(len(missing) * RUNTIME_BUILD_S,
                    f"{len(missing)} runtime venv(s) to build ({', '.join(missing) or 'none'}), "
                    f"{RUNTIME_BUILD_S:g} s each")


def coverage_nights(units: list[Unit], plan: Plan, costs: Estimator, steady_s: float) -> int | None:
    """K: the nights in which every cell is measured at least once, at `steady_s` of measuring time a night (a night
    whose conversions are cached and whose runtimes are built). Each night measures the control and the answers
    first, within ANSWERS_SHARE of its time; the rest of them and the other classes share what is left. None: a
    night leaves no time beyond the control."""
    def cost(chosen: list[Unit]) -> float:
        sessions = {u.session for u in chosen if not u.free}
        return sum(u.estimate.seconds for u in chosen) + sum(costs.session(plan.sessions[i]).seconds for i in sessions)

    control = [u for u in units if u.always]
    answers = [u for u in units if not u.always and u.klass == "answers"]
    rolling = [u for u in units if not u.always and u.klass != "answers"]
    left = steady_s - cost(control)
    if left <= 0:
        return None
    fitted = min(cost(answers), ANSWERS_SHARE * left)  # the answers measured every night
    return ceil_nights(cost(answers) - fitted + cost(rolling), left - fitted)


@dataclass(frozen=True)
class Known:
    """What the plan step knows of tonight's cells: when each was last measured, its class, what changed."""

    pasts: dict[str, CellPast]
    classes: dict[str, str]
    changes: dict[str, list[str]]


def _fitted(plan: Plan, fit: Fit, known: Known, k: int | None, stages: dict[str, Estimate],
            costs_own: dict[int, float]) -> Plan:
    pasts, classes, changes = known.pasts, known.classes, known.changes
    budget = float(plan.config.night_budget_s)
    run_ids = {c.cell_id for u in fit.run for c in u.cells}
    rank = {}
    for position, unit in enumerate(fit.run):
        rank.setdefault(unit.session, position)
    sessions = []
    for index in sorted(rank, key=rank.get):
        session = plan.sessions[index]
        kept = tuple(c for c in session.cells if c.cell_id in run_ids or c.skip)
        if any(not c.skip for c in kept):
            sessions.append(replace(session, cells=kept))
    deferred = []
    for unit, reason in fit.deferred:
        for cell in unit.cells:
            past = pasts[cell.cell_id]
            deferred.append({"cell_id": cell.cell_id, "session_id": plan.sessions[unit.session].session_id,
                             "model": cell.model, "format": cell.format, "server": cell.server, "class": unit.klass,
                             "reason": reason, "overdue": unit.overdue, "when": "plan", **past.to_dict(),
                             "cell": cell.to_dict()})
    planned = {stage: {"planned_s": round(e.seconds, 1), "source": e.source} for stage, e in stages.items()}
    # the latest the measuring may end and still leave validation, the regression check and its work, and publishing
    # their planned time; the regression work may run until publishing must start
    measure_end = budget - sum(stages[s].seconds for s in ("validate", "regress_check", "regress", "publish"))
    regress_end = budget - stages["publish"].seconds
    overdue = [d["cell_id"] for d in deferred if d["overdue"]]
    night = {
        "budget_s": budget, "measure_end_s": round(measure_end, 1), "regress_end_s": round(regress_end, 1),
        "reserve_s": round(stages["regress"].seconds, 1),
        "answer_cells": sorted(c for c, k_ in classes.items() if k_ == "answers" and c in run_ids),
        "changed_cells": {c: changes[c] for c in sorted(changes)}, "classes": classes,
        "cells": {c.cell_id: {"seconds": round(u.estimate.seconds, 1), "source": u.estimate.source,
                              **pasts[c.cell_id].to_dict()} for u in [*fit.run, *(d for d, _ in fit.deferred)]
                  for c in u.cells},
        "sessions": {plan.sessions[i].session_id: round(costs_own[i], 1) for i in costs_own},
        "deferred": deferred,
        "coverage": {"K": k, "overdue": overdue, "note": coverage_note(k, len(deferred), overdue)},
        "stages": planned, "planned_s": round(sum(e.seconds for e in stages.values()), 1),
    }
    return Plan(plan.config, plan.conversions, sessions, night)


def coverage_note(k: int | None, deferred: int, overdue: list[str]) -> str:
    """The coverage in words, for the plan's output and the report."""
    if k is None:
        return (f"{deferred} cells deferred; the control and the answers alone fill the night: the other cells "
                "cannot all be covered at this budget (raise night_budget_s or add measuring hosts)")
    head = f"{deferred} cells deferred, coverage every {k} night{'s' if k != 1 else ''}"
    return head + (f"; {len(overdue)} overdue (past K, deferred again)" if overdue else "")



# --- the night as it went -------------------------------------------------------------------------------------

STAGE_ORDER = ("plan", "runtimes", "conversions", "measure", "validate", "regress_check", "regress", "publish")
STAGE_NAMES = {"plan": "plan", "runtimes": "runtime builds", "conversions": "conversions", "measure": "measuring",
               "validate": "validation", "regress_check": "regression check", "regress": "regression work",
               "publish": "publishing"}


def span(clocks: list[dict | None]) -> dict | None:
    """The first begin to the last end of several clocks ({"begin", "end"} epoch seconds); None: none ran."""
    clocks = [c for c in clocks if c and c.get("begin") is not None and c.get("end") is not None]
    if not clocks:
        return None
    return {"begin": min(c["begin"] for c in clocks), "end": max(c["end"] for c in clocks)}


def stage_clocks(started: dict, collected: dict, conversions: list[dict], validation: dict, regressions: dict,
                 publish_begin: float) -> dict[str, dict | None]:
    """Each stage's wall-clock begin and end, as its step recorded it in its output (the plan step's `run`, each
    conversion's and each session timeline's, validation's, the regression check's and its duets'): the night's
    actual seconds per stage, publishing's until now."""
    tasks = [{"begin": t.get("task_begin"), "end": t.get("task_end")} for t in collected.get("timelines") or [] if t]
    return {"plan": started["run"].get("plan_clock"), "conversions": span([c.get("clock") for c in conversions if c]),
            "measure": span(tasks), "validate": validation.get("clock"), "regress_check": regressions.get("clock"),
            "regress": regressions.get("duet_clock"), "publish": {"begin": publish_begin, "end": time.time()}}


def night_outcome(night: dict, deferred_at_run: list[dict], clocks: dict[str, dict | None], now_s: float) -> dict:
    """night.json: the plan's record with each stage's actual seconds (from `clocks`, stage -> {"begin", "end"}),
    how long the night took until `now_s`, and the cells the measuring stage's clock deferred added to the plan's
    (each with its class and the night it was last measured). Empty without a budget."""
    if not night:
        return {}
    classes, cells = night.get("classes") or {}, night.get("cells") or {}
    k = (night.get("coverage") or {}).get("K")
    later = []
    for item in deferred_at_run:
        past = cells.get(item["cell_id"]) or {}
        age, waited = past.get("age"), past.get("waited") or 0
        later.append({**item, "class": classes.get(item["cell_id"], "rest"), "age": age, "waited": waited,
                      "last_run_id": past.get("last_run_id"), "last_logical_date": past.get("last_logical_date"),
                      "overdue": k is not None and (age if age is not None else waited) >= k})
    deferred = [*(night.get("deferred") or []), *later]
    stages = {}
    for stage in STAGE_ORDER:
        planned = (night.get("stages") or {}).get(stage)
        clock = clocks.get(stage)
        if planned is None and clock is None:
            continue
        stages[stage] = {**(planned or {}),
                         "actual_s": None if clock is None else round(clock["end"] - clock["begin"], 1)}
    started = night.get("started_at_s")
    overdue = [d["cell_id"] for d in deferred if d.get("overdue")]
    coverage = {**(night.get("coverage") or {}), "overdue": overdue,
                "note": coverage_note(k, len(deferred), overdue)}
    publish = clocks.get("publish") or {}
    return {**night, "deferred": deferred, "stages": stages, "coverage": coverage,
            "elapsed_s": None if started is None else round(now_s - float(started), 1),
            "publish_begin_s": publish.get("begin")}  # the store's reader takes publishing to the manifest's time


def night_lines(night: dict) -> list[str]:
    """The night's budget in lines, for the plan step's log and `tasks.cli plan`: each stage's planned seconds,
    each class's cells run and deferred, the changed cells, the coverage."""
    if not night:
        return []
    stages = night.get("stages") or {}
    used = ", ".join(f"{STAGE_NAMES[s]} {stages[s]['planned_s']:.0f} s" for s in STAGE_ORDER if s in stages)
    lines = [f"budget {night['budget_s']:.0f} s, planned {night.get('planned_s', 0):.0f} s: {used}"]
    classes = night.get("classes") or {}
    later = {d["cell_id"] for d in night.get("deferred") or []}
    counts = []
    for klass in dict.fromkeys(classes.values()):
        mine = [c for c, k in classes.items() if k == klass]
        counts.append(f"{klass} {len(mine) - sum(c in later for c in mine)} of {len(mine)}")
    lines.append("cells run tonight by class: " + ", ".join(counts))
    changed = night.get("changed_cells") or {}
    if changed:
        first = next(iter(changed))
        lines.append(f"{len(changed)} cells changed since their last night (first: {first}: "
                     f"{'; '.join(changed[first])})")
    lines.append((night.get("coverage") or {}).get("note", ""))
    lines.append(f"no load point starts after {night['measure_end_s']:.0f} s; the regression work ends by "
                 f"{night['regress_end_s']:.0f} s (reserve {night['reserve_s']:.0f} s)")
    return lines
