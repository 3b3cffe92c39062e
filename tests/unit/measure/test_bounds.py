"""A load point's bound decisions as row fields (tasks/measure/bounds.py): the run's bound flat, every counted bound
in `p99_bounds`, at the run's confidence; no bound, no verdict."""

from __future__ import annotations

import json

from tasks.core.confidence import requests_to_hold, row_verdict
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


def test_an_undecided_point_that_could_be_its_stacks_best_is_lengthened_at_half_the_alpha_per_look():
    from dataclasses import replace

    from tasks.loadgen.settings import LoadSettings
    from tasks.measure.bounds import lengthened_settings, planned_looks, should_lengthen

    plain = RunConfig.from_params({"p99_bound_ms": 100, "duration_s": 8})
    longer = RunConfig.from_params({"p99_bound_ms": 100, "duration_s": 8, "max_point_s": 90})
    assert planned_looks(plain) == 1 and planned_looks(longer) == 2
    assert bound_rule(longer).looks == 2
    undecided = {"p99_bound_verdict": "undecided", "throughput_rps": 40.0}
    assert should_lengthen(undecided, best_holding_rps=30.0)
    assert not should_lengthen(undecided, best_holding_rps=50.0)  # slower than a point that holds
    assert not should_lengthen({**undecided, "p99_bound_verdict": "fails"}, best_holding_rps=0.0)
    base = LoadSettings(duration_s=8, window_s=1, stop_when_stable=True)
    settings = lengthened_settings(base, longer)
    assert settings.duration_s == 90 and not settings.stop_when_stable
    # the look lasts as long as 1.25 x the requests that would decide it take at the first look's throughput:
    # 100 requests at 40/s, none slow, want 368 in all (half the alpha): 11.5 s; at 2/s they would take 230 s
    first = _measured(100, ((100.0, 0, 100.0),))
    assert lengthened_settings(base, longer, replace(first, throughput_rps=40.0)).duration_s == 11.5
    assert lengthened_settings(base, longer, replace(first, throughput_rps=2.0)).duration_s == 90
    assert lengthened_settings(base, longer, replace(first, throughput_rps=400.0)).duration_s == 8  # duration_s
    # 320 requests, none slow: holds with one look (299 needed), undecided at half the alpha (368 needed)
    m = _measured(320, ((100.0, 0, 320.0),))
    assert bound_fields(m, plain)["p99_bound_verdict"] == "holds"
    fields = bound_fields(m, longer)
    assert fields["p99_bound_verdict"] == "undecided" and fields["p99_bound_looks"] == 2
    assert fields["p99_bound_more_requests"] == requests_to_hold(99.0, 95.0, looks=2) - 320 == 368 - 320


def test_only_a_stacks_efficient_wires_are_lengthened():
    from tasks.plan.cells import Cell, lengthens

    def cell(server: str, wire: str) -> Cell:
        return Cell("resnet50", "onnx", server, "process", "cpu", 1, "rate-search", 2.0, wire=wire)

    both = RunConfig.from_params({"p99_bound_ms": 100, "max_point_s": 90, "protocols": ["best", "json"]})
    assert lengthens(cell("triton", "binary"), both) and lengthens(cell("triton", "grpc"), both)
    assert not lengthens(cell("triton", "json"), both)  # what JSON costs, not which stack to pick
    json_only = RunConfig.from_params({"p99_bound_ms": 100, "max_point_s": 90, "protocols": ["json"]})
    assert lengthens(cell("triton", "json"), json_only)  # the only wire measured is the stack's answer
    assert not lengthens(cell("triton", "binary"), RunConfig.from_params({"p99_bound_ms": 100}))
