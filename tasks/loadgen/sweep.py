"""Sweeps over load points: which load to run next. Each point is one `run_point(settings) -> Measurement`.

Stop rules, written down:
- closed-loop concurrency sweep: the given list, or doubling from `start` up to `max_concurrency`; it stops
  after the first point where "p99 within the bound" `fails` (`bound`, when given: a decision, not a comparison,
  tasks/core/confidence.py) or whose throughput rose by less than `min_gain_pct` over the best point so far; a
  point whose decision is `undecided` does not stop it.
- open-loop rate sweep (MLPerf Server style): find the highest rate where "p99 (from the scheduled send time)
  within the bound" `holds`, with no more than `max_error_rate` errors. Double from `start_rps` until a point does
  not pass (it fails, or stays undecided: a rate is only claimed where the claim is supported), then bisect
  between the last passing and the first other rate until they are within `resolution_pct` of each other, in at
  most `max_points` points overall.
A sweep records every point it ran; a point's pass/fail here only steers the sweep, and the points are
still judged by `validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tasks.core.confidence import BoundRule
from tasks.core.errors import ConfigError
from tasks.loadgen.measurement import Measurement
from tasks.loadgen.settings import MAX_CONCURRENCY, LoadSettings

DEFAULT_MIN_GAIN_PCT = 5.0
DEFAULT_MAX_POINTS = 12


@dataclass(frozen=True)
class SweepResult:
    points: tuple[tuple[float, Measurement], ...]  # (load, measurement) in the order they ran
    best_load: float | None  # highest concurrency before the stop, or highest passing rate
    stop_reason: str


def concurrency_sweep(run_point: Callable[[LoadSettings], Measurement], base: LoadSettings, *,
                      concurrencies: Sequence[int] | None = None, start: int = 1,
                      max_concurrency: int = 256, bound: BoundRule | None = None,
                      min_gain_pct: float = DEFAULT_MIN_GAIN_PCT) -> SweepResult:
    if concurrencies is not None and (not concurrencies or any(not 1 <= c <= MAX_CONCURRENCY for c in concurrencies)):
        raise ConfigError("concurrencies", list(concurrencies), f"each must be from 1 to {MAX_CONCURRENCY}")
    if not 1 <= start <= max_concurrency <= MAX_CONCURRENCY:
        raise ConfigError("max_concurrency", max_concurrency, f"must be >= start ({start}) and <= {MAX_CONCURRENCY}")
    plan = list(concurrencies) if concurrencies is not None else doubling(start, max_concurrency)
    points: list[tuple[float, Measurement]] = []
    best_rps, best_load = 0.0, None
    for c in plan:
        m = run_point(replace(base, mode="concurrency", load=c))
        points.append((c, m))
        decision = bound.decide(m) if bound is not None else None
        if decision is not None and decision.verdict == "fails":
            return SweepResult(tuple(points), best_load, f"p99 above {bound.bound_ms:g} ms at concurrency {c} "
                                                         f"({decision.exceed} of {decision.count} requests slower)")
        if concurrencies is None and best_load is not None and m.throughput_rps < best_rps * (1 + min_gain_pct / 100):
            return SweepResult(tuple(points), best_load, f"throughput rose < {min_gain_pct}% at concurrency {c}")
        if m.throughput_rps > best_rps:
            best_rps, best_load = m.throughput_rps, c
    return SweepResult(tuple(points), best_load, "plan exhausted")


def doubling(start: int, limit: int) -> list[int]:
    out, c = [], start
    while c <= limit:
        out.append(c)
        c *= 2
    return out


def rate_sweep(run_point: Callable[[LoadSettings], Measurement], base: LoadSettings, *, start_rps: float,
               bound: BoundRule, max_rps: float = 1e6, max_error_rate: float = 0.0,
               resolution_pct: float = 5.0, max_points: int = DEFAULT_MAX_POINTS) -> SweepResult:
    if not start_rps > 0:
        raise ConfigError("start_rps", start_rps, "must be > 0 requests/s")
    if not 2 <= max_points <= 100:
        raise ConfigError("max_points", max_points, "must be from 2 to 100")
    points: list[tuple[float, Measurement]] = []

    def passes(rate: float) -> bool:
        m = run_point(replace(base, mode="rate", load=rate))
        points.append((rate, m))
        decision = bound.decide(m)
        return (m.requests > 0 and decision is not None and decision.verdict == "holds"
                and m.error_rate <= max_error_rate and not m.generator_saturated)

    good, bad, rate = None, None, start_rps
    while len(points) < max_points and rate <= max_rps:
        if passes(rate):
            good, rate = rate, rate * 2
        else:
            bad = rate
            break
    if bad is None:
        reason = "max_rps reached" if rate > max_rps else "max_points reached while doubling"
        return SweepResult(tuple(points), good, reason)
    low = good if good is not None else 0.0
    while len(points) < max_points and (bad - low) > bad * resolution_pct / 100:
        mid = (low + bad) / 2
        if passes(mid):
            low, good = mid, mid
        else:
            bad = mid
    reason = "resolution reached" if (bad - low) <= bad * resolution_pct / 100 else "max_points reached"
    return SweepResult(tuple(points), good, reason)
