"""Sweeps over load points: which load to run next. Each point is one `run_point(settings) -> Measurement`.

Stop rules, written down:
- closed-loop concurrency sweep: the given list, or doubling from `start` up to `max_concurrency`; it stops
  after the first point where "p99 within the bound" `fails` (`bound`, when given: a decision, not a comparison,
  tasks/core/confidence.py) or whose throughput rose by less than `min_gain_pct` over the best point so far; a
  point whose decision is `undecided` does not stop it.
- open-loop rate sweep (MLPerf Server style): find the highest rate where "p99 (from the scheduled send time)
  within the bound" `holds`, with no more than `max_error_rate` errors. It steers on each point's first look: a
  point passes where the bound holds, or is undecided with no more than 1 % of its requests slower (the p99's
  point estimate within the bound: a short point cannot hold, 299 requests are needed). Double from `start_rps`
  until a point does not pass, then bisect between the last passing and the first other rate until they are within
  `resolution_pct` of each other, in at most `max_points` points overall. Only a rate whose bound `holds` is
  claimed (`best_load`). Where the highest passing rate is undecided, the claim is looked for STEP_DOWN below it:
  a point there (beyond `max_points`) and, where it passes undecided, its longer look (`confirm`); where that does
  not hold, one more step down, at most MAX_CONFIRMS looks. A short first look at the capacity's edge cannot show
  a queue that builds over minutes, so a longer look there mostly fails (five of six on the night in
  docs/measuring.md#confidence): stepping down first spends one look a wire where that spent two, and the claim is
  at most STEP_DOWN below a rate that would have held.
- a concurrency sweep's fastest point that does not fail gets a longer look too where it is undecided and faster
  than every point that holds (`confirm`: the answer "fastest within the bound" hinges on it).
`LongerLook.confirm(load, first) -> Measurement | None` measures a point again for longer (None: that look did not
count); `LongerLook.held_rps()` is the fastest throughput already holding outside the sweep (its server life's other
points): a look that could not beat it changes no answer, so neither sweep takes it. A
sweep records every point it ran, a longer look after its first; a point's pass/fail here only steers the sweep, and
the points are still judged by `validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tasks.core.confidence import BoundDecision, BoundRule
from tasks.core.errors import ConfigError
from tasks.loadgen.measurement import Measurement
from tasks.loadgen.settings import MAX_CONCURRENCY, LoadSettings

DEFAULT_MIN_GAIN_PCT = 5.0
DEFAULT_MAX_POINTS = 12
MAX_CONFIRMS = 2  # a rate search's longer looks: STEP_DOWN below its highest passing rate, once more if that fails
STEP_DOWN = 0.9  # a longer look's rate as a share of the rate above it: a bisection's last rates lie within a few %
# of each other, all as near the capacity (tried here: 11.5 and 11 req/s failed on their longer looks, 10 held)
Confirm = Callable[[float, Measurement], "Measurement | None"]


def _nothing_held() -> float:
    return 0.0


@dataclass(frozen=True)
class LongerLook:
    """How a sweep takes its longer looks: `confirm` measures a point again for longer, `held_rps` says how fast a
    point outside the sweep already holds (no look below it)."""
    confirm: Confirm
    held_rps: Callable[[], float] = _nothing_held


@dataclass(frozen=True)
class SweepResult:
    points: tuple[tuple[float, Measurement], ...]  # (load, measurement) in the order they ran
    best_load: float | None  # highest concurrency before the stop, or highest passing rate
    stop_reason: str


def concurrency_sweep(run_point: Callable[[LoadSettings], Measurement], base: LoadSettings, *,
                      concurrencies: Sequence[int] | None = None, start: int = 1,
                      max_concurrency: int = 256, bound: BoundRule | None = None,
                      min_gain_pct: float = DEFAULT_MIN_GAIN_PCT, longer: LongerLook | None = None) -> SweepResult:
    if concurrencies is not None and (not concurrencies or any(not 1 <= c <= MAX_CONCURRENCY for c in concurrencies)):
        raise ConfigError("concurrencies", list(concurrencies), f"each must be from 1 to {MAX_CONCURRENCY}")
    if not 1 <= start <= max_concurrency <= MAX_CONCURRENCY:
        raise ConfigError("max_concurrency", max_concurrency, f"must be >= start ({start}) and <= {MAX_CONCURRENCY}")
    plan = list(concurrencies) if concurrencies is not None else doubling(start, max_concurrency)
    points: list[tuple[float, Measurement]] = []
    best_rps, best_load = 0.0, None
    reason = "plan exhausted"
    for c in plan:
        m = run_point(replace(base, mode="concurrency", load=c))
        points.append((c, m))
        decision = bound.decide(m) if bound is not None else None
        if decision is not None and decision.verdict == "fails":
            reason = (f"p99 above {bound.bound_ms:g} ms at concurrency {c} "
                      f"({decision.exceed} of {decision.count} requests slower)")
            break
        if concurrencies is None and best_load is not None and m.throughput_rps < best_rps * (1 + min_gain_pct / 100):
            reason = f"throughput rose < {min_gain_pct}% at concurrency {c}"
            break
        if m.throughput_rps > best_rps:
            best_rps, best_load = m.throughput_rps, c
    if longer is not None and bound is not None:
        reason += _confirm_fastest(points, bound, longer.confirm, longer.held_rps())
    return SweepResult(tuple(points), best_load, reason)


def _confirm_fastest(points: list[tuple[float, Measurement]], bound: BoundRule, confirm: Confirm, held: float) -> str:
    """The concurrency sweep's longer look: its fastest point that does not fail, where undecided and faster than
    every point that holds, its own and `held` ("" where none is worth it, else what the look found, for the stop
    reason)."""
    verdicts = [(load, m, _verdict(bound.decide(m))) for load, m in points]
    own = max((m.throughput_rps for _, m, v in verdicts if v == "holds"), default=0.0)
    open_ = [(load, m) for load, m, v in verdicts if v == "undecided" and m.throughput_rps > max(own, held)]
    if not open_:
        if any(v == "undecided" and own < m.throughput_rps <= held for _, m, v in verdicts):
            return (f"; no longer look: a point of its server life holds at {held:.4g} req/s, no answer hinges on a "
                    "slower one")
        return ""
    load, first = max(open_, key=lambda p: p[1].throughput_rps)
    longer = confirm(load, first)
    if longer is None:
        return f"; the longer look at concurrency {load:g} did not count"
    points.append((load, longer))
    return f"; concurrency {load:g} looked at longer: {_verdict(bound.decide(longer))}"


def _verdict(decision: BoundDecision | None) -> str | None:
    return decision.verdict if decision is not None else None


def doubling(start: int, limit: int) -> list[int]:
    out, c = [], start
    while c <= limit:
        out.append(c)
        c *= 2
    return out


@dataclass(frozen=True)
class SearchLimits:
    """How far a rate search goes: until its bracket is within `resolution_pct`, in at most `max_points` points;
    `unit` names what it searches in its stop reason (a trace's search is over the replay's speed, which
    `run_point` gets as `load`)."""
    resolution_pct: float = 5.0
    max_points: int = DEFAULT_MAX_POINTS
    unit: str = "req/s"


def rate_sweep(run_point: Callable[[LoadSettings], Measurement], base: LoadSettings, *, start_rps: float,
               bound: BoundRule, max_error_rate: float = 0.0, limits: SearchLimits = SearchLimits(),
               longer: LongerLook | None = None) -> SweepResult:
    """The rate search of the module's docstring, within `limits`."""
    resolution_pct, max_points, unit = limits.resolution_pct, limits.max_points, limits.unit
    if not start_rps > 0:
        raise ConfigError("start_rps", start_rps, "must be > 0 requests/s")
    if not 2 <= max_points <= 100:
        raise ConfigError("max_points", max_points, "must be from 2 to 100")
    points: list[tuple[float, Measurement]] = []

    def measure(rate: float) -> Measurement:
        m = run_point(replace(base, mode="rate", load=rate))
        points.append((rate, m))
        return m

    def passes(rate: float) -> bool:
        return _rate_verdict(measure(rate), bound, max_error_rate) in ("holds", "maybe")

    good, bad, rate = None, None, start_rps
    while len(points) < max_points:
        if passes(rate):
            good, rate = rate, rate * 2
        else:
            bad = rate
            break
    if bad is None:
        reason = "max_points reached while doubling"
    else:
        low = good if good is not None else 0.0
        while len(points) < max_points and (bad - low) > bad * resolution_pct / 100:
            mid = (low + bad) / 2
            if passes(mid):
                low = mid
            else:
                bad = mid
        reason = "resolution reached" if (bad - low) <= bad * resolution_pct / 100 else "max_points reached"
    best, note = _claimed_rate(points, bound, max_error_rate, longer and (longer.confirm, measure, longer.held_rps()),
                               unit)
    return SweepResult(tuple(points), best, reason + note)


