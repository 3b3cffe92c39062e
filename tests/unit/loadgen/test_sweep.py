"""Sweeps (tasks/loadgen/sweep.py): concurrency and rate sweeps follow their stop rules, on a stand-in point; a
bound is a decision (tasks/core/confidence.py): an undecided point neither stops a sweep nor is claimed as a rate,
and the points an answer hinges on get their longer look."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tasks.core.confidence import BoundRule
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.sweep import LongerLook, SearchLimits, concurrency_sweep, rate_sweep


def _fake_point(capacity_rps: float, base_ms: float = 1.0, samples: int = 1000):
    """A server model for sweep logic: throughput saturates at capacity, p99 explodes near it; of `samples`
    requests none is slower than a bound above the p99 and a twentieth are slower than one below it."""
    from tasks.loadgen.measurement import Measurement

    def run(settings: LoadSettings) -> Measurement:
        offered = settings.load * 1000 / base_ms if settings.mode == "concurrency" else settings.load
        rps = min(offered, capacity_rps)
        p99 = base_ms / max(1e-3, 1 - rps / capacity_rps) if settings.mode == "rate" else base_ms * settings.load
        counts = tuple((b, 0 if p99 <= b else samples // 20, float(samples)) for b in settings.bounds_ms)
        return Measurement(1, samples, 0, 0.0, {}, 0, 0, rps, rps, p99, p99, p99, p99, p99, p99, p99, "sent", 3,
                           (rps,) * 3, True, False, 0.0, 0, 0, 0.0, 10.0, 5.0, False, 1, "",
                           latency_samples=samples, bound_counts=counts)
    return run


def test_sweeps_follow_their_stop_rules():
    base = LoadSettings(duration_s=1, window_s=1, bounds_ms=(3.0, 10.0))
    closed = concurrency_sweep(_fake_point(8000), base, max_concurrency=64)
    assert [c for c, _ in closed.points] == [1, 2, 4, 8, 16] and closed.best_load == 8
    bounded = concurrency_sweep(_fake_point(8000), base, concurrencies=[1, 2, 4, 8], bound=BoundRule(3.0))
    assert [c for c, _ in bounded.points] == [1, 2, 4] and bounded.best_load == 2
    assert bounded.stop_reason == "p99 above 3 ms at concurrency 4 (50 of 1000 requests slower)"
    rate = rate_sweep(_fake_point(1000), replace(base, mode="rate", load=1), start_rps=100, bound=BoundRule(10.0),
                      limits=SearchLimits(2, 20))
    assert 880 <= rate.best_load <= 900  # p99 <= 10 ms  <=>  rate <= 900
    assert all(m.latency_ms_p99 <= 10 for r, m in rate.points if r <= rate.best_load)


def test_an_undecided_point_neither_stops_a_sweep_nor_is_claimed_as_a_rate():
    base = LoadSettings(duration_s=1, window_s=1, bounds_ms=(3.0, 10.0))
    # 30 requests, none slow: "within the bound" is undecided (299 would hold it), and 2 of 30 slow is too
    few = concurrency_sweep(_fake_point(8000, samples=30), base, concurrencies=[1, 2, 4, 8], bound=BoundRule(3.0))
    assert [c for c, _ in few.points] == [1, 2, 4, 8]
    # the rate search steers on the point estimate (none of 30 slower: go higher) but claims no rate undecided
    rate = rate_sweep(_fake_point(1000, samples=30), replace(base, mode="rate", load=1), start_rps=100,
                      bound=BoundRule(10.0), limits=SearchLimits(max_points=5))
    assert [r for r, _ in rate.points] == [100, 200, 400, 800, 1600] and rate.best_load is None
    assert "no rate decided within 10 ms (the highest passing on its point estimate, 800 req/s, undecided)" \
        in rate.stop_reason


def test_the_points_an_answer_hinges_on_are_looked_at_longer():
    base = LoadSettings(duration_s=1, window_s=1, bounds_ms=(3.0, 10.0))
    looked = []

    def confirm(mode: str, capacity_rps: float, samples: int):
        def look(load: float, _first):
            looked.append(load)
            return _fake_point(capacity_rps, samples=samples)(replace(base, mode=mode, load=load))
        return look

    rate_base = replace(base, mode="rate", load=1)
    rate = rate_sweep(_fake_point(1000, samples=30), rate_base, start_rps=100, bound=BoundRule(10.0, looks=2),
                      limits=SearchLimits(2, 20), longer=LongerLook(confirm("rate", 1000, 1000)))
    # the claim is looked for 10 % below the highest passing rate (887.5): a short point there, then its longer
    # look (1000 requests, none slow) holds, and that rate is the claim; the search's own points stay within 20
    highest = max(r for r, m in rate.points[:-2] if m.latency_ms_p99 <= 10)
    assert looked == [rate.best_load] and rate.best_load == 0.9 * highest and 880 <= highest <= 900
    assert [r for r, _ in rate.points[-2:]] == [rate.best_load] * 2 and len(rate.points) <= 22
    assert [m.latency_samples for _, m in rate.points[-2:]] == [30, 1000]
    assert rate.stop_reason.endswith(f"looked at longer, 0.9 x below {highest:g} req/s: {rate.best_load:g} req/s holds")
    looked.clear()
    # longer looks that stay undecided (200 requests): two, each a step lower, and no rate is claimed
    undecided = rate_sweep(_fake_point(1000, samples=30), rate_base, start_rps=100, bound=BoundRule(10.0, looks=2),
                           limits=SearchLimits(2, 20), longer=LongerLook(confirm("rate", 1000, 200)))
    assert looked == pytest.approx([0.9 * highest, 0.81 * highest]) and undecided.best_load is None
    assert "no rate decided within 10 ms" in undecided.stop_reason
    looked.clear()
    # a longer look shows a lower capacity than the short points did (850 req/s: p99 within 10 ms up to 765): the
    # look 10 % below the highest passing rate (798.75) fails, the one a step further down (718.9) holds
    stepped = rate_sweep(_fake_point(1000, samples=30), rate_base, start_rps=100, bound=BoundRule(10.0, looks=2),
                         limits=SearchLimits(2, 20), longer=LongerLook(confirm("rate", 850, 1000)))
    assert looked == pytest.approx([0.9 * highest, 0.81 * highest]) and stepped.best_load == looked[1]
    assert "798.75 req/s fails, 718.875 req/s holds" in stepped.stop_reason
    looked.clear()
    # a point that holds on its first look at or above the step's rate is the claim: no longer look
    held = rate_sweep(_fake_point(1000, samples=1000), rate_base, start_rps=100, bound=BoundRule(10.0, looks=2),
                      limits=SearchLimits(2, 20), longer=LongerLook(confirm("rate", 1000, 1000)))
    assert looked == [] and 880 <= held.best_load <= 900
    closed = concurrency_sweep(_fake_point(8000, samples=30), base, concurrencies=[1, 2, 4],
                               bound=BoundRule(3.0, looks=2), longer=LongerLook(confirm("concurrency", 8000, 1000)))
    # the fastest point that did not fail (concurrency 4, 1 of 30 slow: undecided) fails on its longer look
    assert looked == [4] and closed.stop_reason == "plan exhausted; concurrency 4 looked at longer: fails"


def test_no_longer_look_where_a_point_of_the_server_life_already_holds_as_fast():
    base = LoadSettings(duration_s=1, window_s=1, bounds_ms=(3.0, 10.0))
    looked = []

    def look(load: float, _first):
        looked.append(load)
        return _fake_point(1000, samples=1000)(replace(base, mode="rate", load=load))

    # another wire of the server life holds at 850 req/s: the search's claim 10 % below ~887 could not beat it
    rate = rate_sweep(_fake_point(1000, samples=30), replace(base, mode="rate", load=1), start_rps=100,
                      bound=BoundRule(10.0, looks=2), limits=SearchLimits(2, 20),
                      longer=LongerLook(look, lambda: 850.0))
    assert looked == [] and rate.best_load is None and len(rate.points) <= 20
    assert "a point of its server life holds at 850 req/s, no answer hinges on a slower one" in rate.stop_reason
    # held at 700 req/s: the look at ~799 could beat it, and is taken
    faster = rate_sweep(_fake_point(1000, samples=30), replace(base, mode="rate", load=1), start_rps=100,
                        bound=BoundRule(10.0, looks=2), limits=SearchLimits(2, 20),
                        longer=LongerLook(look, lambda: 700.0))
    assert len(looked) == 1 and faster.best_load == looked[0] > 700
    looked.clear()
    closed = concurrency_sweep(_fake_point(8000, samples=30), base, concurrencies=[1, 2, 4],
                               bound=BoundRule(3.0, looks=2), longer=LongerLook(look, lambda: 1e6))
    assert looked == [] and closed.stop_reason.endswith("no answer hinges on a slower one")
