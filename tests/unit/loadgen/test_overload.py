"""Overload and recovery (tasks/loadgen/overload.py): the phase's schedule, its figures from a recording, the
class of what the stack did. Against real servers: tests/integration/test_overload.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.core.metrics import OVERLOAD_P99_RATIO
from tasks.loadgen.overload import OverloadPhases, phases_for, summarize_overload
from tasks.loadgen.protocols.base import HTTP_STATUS, OK, TIMEOUT
from tasks.loadgen.recording import Recording
from tasks.validate.overload import OverloadSigns, classify_overload

NS = 1_000_000_000
MS = 1_000_000


def test_the_schedule_holds_each_stretch_at_its_rate_and_workers_split_it_exactly():
    phases = OverloadPhases(capacity_rps=100.0, factor=3.0, pre_s=2.0, burst_s=1.0, recover_s=4.0)
    times = phases.schedule_ns()
    seconds = times / NS
    assert ((seconds >= 0) & (seconds < 2)).sum() == 100  # 2 s at 50 req/s
    assert ((seconds >= 2) & (seconds < 3)).sum() == 300  # 1 s at 300 req/s
    assert ((seconds >= 3) & (seconds < 7)).sum() == 200  # 4 s at 50 req/s
    assert np.all(np.diff(times) > 0)
    split = np.sort(np.concatenate([phases.schedule_ns(3, i) for i in range(3)]))
    assert np.array_equal(split, times)


def test_a_phase_is_bounded_and_needs_a_capacity():
    with pytest.raises(ConfigError, match="capacity_rps"):
        phases_for(0.0, 3.0, 8.0)
    with pytest.raises(ConfigError, match="must last at most"):
        phases_for(10.0, 3.0, 400.0)
    phases = phases_for(200.0, 1.5, 8.0)
    assert (phases.pre_s, phases.burst_s, phases.recover_s) == (4.0, 8.0, 16.0)


def recording_of(phases: OverloadPhases, latency_ms, codes) -> Recording:
    """A recording of `phases`' schedule whose requests took latency_ms(t) and ended with codes(t), t the scheduled
    second."""
    scheduled = phases.schedule_ns()
    t = scheduled / NS
    done = scheduled + np.array([int(latency_ms(x) * MS) for x in t], dtype=np.int64)
    code = np.array([codes(x) for x in t], dtype=np.int64)
    return Recording(0, 0, int(phases.total_s * NS), scheduled, scheduled.copy(), done, code)


def test_a_stack_that_queues_then_drains_recovers_when_p99_is_back():
    phases = OverloadPhases(capacity_rps=100.0, factor=3.0, pre_s=2.0, burst_s=1.0, recover_s=4.0)

    def latency(t: float) -> float:  # 10 ms before; the queue grows in the burst and drains 1.5 s after it
        if t < 2.0:
            return 10.0
        if t < 3.0:
            return 10.0 + (t - 2.0) * 2000.0
        return 10.0 + max(0.0, 2000.0 * (1 - (t - 3.0) / 1.5))

    figures = summarize_overload(recording_of(phases, latency, lambda t: TIMEOUT if 2.5 <= t < 3.0 else OK), phases,
                                 request_timeout_s=1.0)
    assert figures.requests == 300 and figures.errors == 150 == figures.timeouts == figures.queued
    assert figures.fast_errors == 0
    # goodput: answers back during the burst, those scheduled in it before t + 0.01 + 2 (t - 2) reaches 3 s
    assert figures.goodput_rps == pytest.approx(300 * (3.0 - 0.01 - 2.0) / 3, abs=1.0)
    assert figures.goodput_pct == pytest.approx(figures.goodput_rps)  # capacity 100 req/s
    assert figures.pre_burst_p99_ms == pytest.approx(10.0)
    assert figures.burst_p99_ms >= 1000.0  # the timeouts count at the timeout at least
    # 50 requests before the burst: judged at p90 (limit 1.2 x 10 ms); windows of a third of the 4 s after it (4 x 29
    # requests would take 2.32 s at 50 req/s) from the burst's end: [3, 4.33) drains, [4.33, 5.67) still holds 8
    # slow requests of 67, [5.67, 7) is back at 10 ms
    assert (figures.pre_requests, figures.recovery_level) == (50, 90.0)
    assert figures.recovery_limit_ms == pytest.approx(12.0)
    assert figures.window_s == pytest.approx(4.0 / 3)
    assert figures.recovered and figures.recovery_s == pytest.approx(8.0 / 3, abs=1e-6)
    after = [w for w in figures.windows if w["start_s"] >= 3.0 - 1e-6]
    assert [(w["requests"], w["slower"], w["verdict"]) for w in after] == [(67, 67, "fails"), (67, 8, "undecided"),
                                                                          (66, 0, "holds")]
    assert json.loads(figures.to_json())["windows"][-1] == after[-1]
    signs = OverloadSigns(figures.fast_errors, figures.queued, figures.burst_p99_ms, figures.pre_burst_p99_ms)
    assert classify_overload(signs, server_alive=True) == "queues"


def test_a_stack_that_sheds_fast_and_one_that_never_recovers():
    phases = OverloadPhases(capacity_rps=100.0, factor=1.5, pre_s=2.0, burst_s=2.0, recover_s=5.0)
    shed = summarize_overload(recording_of(phases, lambda t: 5.0 if 2 <= t < 4 else 10.0,
                                           lambda t: HTTP_STATUS if 2 <= t < 4 and int(t * 150) % 3 == 0 else OK),
                              phases, request_timeout_s=1.0)
    assert shed.fast_errors == shed.errors > 0 and shed.queued == 0
    assert shed.errors_by_kind == {"http_status": shed.errors}
    assert shed.recovery_s == 0.0  # the first windows after the burst are clean again
    assert classify_overload(OverloadSigns(shed.fast_errors, shed.queued, shed.burst_p99_ms, shed.pre_burst_p99_ms),
                             True) == "sheds"
    stuck = summarize_overload(recording_of(phases, lambda t: 10.0 if t < 2 else 10.0 * OVERLOAD_P99_RATIO * 2,
                                            lambda t: OK), phases, request_timeout_s=1.0)
    assert not stuck.recovered and stuck.recovery_s is None
    assert stuck.recovery_text() == "did not recover within 5 s"
    signs = OverloadSigns(stuck.fast_errors, stuck.queued, stuck.burst_p99_ms, stuck.pre_burst_p99_ms)
    assert classify_overload(signs, True) == "queues"  # nothing failed, but it answered late
    assert classify_overload(signs, False) == "fails"
    assert classify_overload(OverloadSigns(0, 0, 11.0, 10.0), True) == "holds"


def test_overload_cells_come_last_in_each_session_and_only_when_asked():
    from tasks.plan.cells import make_plan
    from tasks.plan.config import RunConfig

    plan = make_plan(RunConfig.from_params({"concurrencies": [1, 4], "overload": True, "control_cell": "none"}))
    (session,) = plan.sessions
    assert [(c.mode, c.load) for c in session.cells] == [("concurrency", 1.0), ("concurrency", 4.0),
                                                         ("overload", 1.5), ("overload", 3.0)]
    assert all(c.mode != "overload" for c in make_plan(RunConfig.from_params({})).cells)
    with pytest.raises(ConfigError, match="^overload="):
        RunConfig.from_params({"overload": "yes"})


def test_the_nightly_suite_measures_overload_and_the_smoke_suite_does_not():
    from tasks.plan.config import RunConfig

    assert RunConfig.from_params({"suite": "nightly"}).overload is True
    assert RunConfig.from_params({"suite": "smoke"}).overload is False


def test_a_slow_stack_still_gets_recovery_windows():
    # 4 req/s of capacity: 2 req/s at the base rate, 6 requests before the burst (judged at the median) and 32 after
    # it, cut into three windows of 5.33 s (4 x 5 requests would take 10 s); the first still holds 4 slow of 11
    phases = phases_for(4.0, 3.0, 8.0)
    figures = summarize_overload(recording_of(phases, lambda t: 300.0 if 4.0 <= t < 14.0 else 100.0,
                                              lambda t: OK), phases, request_timeout_s=10.0)
    assert (figures.pre_requests, figures.recovery_level, figures.window_s) == (6, 50.0, pytest.approx(16.0 / 3))
    assert [(w["requests"], w["slower"], w["verdict"]) for w in figures.windows if w["start_s"] >= 12.0] == [
        (11, 4, "undecided"), (11, 0, "holds"), (10, 0, "holds")]
    assert figures.recovery_s == pytest.approx(16.0 / 3, abs=1e-6)
    empty = OverloadPhases(capacity_rps=0.2, factor=3.0, pre_s=2.0, burst_s=2.0, recover_s=5.0)  # nothing before
    none_before = summarize_overload(recording_of(empty, lambda t: 10.0, lambda t: OK), empty, 1.0)
    assert none_before.pre_burst_p99_ms is None and not none_before.recovered
    assert none_before.recovery_text().startswith("recovery not measured")
    few = OverloadPhases(capacity_rps=2.0, factor=3.0, pre_s=4.0, burst_s=2.0, recover_s=5.0)  # 5 requests after
    too_few = summarize_overload(recording_of(few, lambda t: 10.0, lambda t: OK), few, 1.0)
    assert too_few.recovery_level is None and not too_few.recovered
    assert too_few.recovery_text() == ("recovery not measured: 3 requests before the burst and 5 after it are too "
                                       "few to judge a median")


def _noisy(phases: OverloadPhases, slow_until_s: float, after_factor: float, seed: int):
    """Latencies of a slow model (about 250 ms, lognormal with sigma 0.1, seeded per request): 3 s per request in
    the burst and until `slow_until_s`, then `after_factor` x the usual."""
    noise = dict(zip(phases.schedule_ns().tolist(),
                     np.random.default_rng(seed).lognormal(0.0, 0.1, len(phases.schedule_ns())), strict=True))

    def latency(t: float) -> float:
        usual = 250.0 * noise[int(round(t * NS))]
        if t < phases.burst_start_s:
            return usual
        return 3000.0 if t < slow_until_s else usual * after_factor
    return latency


def test_a_slow_model_that_recovers_is_found_recovered_and_one_that_does_not_is_not():
    # ~4 req/s of capacity (BERT-base): 6 requests before the burst, so judged at the median, windows of 10-11
    # requests
    phases = phases_for(4.0, 3.0, 8.0)
    for seed in range(5):
        back = summarize_overload(recording_of(phases, _noisy(phases, 14.0, 1.0, seed), lambda t: OK), phases, 10.0)
        assert back.recovery_level == 50.0 and back.recovered, (seed, back.windows)
        # the first window after the burst still holds the slow requests of 12-14 s
        assert back.recovery_s == pytest.approx(16.0 / 3, abs=1e-6) or back.recovery_s == pytest.approx(32.0 / 3,
                                                                                                          abs=1e-6)
        assert [w["requests"] for w in back.windows if w["start_s"] >= 12.0] == [11, 11, 10]
        stuck = summarize_overload(recording_of(phases, _noisy(phases, 14.0, 1.6, seed), lambda t: OK), phases, 10.0)
        assert not stuck.recovered and stuck.recovery_s is None, (seed, stuck.windows)
        assert stuck.recovery_text() == "did not recover within 16 s"
