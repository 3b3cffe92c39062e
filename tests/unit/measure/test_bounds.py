"""A load point's bound decisions as row fields (tasks/measure/bounds.py): the run's bound flat, every counted bound
in `p99_bounds`, at the run's confidence; no bound, no verdict."""

from __future__ import annotations

import json

from tasks.core.confidence import row_verdict
from tasks.loadgen.measurement import Measurement
from tasks.measure.bounds import ROW_FIELDS, bound_fields, bound_rule, run_bounds
from tasks.plan.config import RunConfig


def _measured(samples: int, counts: tuple) -> Measurement:
    return Measurement(1, samples, 0, 0.0, {}, 0, 0, 10.0, 10.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, "sent", 3,
                       (10.0,) * 3, True, False, 0.0, 0, 0, 0.0, 10.0, 5.0, False, 1, "", latency_samples=samples,
                       bound_counts=counts)


def test_the_runs_bound_is_decided_at_its_confidence_and_every_counted_bound_is_published():
    config = RunConfig.from_params({"p99_bound_ms": 100, "confidence_pct": 99})
    assert run_bounds(config) == (10.0, 50.0, 100.0, 200.0)
    m = _measured(400, ((10.0, 40, 400.0), (50.0, 2, 400.0), (100.0, 0, 400.0), (200.0, 0, 400.0)))
    fields = bound_fields(m, config)
    assert set(fields) == set(ROW_FIELDS)
    # 400 requests, none slower than 100 ms: 299 would hold it at 95 %, 459 are needed at 99 %
    assert fields["p99_bound_verdict"] == "undecided" and fields["p99_bound_more_requests"] == 59
    assert fields["p99_bound_ms"] == 100.0 and fields["p99_bound_confidence_pct"] == 99
    decisions = json.loads(fields["p99_bounds"])
    assert {b: d["verdict"] for b, d in decisions.items()} == {"10": "fails", "50": "undecided", "100": "undecided",
                                                               "200": "undecided"}
    assert row_verdict(fields, 10.0) == "fails" and row_verdict(fields, 1000.0) is None
    at_95 = bound_fields(m, RunConfig.from_params({"p99_bound_ms": 100}))
    assert at_95["p99_bound_verdict"] == "holds" and at_95["p99_bound_more_requests"] is None


def test_without_a_bound_only_the_judged_bounds_are_decided():
    config = RunConfig.from_params({})
    assert bound_rule(config) is None
    fields = bound_fields(_measured(1000, ((10.0, 0, 1000.0),)), config)
    assert fields["p99_bound_verdict"] is None and json.loads(fields["p99_bounds"])["10"]["verdict"] == "holds"
