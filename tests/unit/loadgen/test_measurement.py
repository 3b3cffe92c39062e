"""A load point's figures from a recording (tasks/loadgen/measurement.py): failures and timeouts in the
percentiles, the closed loop's omitted requests, count windows and the throughput interval, server timing parts."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.loadgen.measurement import ServerTiming, summarize
from tasks.loadgen.protocols.base import CONNECTION, HTTP_STATUS, OK, TIMEOUT
from tasks.loadgen.recording import Recording
from tasks.loadgen.settings import LoadSettings


def _synthetic_recording(n: int, seed: int) -> Recording:
    rng = np.random.default_rng(seed)
    scheduled = np.sort(rng.integers(0, 4_000_000_000, n)).astype(np.int64)
    sent = scheduled + rng.integers(0, 50_000, n)
    done = sent + (rng.lognormal(13, 1.0, n)).astype(np.int64)
    codes = np.where(rng.random(n) < 0.02, HTTP_STATUS, OK).astype(np.int8)
    return Recording(0, 1_000_000_000, 4_000_000_000, scheduled, sent, done, codes, 1.0, 4.0, 1, (25.0,))


def test_failed_requests_never_enter_percentiles_as_fast_successes():
    rec = _synthetic_recording(10_000, seed=3)
    rec.codes[::10] = HTTP_STATUS
    rec.done_ns[::10] = rec.sent_ns[::10] + 10_000_000_000  # 10 s: would dominate p99 if counted
    rec.codes[5::10] = CONNECTION
    rec.done_ns[5::10] = rec.sent_ns[5::10] + 1  # refused at once: would pull p50 down if counted
    m = summarize(rec, LoadSettings(mode="rate", load=1000, duration_s=3, warmup_s=1, window_s=1), "scheduled")
    ok = rec.codes == OK
    assert m.latency_ms_max < 10_000 and m.errors_by_kind["connection"] > 0 and m.censored == 0
    assert m.latency_ms_p50 == pytest.approx(np.percentile((rec.done_ns - rec.scheduled_ns)[ok & (
        rec.scheduled_ns >= rec.warmup_end_ns) & (rec.scheduled_ns < rec.end_ns)] / 1e6, 50, method="inverted_cdf"))
    assert m.error_rate == pytest.approx(m.errors / m.requests) and m.error_rate > 0.2


def test_timed_out_requests_count_at_their_timeout():
    """A timeout is a censored sample at >= request_timeout_s: 10 % of requests timing out puts p99 there."""
    rec = _synthetic_recording(10_000, seed=3)
    rec.codes[::10] = TIMEOUT
    rec.done_ns[::10] = rec.sent_ns[::10] + 5_000_000  # given up early (the load point's bound) after 5 ms
    settings = LoadSettings(mode="rate", load=1000, duration_s=3, warmup_s=1, window_s=1, request_timeout_s=2)
    m = summarize(rec, settings, "scheduled")
    assert m.timeouts > 0 and m.censored == m.timeouts
    assert m.latency_ms_p99 >= 2000 and m.latency_ms_p50 < 100


def _closed_loop_hang(slots: int = 4, healthy_s: float = 7.0, end_s: float = 20.0, timeout_s: float = 10.0,
                      latency_ns: int = 2_000_000) -> Recording:
    """A closed loop whose server hangs at `healthy_s`: each slot sends back to back until then, then its
    request times out, it reconnects and sends again, and that one times out too (past the end)."""
    sent, done, codes, slot_ids = [], [], [], []
    for slot in range(slots):
        t = slot * 100_000
        while t + latency_ns < healthy_s * 1e9:
            sent.append(t)
            done.append(t + latency_ns)
            codes.append(OK)
            slot_ids.append(slot)
            t += latency_ns
        for _ in range(2):
            sent.append(t)
            done.append(t + int(timeout_s * 1e9) + 30_000_000)
            codes.append(TIMEOUT)
            slot_ids.append(slot)
            t = done[-1] + 1_000_000
    sent_ns = np.array(sent, dtype=np.int64)
    return Recording(0, 0, int(end_s * 1e9), sent_ns, sent_ns, np.array(done, dtype=np.int64),
                     np.array(codes, dtype=np.int8), 1.0, end_s, 1, (10.0,), slots=np.array(slot_ids, dtype=np.int32))


def test_closed_loop_hang_shows_in_p99_through_the_omitted_requests():
    """Eight timeouts among ~14,000 fast requests hide a 13 s hang; counting the requests the stalled slots would
    have sent (coordinated omission) puts p99 at the timeout."""
    rec = _closed_loop_hang()
    settings = LoadSettings(mode="concurrency", load=4, duration_s=20, warmup_s=0, window_s=2, request_timeout_s=10)
    m = summarize(rec, settings, "sent")
    assert m.timeouts == 8 and m.requests > 13_000 and m.omitted > 10_000
    assert m.latency_ms_p99 >= 10_000 and m.latency_ms_p50 < 20_000
    without = Recording(**{**rec.__dict__, "slots": None})  # no slots recorded: only the censored timeouts
    assert summarize(without, settings, "sent").latency_ms_p99 < 10


def test_slow_models_get_count_windows_and_a_throughput_interval():
    """5 req/s in 1 s windows is 5 completions a window (one more moves it by 20 %): count windows instead."""
    done = np.cumsum(np.full(60, 200_000_000)) + np.random.default_rng(1).integers(-5_000_000, 5_000_000, 60)
    rec = Recording(0, 0, 12_000_000_000, done - 200_000_000, done - 200_000_000, done, np.zeros(60, np.int8),
                    1.0, 12.0, 1, (5.0,), slots=np.zeros(60, np.int32))
    m = summarize(rec, LoadSettings(mode="concurrency", load=1, duration_s=12, warmup_s=0, window_s=1), "sent")
    assert m.window_basis == "count" and m.windows >= 3 and m.stable
    assert m.throughput_rps_ci_low < m.throughput_rps < m.throughput_rps_ci_high
    assert m.throughput_rps_ci_high - m.throughput_rps_ci_low < 0.1 * m.throughput_rps


def test_server_timing_parts_are_per_request_and_never_a_zero_that_was_not_measured():
    timing = ServerTiming.from_deltas({"requests": 4, "server_ms": 40.0, "queue_ms": 0.0, "infer_ms": 20.0})
    assert (timing.server_ms, timing.infer_ms) == (10.0, 5.0)
    assert timing.queue_ms is None and timing.decode_ms is None  # 0 over 4 requests: not reported
    assert ServerTiming.from_deltas({"requests": 0, "server_ms": 1.0}) is None


def test_t_975_is_students_t_at_three_decimals() -> None:
    from tasks.loadgen.measurement import t_975

    printed = {1: 12.706, 2: 4.303, 5: 2.571, 10: 2.228, 12: 2.179, 30: 2.042, 60: 2.000, 120: 1.980}
    assert {df: t_975(df) for df in printed} == printed  # a printed table's values
    assert t_975(13) == 2.160  # between a table's entries: the quantile itself, not the next smaller df's
    assert t_975(0) == t_975(1)
    assert t_975(100_000) == 1.960


def test_the_count_behind_the_percentiles_is_the_real_requests_and_too_few_give_a_lower_bound():
    """The hang above: ~14,000 real requests (8 of them timeouts) and >10,000 stand-ins for requests the stalled
    slots would have sent; the stand-ins move the percentiles but do not add to their count."""
    rec = _closed_loop_hang()
    settings = LoadSettings(mode="concurrency", load=4, duration_s=20, warmup_s=0, window_s=2, request_timeout_s=10,
                            bounds_ms=(50.0, 20_000.0))
    m = summarize(rec, settings, "sent")
    assert m.latency_samples == m.requests - m.errors + m.timeouts and m.omitted > 10_000
    assert m.latency_ms_p99_ci_low <= m.latency_ms_p99 and m.latency_ms_p999 is not None
    assert m.bound_counts == ((50.0, 8, pytest.approx(m.bound_counts[0][2])), (20_000.0, 0, float(m.latency_samples)))
    # 60 requests of a slow model: p99 and p99.9 are lower bounds at the largest latency, p50 a figure
    done = np.cumsum(np.full(60, 200_000_000))
    slow = Recording(0, 0, 12_000_000_000, done - 200_000_000, done - 200_000_000, done, np.zeros(60, np.int8),
                     1.0, 12.0, 1, (5.0,), slots=np.zeros(60, np.int32))
    few = summarize(slow, LoadSettings(mode="concurrency", load=1, duration_s=12, warmup_s=0, window_s=1), "sent")
    assert few.latency_samples == 60 and few.latency_ms_p50 == pytest.approx(200.0)
    assert few.latency_ms_p99 is None and few.latency_ms_p99_at_least == pytest.approx(200.0)
    assert few.latency_ms_p999 is None and few.latency_ms_p999_at_least == few.latency_ms_max
    assert few.latency_ms_p50_ci_low <= few.latency_ms_p50 <= few.latency_ms_p50_ci_high
