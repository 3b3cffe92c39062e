"""A load point's bound decisions as row fields: "p99 within the bound" at the run's bound and at every bound the
report ranks on, each decided by `tasks.core.confidence.decide_counts` (docs/measuring.md#confidence); and which
points are worth a longer look (`max_point_s`). A point is measured for `duration_s`; the points an answer hinges on
and whose decision at the run's bound is still undecided are measured again, with fresh requests (not the first
look's pooled: each look is a test of its own at half the alpha), for as long as the requests that would decide it
take at the first look's throughput, at most `max_point_s`. Only the points on a stack's efficient wires hinge (its
REST JSON cells say what JSON costs, not which stack to pick): a sweep's best candidate (tasks/loadgen/sweep.py
chooses: the rate search's highest passing rates, the concurrency sweep's fastest point), and a single point that is
faster than every point of its server life where the bound holds."""

from __future__ import annotations

import json
from dataclasses import replace

from tasks.core.confidence import BoundDecision, BoundRule, judged_bounds
from tasks.loadgen.measurement import Measurement
from tasks.loadgen.settings import LoadSettings
from tasks.plan.config import RunConfig

NEEDED_MARGIN = 1.25  # a longer look runs this much beyond the requests that would decide it at the first look's rate
ROW_FIELDS = ("p99_bound_ms", "p99_bound_verdict", "p99_bound_exceed", "p99_bound_rate_high_pct",
              "p99_bound_more_requests", "p99_bound_confidence_pct", "p99_bound_looks", "p99_bounds")


def run_bounds(config: RunConfig) -> tuple[float, ...]:
    """The bounds a point's requests are counted against: the report's and the run's own."""
    return judged_bounds(config.p99_bound_ms)


def planned_looks(config: RunConfig) -> int:
    """A point's planned looks at its bound: its first, and with `max_point_s` its lengthened one (the confidence
    is split evenly over them, so stopping at the first decided one keeps the error rate within alpha)."""
    return 1 if config.max_point_s is None else 2


def bound_rule(config: RunConfig) -> BoundRule | None:
    """The run's own bound as a rule the sweeps and the tuner decide with (None: the run has no bound)."""
    if config.p99_bound_ms is None:
        return None
    return BoundRule(float(config.p99_bound_ms), config.confidence_pct, planned_looks(config))


def should_lengthen(row: dict, best_holding_rps: float) -> bool:
    """Whether a single measured point of a lengthening cell is worth its longer look: its first look left the run's
    bound undecided, and it is faster than every point of its server life where the bound holds, so it could be its
    stack's best within the bound (a slower one could not change an answer)."""
    return row.get("p99_bound_verdict") == "undecided" and (row.get("throughput_rps") or 0.0) > best_holding_rps


def lengthened_settings(settings: LoadSettings, config: RunConfig, first: Measurement | None = None) -> LoadSettings:
    """The point's settings for its longer look: measured for NEEDED_MARGIN × the requests that would decide the
    run's bound at the first look's throughput and share of slow requests (at least `duration_s`), at most
    `max_point_s`; nothing else changed."""
    duration = float(config.max_point_s)
    rule = bound_rule(config)
    decision = rule.decide(first) if rule is not None and first is not None else None
    if decision is not None and decision.more_requests is not None and first.throughput_rps > 0:
        needed_s = NEEDED_MARGIN * (decision.count + decision.more_requests) / first.throughput_rps
        duration = min(duration, max(settings.duration_s, needed_s))
    return replace(settings, duration_s=round(duration, 1), stop_when_stable=False)


def bound_fields(measurement: Measurement, config: RunConfig) -> dict:
    """The row's decision columns (ROW_FIELDS): its own bound's flat, every counted bound's in `p99_bounds`."""
    looks = planned_looks(config)
    decisions = {bound: BoundRule(bound, config.confidence_pct, looks).decide(measurement)
                 for bound, _, _ in measurement.bound_counts}
    fields: dict = dict.fromkeys(ROW_FIELDS)
    fields["p99_bounds"] = json.dumps({f"{b:g}": _summary(d) for b, d in sorted(decisions.items())}, sort_keys=True)
    own = bound_rule(config)
    decision = own.decide(measurement) if own is not None else None
    if decision is not None:
        fields.update(p99_bound_ms=decision.bound_ms, p99_bound_verdict=decision.verdict,
                      p99_bound_exceed=decision.exceed, p99_bound_rate_high_pct=decision.rate_high * 100,
                      p99_bound_more_requests=decision.more_requests,
                      p99_bound_confidence_pct=decision.confidence_pct, p99_bound_looks=decision.looks)
    return fields


def _summary(decision: BoundDecision) -> dict:
    return {"verdict": decision.verdict, "exceed": decision.exceed, "effective": round(decision.effective, 1),
            "rate_pct": [round(100 * decision.rate_low, 4), round(100 * decision.rate_high, 4)],
            "more_requests": decision.more_requests}
