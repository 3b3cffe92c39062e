"""A load point's bound decisions as row fields: "p99 within the bound" at the run's bound and at every bound the
report ranks on, each decided by `tasks.core.confidence.decide_counts` (docs/measuring.md#confidence); and when a
point is worth a longer look (`max_point_s`): a point is measured for `duration_s`, and one whose decision at the
run's bound is still undecided and that could be its stack's best within it is measured again for `max_point_s`
(fresh requests, not the first look's pooled: each look is a test of its own at half the alpha)."""

from __future__ import annotations

import json
from dataclasses import replace

from tasks.core.confidence import BoundDecision, BoundRule, judged_bounds
from tasks.loadgen.measurement import Measurement
from tasks.loadgen.settings import LoadSettings
from tasks.plan.config import RunConfig

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


def should_lengthen(row: dict, config: RunConfig, best_holding_rps: float) -> bool:
    """Whether a measured point is worth its lengthened look: the run lengthens points (`max_point_s`), its first
    look left the run's bound undecided, and it is faster than every point of its server life where the bound
    holds, so it could be its stack's best within the bound (a slower one could not change an answer)."""
    return (config.max_point_s is not None and row.get("p99_bound_verdict") == "undecided"
            and (row.get("throughput_rps") or 0.0) > best_holding_rps)


def lengthened_settings(settings: LoadSettings, config: RunConfig) -> LoadSettings:
    """The point's settings for its lengthened look: `max_point_s` of measured time, nothing else changed."""
    return replace(settings, duration_s=float(config.max_point_s), stop_when_stable=False)


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