def _rate_verdict(m: Measurement, bound: BoundRule, max_error_rate: float) -> str:
    """A rate point as the search steers on it: `holds`, `maybe` (undecided, its p99's point estimate within the
    bound), or `no` (fails, undecided beyond it, errors above `max_error_rate`, a saturated generator)."""
    decision = bound.decide(m)
    if m.requests <= 0 or decision is None or m.error_rate > max_error_rate or m.generator_saturated:
        return "no"
    if decision.verdict == "undecided" and decision.exceed <= decision.count * (1 - bound.q / 100):
        return "maybe"
    return "holds" if decision.verdict == "holds" else "no"


def _claimed_rate(points: list[tuple[float, Measurement]], bound: BoundRule, max_error_rate: float,
                  looking: tuple[Confirm, Callable[[float], Measurement], float] | None,
                  unit: str = "req/s") -> tuple[float | None, str]:
    """The highest rate whose bound holds, after the longer looks STEP_DOWN below the highest passing rate where
    that is undecided (`looking`: the look, the point's first look, appended to `points`, and the throughput held
    outside the sweep, below which no look is taken), and what the stop reason adds."""
    steered = [(rate, m, _rate_verdict(m, bound, max_error_rate)) for rate, m in points]
    best = max((rate for rate, _, v in steered if v == "holds"), default=None)
    passing = max((rate for rate, _, v in steered if v == "maybe"), default=0.0)
    looked: list[str] = []
    rate, note = passing, ""
    while looking is not None and passing > (best or 0.0) and len(looked) < MAX_CONFIRMS:
        confirm, measure, held = looking
        rate *= STEP_DOWN
        if rate <= (best or 0.0):
            break
        if rate <= held:
            note = (f"; no longer look at {rate:g} req/s: a point of its server life holds at {held:.4g} req/s, "
                    "no answer hinges on a slower one")
            break
        first = measure(rate)
        steer = _rate_verdict(first, bound, max_error_rate)
        if steer != "maybe":  # decided on a first look of its own, or beyond the bound: no longer look
            looked.append(f"{rate:g} req/s {'holds' if steer == 'holds' else 'did not pass'} on its first look")
            if steer == "holds":
                best = rate
                break
            continue
        longer = confirm(rate, first)
        if longer is None:
            looked.append(f"{rate:g} req/s did not count")
            continue
        points.append((rate, longer))
        looked.append(f"{rate:g} req/s {_verdict(bound.decide(longer))}")
        if _rate_verdict(longer, bound, max_error_rate) == "holds":
            best = rate
            break
    if looked:
        note = f"; looked at longer, {STEP_DOWN:g} x below {passing:g} req/s: {', '.join(looked)}" + note
    if best is None and passing:
        note += (f"; no {'rate' if unit == 'req/s' else 'speed'} decided within {bound.bound_ms:g} ms (the highest "
                 f"passing on its point estimate, {passing:g} {unit}, undecided)")
    return best, note
