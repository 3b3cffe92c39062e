"""A load point's bound decisions as row fields: "p99 within the bound" at the run's bound and at every bound the
report ranks on, each decided by `tasks.core.confidence.decide_counts` (docs/measuring.md#confidence)."""

from __future__ import annotations

import json

from tasks.core.confidence import BoundDecision, BoundRule, judged_bounds
from tasks.loadgen.measurement import Measurement
from tasks.plan.config import RunConfig

ROW_FIELDS = ("p99_bound_ms", "p99_bound_verdict", "p99_bound_exceed", "p99_bound_rate_high_pct",
              "p99_bound_more_requests", "p99_bound_confidence_pct", "p99_bounds")


def run_bounds(config: RunConfig) -> tuple[float, ...]:
    """The bounds a point's requests are counted against: the report's and the run's own."""
    return judged_bounds(config.p99_bound_ms)


def bound_rule(config: RunConfig, looks: int = 1) -> BoundRule | None:
    """The run's own bound as a rule the sweeps and the tuner decide with (None: the run has no bound)."""
    if config.p99_bound_ms is None:
        return None
    return BoundRule(float(config.p99_bound_ms), config.confidence_pct, looks)


def bound_fields(measurement: Measurement, config: RunConfig, looks: int = 1) -> dict:
    """The row's decision columns (ROW_FIELDS): its own bound's flat, every counted bound's in `p99_bounds`."""
    decisions = {bound: BoundRule(bound, config.confidence_pct, looks).decide(measurement)
                 for bound, _, _ in measurement.bound_counts}
    fields: dict = dict.fromkeys(ROW_FIELDS)
    fields["p99_bounds"] = json.dumps({f"{b:g}": _summary(d) for b, d in sorted(decisions.items())}, sort_keys=True)
    own = bound_rule(config, looks)
    decision = own.decide(measurement) if own is not None else None
    if decision is not None:
        fields.update(p99_bound_ms=decision.bound_ms, p99_bound_verdict=decision.verdict,
                      p99_bound_exceed=decision.exceed, p99_bound_rate_high_pct=decision.rate_high * 100,
                      p99_bound_more_requests=decision.more_requests,
                      p99_bound_confidence_pct=decision.confidence_pct)
    return fields


def _summary(decision: BoundDecision) -> dict:
    return {"verdict": decision.verdict, "exceed": decision.exceed, "effective": round(decision.effective, 1),
            "more_requests": decision.more_requests}
