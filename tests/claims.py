"""Report rows with their claims decided, for tests that build rows by hand (schema 1.8: tasks/core/confidence.py).

A hand-built row states its p99; the decision columns are taken with the real rule on the count a stream with that
p99 would give: `samples` requests, none slower than a bound above the p99, a twentieth of them slower than a
bound below it (5 %: clearly beyond 1 %)."""

from __future__ import annotations

import json

from tasks.core.confidence import decide_counts, judged_bounds

SAMPLES = 1000


def decided_claims(p99_ms: float, samples: int = SAMPLES, bounds: tuple[float, ...] = ()) -> dict:
    """`latency_samples` and `p99_bounds` of a row whose p99 is `p99_ms`, at every judged bound, a run's 1,000 ms
    and `bounds`."""
    decisions = {}
    for bound in sorted({*judged_bounds(1000.0), *bounds}):
        exceed = 0 if p99_ms <= bound else samples // 20
        d = decide_counts(samples, float(samples), exceed, bound)
        decisions[f"{bound:g}"] = {"verdict": d.verdict, "exceed": d.exceed, "effective": float(samples),
                                   "more_requests": d.more_requests}
    return {"latency_samples": samples, "p99_bounds": json.dumps(decisions, sort_keys=True)}
