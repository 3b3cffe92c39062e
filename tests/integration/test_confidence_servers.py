"""A bound decided against a server whose latency mixture is known (tests/fake_server.py: every K-th request slow):
as the point grows the decision goes from `undecided` to the truth, and a p99.9 of too few requests is published as
a lower bound (docs/measuring.md#confidence).

The stand-in server is used because no real stack can be told to be slow on a known share of requests; every other
load test runs against the real ones."""

from __future__ import annotations

import pytest

from tasks.core.confidence import BoundRule
from tasks.loadgen.coordinator import run_load_point
from tasks.loadgen.settings import LoadSettings
from tests.fake_server import fake_server

pytestmark = pytest.mark.integration
BOUND_MS = 50.0
RATE = 200.0  # requests/s, open loop: the point's length sets its request count


def _point(endpoint, spec, workdir, duration_s: float):
    settings = LoadSettings(mode="rate", load=RATE, duration_s=duration_s, warmup_s=0.3, window_s=duration_s / 2,
                            max_connections=64, bounds_ms=(BOUND_MS,))
    measurement, _ = run_load_point(endpoint, spec, settings, workdir)
    return measurement, BoundRule(BOUND_MS).decide(measurement)


def test_no_slow_request_holds_once_the_point_holds_enough_requests(mlp_spec, tmp_path):
    with fake_server() as endpoint:
        short, short_decision = _point(endpoint, mlp_spec, tmp_path / "short", 0.4)
        long, long_decision = _point(endpoint, mlp_spec, tmp_path / "long", 5.0)
    # ~80 requests: none slow, but 299 are needed before "p99 within 50 ms" holds at 95 %
    assert short.latency_samples < 299 and short_decision.verdict == "undecided"
    if short_decision.exceed == 0:  # (a hiccup of this VM may make one slow: then more are needed)
        assert short_decision.more_requests == 299 - short.latency_samples
    assert short.latency_ms_p999 is None and short.latency_ms_p999_at_least == short.latency_ms_max
    # ~1,000 requests, the server answers at once: a hiccup of this VM may make one or two slower than 50 ms
    assert long.latency_samples >= 900 and long_decision.verdict == "holds", long_decision
    assert long.latency_ms_p99 is not None and long.latency_ms_p99_ci_low <= long.latency_ms_p99


def test_one_slow_request_in_twenty_fails_once_the_point_holds_enough_requests(mlp_spec, tmp_path):
    with fake_server("--slow-every", "20", "--slow-ms", "80") as endpoint:
        short, short_decision = _point(endpoint, mlp_spec, tmp_path / "short", 0.15)
        long, long_decision = _point(endpoint, mlp_spec, tmp_path / "long", 5.0)
    # ~30 requests, one or two of them slow: 5 % is not yet told apart from 1 %
    assert short.latency_samples < 60 and short_decision.verdict == "undecided", short_decision
    # ~1,000 requests, 5 % of them slower than the bound: p99 is not within it
    assert long_decision.verdict == "fails" and long_decision.exceed >= 0.04 * long.latency_samples, long_decision
    assert long.latency_ms_p99 > BOUND_MS
