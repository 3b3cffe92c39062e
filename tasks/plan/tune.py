"""The serving-configuration search: each stack at its best under a latency bound, on the same model and load.

Triton's Model Analyzer searches Triton's knobs; this searches every stack's, declared by each server class
(`Server.knobs`, `tasks/serve/knobs.py`). A configuration is measured by a whole server session with the run's
normal load points; its *score* is the highest throughput among its `ok` points whose p99 is within
`p99_bound_ms`. Methods (Param `tune`):

- `grid`: the default configuration, then every combination of the declared values, in a fixed order;
- `quick`: Model Analyzer's quick search made plain: from the default, one knob at a time (in the order the
  server declares them), try each of its values with the others at the best found so far, and keep a value
  only when it raises the score by at least MIN_GAIN_PCT (smaller gains are within this machine's noise). A
  knob that does not matter at the best so far (a batching delay while batching stays off) is not tried.

No configuration is measured twice, in either method: configurations are compared in their canonical form
(`tasks.serve.knobs.canonical`), so a knob that changes nothing does not make a new one; a quick search that
moved away from a value and comes back to it has measured it already.

Both stop when the server's time budget (`tune_budget_s`) would be exceeded by the next configuration (its
cost is estimated from the configurations measured so far, or from the plan before the first). The search
records every configuration it measured, in order, with its score; the best is the highest score (the default
wins ties: a change must earn its place).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tasks.core.results import OVERLOAD_MODE
from tasks.core.workloads import TRACE_MODE, TRACE_MODES
from tasks.loadgen.sweep import DEFAULT_MAX_POINTS, doubling
from tasks.loadgen.trace import planned_replay_s
from tasks.serve.knobs import Knob, canonical, config_id, describe

TUNE_METHODS = ("off", "grid", "quick")
MIN_GAIN_PCT = 3.0
STARTUP_ESTIMATE_S = 30.0  # a server's start-up, as the budget counts it before one was measured
POINT_OVERHEAD_S = 2.0  # per load point: the generator's processes start, connect and are summarized


@dataclass(frozen=True)
class Trial:
    """One configuration measured: its score and what it cost."""

    config: dict[str, Any]
    config_id: str
    score_rps: float | None  # best throughput of an ok point with p99 within the bound; None when none was
    p99_ms: float | None  # the p99 of that point
    elapsed_s: float
    note: str = ""  # why it has no score (e.g. the server failed to start)


@dataclass(frozen=True)
class SearchResult:
    method: str
    trials: tuple[Trial, ...]
    best: Trial | None
    stop_reason: str
    budget_s: float
    used_s: float
    defaults: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["best_config_id"] = self.best.config_id if self.best else None
        data["best_change"] = describe(self.best.config, self.defaults) if self.best else None
        return data


Measure = Callable[[dict[str, Any], str], Trial]  # (configuration, its id) -> the measured trial


def estimate_config_s(cells, warmup_s: float, duration_s: float, workers: int = 1) -> float:
    """What one configuration of a session costs at most, from the plan (`cells`: its Cells): a start-up, then every
    load point (a sweep's points counted at their bound), each warm-up + measured time + the generator's start; a
    cell planned skipped (`skip`: its server lacks the wire) costs nothing, and a session of only those no start."""
    cells = [c for c in cells if not getattr(c, "skip", None)]
    if not cells:
        return 0.0
    points, replays_s = 0, 0.0
    for cell in cells:
        if cell.mode in TRACE_MODES:  # a trace's point is its replay, not duration_s
            replays_s += planned_replay_s(cell.workload, cell.load, cell.mode != TRACE_MODE) + POINT_OVERHEAD_S
        elif cell.mode == "concurrency-sweep":
            points += len(doubling(workers, int(cell.load)))
        elif cell.mode == "rate-search":
            points += DEFAULT_MAX_POINTS
        elif cell.mode == OVERLOAD_MODE:  # pre, burst and recover stretches: 3.5 times duration_s (loadgen/overload)
            points += 4
        else:
            points += 1
    return STARTUP_ESTIMATE_S + points * (warmup_s + duration_s + POINT_OVERHEAD_S) + replays_s


def grid_configs(knobs: tuple[Knob, ...], defaults: dict[str, Any]) -> list[dict[str, Any]]:
    """The defaults first, then every combination of the knobs' values (the defaults' own not repeated)."""
    combos = [dict(zip([k.field for k in knobs], values, strict=True))
              for values in itertools.product(*(k.values for k in knobs))]
    ordered = [canonical(defaults, knobs, defaults)]
    for combo in combos:
        config = canonical({**defaults, **combo}, knobs, defaults)
        if config not in ordered:
            ordered.append(config)
    return ordered


def better(candidate: Trial, best: Trial | None, min_gain_pct: float = MIN_GAIN_PCT) -> bool:
    """A candidate beats the best so far when its score is higher by at least `min_gain_pct`."""
    if candidate.score_rps is None:
        return False
    if best is None or best.score_rps is None:
        return True
    return candidate.score_rps >= best.score_rps * (1 + min_gain_pct / 100)


class _Budget:
    def __init__(self, budget_s: float, first_estimate_s: float, clock: Callable[[], float]) -> None:
        self.budget_s, self.estimate_s, self.clock = budget_s, first_estimate_s, clock
        self.started = clock()
        self.costs: list[float] = []

    @property
    def used_s(self) -> float:
        return self.clock() - self.started

    def fits_another(self) -> bool:
        expected = max(self.costs) if self.costs else self.estimate_s
        return self.used_s + expected <= self.budget_s

    def record(self, trial: Trial) -> None:
        self.costs.append(trial.elapsed_s)


def search(method: str, measure: Measure, knobs: tuple[Knob, ...], defaults: dict[str, Any], *, budget_s: float,
           estimate_s: float, clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Run the `grid` or `quick` search within `budget_s`; `estimate_s` is the plan's cost of one configuration."""
    budget = _Budget(budget_s, estimate_s, clock)
    trials: list[Trial] = []
    best: Trial | None = None
    defaults = canonical(defaults, knobs, defaults)

    def run(config: dict[str, Any]) -> Trial:
        trial = measure(config, config_id(config, defaults))
        budget.record(trial)
        trials.append(trial)
        return trial

    def measured(config: dict[str, Any]) -> bool:
        return any(t.config_id == config_id(config, defaults) for t in trials)

    stop_reason = "every configuration measured"
    if method == "grid":
        for config in grid_configs(knobs, defaults):
            if trials and not budget.fits_another():
                stop_reason = f"time budget: {budget.used_s:.0f} of {budget_s:.0f} s used"
                break
            trial = run(config)
            if better(trial, best):
                best = trial
    elif method == "quick":
        best = run(dict(defaults))
        current = dict(defaults)
        for knob, value in ((k, v) for k in knobs for v in k.values):
            config = canonical({**current, knob.field: value}, knobs, defaults)
            if not knob.matters(current) or measured(config):
                continue
            if not budget.fits_another():
                stop_reason = f"time budget: {budget.used_s:.0f} of {budget_s:.0f} s used"
                break
            trial = run(config)
            if better(trial, best):
                best, current = trial, dict(trial.config)
        else:
            stop_reason = "every knob tried"
    else:
        raise ValueError(f"method={method!r}: must be one of {list(TUNE_METHODS[1:])}")
    if best is not None and best.score_rps is None:
        best = None
    return SearchResult(method, tuple(trials), best, stop_reason, budget_s, budget.used_s, dict(defaults))
