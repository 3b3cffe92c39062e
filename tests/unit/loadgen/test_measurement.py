"""Load generator units: settings and bad input, the HTTP parser, HDR bulk load and exact merges, sweeps."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from tasks.core.errors import ConfigError, LoadTestError
from tasks.loadgen import histogram
from tasks.loadgen.engine import arrival_schedule_ns
from tasks.loadgen.http import HttpConnection
from tasks.loadgen.measurement import summarize
from tasks.loadgen.protocols.base import CONNECTION, HTTP_STATUS, OK, TIMEOUT
from tasks.loadgen.recording import Recording, window_stable
from tasks.loadgen.run import check_reachable, run_load_point, worker_share
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.sweep import concurrency_sweep, rate_sweep
from tasks.plan.config import RunConfig
from tasks.runtimes.ports import free_port
from tasks.serve.base import Endpoint


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"mode": "concurrency", "load": 0}, "concurrency"),
    ({"mode": "rate", "load": 0}, "rate"),
    ({"duration_s": 2, "window_s": 3}, "window_s"),
    ({"workers": 0}, "workers"),
    ({"mode": "concurrency", "load": 2, "workers": 3}, "workers"),
    ({"stop_when_stable": True, "duration_s": 4, "window_s": 2}, "min_windows"),
    ({"arrival": "bursty"}, "arrival"),
])
def test_bad_settings_name_field_value_and_rule(kwargs, field):
    with pytest.raises(ConfigError) as info:
        LoadSettings(**kwargs)
    assert info.value.field == field and "must" in info.value.rule


def test_bad_run_config_before_load():
    for params, field in (({"concurrencies": [0]}, "concurrencies"), ({"mode": "rate", "rates": [0]}, "rates"),
                          ({"duration_s": 2, "window_s": 5}, "window_s")):
        with pytest.raises(ConfigError) as info:
            RunConfig.from_params(params)
        assert info.value.field == field


def test_unreachable_endpoint_fails_before_load(tmp_path):
    endpoint = Endpoint("127.0.0.1", free_port(), "mlp", "kserve_v2_rest")
    with pytest.raises(LoadTestError, match="endpoint=http://127.0.0.1:.*must accept TCP connections"):
        check_reachable(endpoint)
    with pytest.raises(LoadTestError, match="no load was sent"):
        run_load_point(endpoint, None, LoadSettings(duration_s=1, window_s=1), tmp_path)
    assert not list(tmp_path.glob("recording*"))


class _Collect:
    def __init__(self) -> None:
        self.responses: list[tuple[int, bytes]] = []

    def on_response(self, conn, status, body):
        self.responses.append((status, body))
        conn.busy = True  # expect the next response on the same connection

    def on_lost(self, conn, exc):
        pass


def test_http_parser_fast_slow_and_chunked_paths():
    driver = _Collect()
    conn = HttpConnection(driver)
    conn.busy = True
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")  # whole response: fast path
    conn.data_received(b"HTTP/1.1 503 Busy\r\ncontent-length: 5\r\n\r\nab")  # split body: slow path
    conn.data_received(b"cde")
    conn.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    conn.data_received(b"2\r\nde\r\n0\r\n\r\n")
    conn.data_received(b"HTTP/1.1 404 Not Found\r\ncontent-length: 1\r\n\r\nx")  # lower case, not 200: fast
    # 2 bytes after a head that declares 20 must not pass for a whole response ("2" is a prefix of "20")
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nxy")
    conn.data_received(b"z" * 18)
    conn.data_received(b"HTTP/1.0 200 OK\r\nContent-Length:3\r\n\r\nabc")  # other spelling: slow path
    assert driver.responses == [(200, b"hi"), (503, b"abcde"), (200, b"abcde"), (404, b"x"),
                                (200, b"xy" + b"z" * 18), (200, b"abc")]


def test_hdr_bulk_load_equals_record_value_and_merges_exactly():
    values = (np.random.default_rng(7).lognormal(7, 1.5, 20_000)).astype(np.int64) + 1
    bulk = histogram.add_values(histogram.new_histogram(), values)
    one_by_one = histogram.new_histogram()
    for v in values[:20_000].tolist():
        one_by_one.record_value(v)
    assert histogram.same_counts(bulk, one_by_one)
    assert (bulk.min_value, bulk.max_value) == (one_by_one.min_value, one_by_one.max_value)


def _synthetic_recording(n: int, seed: int) -> Recording:
    rng = np.random.default_rng(seed)
    scheduled = np.sort(rng.integers(0, 4_000_000_000, n)).astype(np.int64)
    sent = scheduled + rng.integers(0, 50_000, n)
    done = sent + (rng.lognormal(13, 1.0, n)).astype(np.int64)
    codes = np.where(rng.random(n) < 0.02, HTTP_STATUS, OK).astype(np.int8)
    return Recording(0, 1_000_000_000, 4_000_000_000, scheduled, sent, done, codes, 1.0, 4.0, 1, (25.0,))


_WORKER_SCRIPT = """
import sys, numpy as np
from tasks.loadgen import histogram
from tasks.loadgen.recording import Recording
from tasks.loadgen.measurement import latencies_ns
rec = Recording.load(sys.argv[1])
print(histogram.encode(histogram.histogram_from_ns(latencies_ns(rec, "scheduled"))))
"""


def test_multi_process_merge_equals_single_process(tmp_path):
    """N recordings histogrammed in N separate processes merge into exactly the single-process result."""
    whole = _synthetic_recording(30_000, seed=1)
    settings = LoadSettings(mode="rate", load=10_000, duration_s=3, warmup_s=1, window_s=1)
    single = summarize(whole, settings, latency_from="scheduled")
    parts = []
    for i, index in enumerate(np.array_split(np.random.default_rng(2).permutation(30_000), 3)):
        index = np.sort(index)
        part = Recording(0, whole.warmup_end_ns, whole.end_ns, whole.scheduled_ns[index], whole.sent_ns[index],
                         whole.done_ns[index], whole.codes[index], 1 / 3, 4.0, 1, (25.0,), generator_late=i)
        part.save(str(tmp_path / f"part{i}.npz"))
        assert Recording.load(str(tmp_path / f"part{i}.npz")).generator_late == i
        parts.append(part)
    encoded = [subprocess.run([sys.executable, "-c", _WORKER_SCRIPT, str(tmp_path / f"part{i}.npz")],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
               for i in range(3)]
    merged_hist = histogram.merge(encoded)
    assert histogram.same_counts(merged_hist, histogram.decode(single.latency_hdr))
    for q in (50, 90, 99, 99.9):
        assert merged_hist.get_value_at_percentile(q) == histogram.decode(single.latency_hdr).get_value_at_percentile(q)
    merged = summarize(Recording.merge(parts), settings, latency_from="scheduled")
    for key in ("requests", "errors", "latency_ms_p50", "latency_ms_p99", "latency_ms_p999", "window_throughput_rps"):
        assert getattr(merged, key) == getattr(single, key), key
    assert merged.workers == 3 and merged.errors_by_kind == {"http_status": single.errors}
    assert merged.generator_late_starts == 0 + 1 + 2


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


def test_schedules_are_seeded_split_exactly_and_bounded():
    s = LoadSettings(mode="rate", load=1000, duration_s=2, warmup_s=1, window_s=1, arrival="constant", workers=4)
    shares = [worker_share(s, i) for i in range(4)]
    merged = np.sort(np.concatenate([arrival_schedule_ns(s, seed=w["seed"], stride=w["stride"], offset=w["offset"])
                                     for w in shares]))
    assert np.array_equal(merged, arrival_schedule_ns(replace(s, workers=1)))
    poisson = replace(s, arrival="poisson", seed=11)
    assert np.array_equal(arrival_schedule_ns(poisson), arrival_schedule_ns(poisson))
    assert abs(len(arrival_schedule_ns(poisson)) - 3000) < 250 and arrival_schedule_ns(poisson).max() < 3e9
    assert sum(worker_share(LoadSettings(load=7, workers=3), i)["concurrency"] for i in range(3)) == 7


def test_stability_rule():
    assert window_stable(np.array([50.0, 100, 101, 99]), 5)
    assert not window_stable(np.array([100.0, 100, 120]), 5)
    assert not window_stable(np.array([100.0, 100]), 50)


def _fake_point(capacity_rps: float, base_ms: float = 1.0):
    """A server model for sweep logic: throughput saturates at capacity, p99 explodes near it."""
    from tasks.loadgen.measurement import Measurement

    def run(settings: LoadSettings) -> Measurement:
        offered = settings.load * 1000 / base_ms if settings.mode == "concurrency" else settings.load
        rps = min(offered, capacity_rps)
        p99 = base_ms / max(1e-3, 1 - rps / capacity_rps) if settings.mode == "rate" else base_ms * settings.load
        return Measurement(1, 100, 0, 0.0, {}, 0, 0, rps, rps, p99, p99, p99, p99, p99, p99, p99, "sent", 3,
                           (rps,) * 3, True, False, 0.0, 0, 0, 0.0, 10.0, 5.0, False, 1, "")
    return run


def test_sweeps_follow_their_stop_rules():
    base = LoadSettings(duration_s=1, window_s=1)
    closed = concurrency_sweep(_fake_point(8000), base, max_concurrency=64)
    assert [c for c, _ in closed.points] == [1, 2, 4, 8, 16] and closed.best_load == 8
    bounded = concurrency_sweep(_fake_point(8000), base, concurrencies=[1, 2, 4, 8], p99_bound_ms=3)
    assert [c for c, _ in bounded.points] == [1, 2, 4] and bounded.best_load == 2
    rate = rate_sweep(_fake_point(1000), replace(base, mode="rate", load=1), start_rps=100, p99_bound_ms=10,
                      resolution_pct=2, max_points=20)
    assert 880 <= rate.best_load <= 900  # p99 <= 10 ms  <=>  rate <= 900
    assert all(m.latency_ms_p99 <= 10 for r, m in rate.points if r <= rate.best_load)


def test_open_loop_records_unsendable_requests(tmp_path):
    """A server that accepts but never answers: every due request ends as timeout or not_sent, within bound, and the
    hang shows in the percentiles (censored samples at their timeout / wait), with the first error's message."""
    import socket
    import time

    from tasks.loadgen.engine import open_loop
    from tasks.loadgen.protocols.http_get import HttpGet

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        settings = LoadSettings(mode="rate", load=200, duration_s=1, warmup_s=0, window_s=1,
                                request_timeout_s=0.3, max_connections=2)
        started = time.monotonic()
        rec = asyncio.run(open_loop("127.0.0.1", port, HttpGet("127.0.0.1", port, "x", {}, {}), settings))
        assert time.monotonic() - started < 1 + 0.3 + 1.0 + 0.5
    finally:
        listener.close()
    m = summarize(rec, settings, "scheduled")
    assert m.requests == 200 and m.errors == 200 and m.latency_ms_p99 >= 300 and m.throughput_rps == 0
    assert m.first_error.startswith("timeout: no response within 0.3 s")
    assert set(m.errors_by_kind) <= {"timeout", "not_sent", "connection"} and m.errors_by_kind.get("not_sent", 0) > 0


def test_open_loop_bounds_every_request_from_its_scheduled_send():
    """A server that answers one request at a time, 20 ms each (50/s), offered 200/s over two connections with a
    0.3 s timeout: no success counts a wait longer than the timeout (latency and timeout both start at the
    scheduled send), and a request that waited the timeout for a free connection is given up unsent, not sent late
    to a server that would work on it for no one."""
    import threading

    from tasks.loadgen.engine import open_loop
    from tasks.loadgen.protocols.base import NOT_SENT
    from tasks.loadgen.protocols.http_get import HttpGet

    served = []
    loop = asyncio.new_event_loop()
    one_at_a_time: list[asyncio.Lock] = []  # made on the server's loop

    async def handle(reader, writer):
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                async with one_at_a_time[0]:
                    await asyncio.sleep(0.02)
                    served.append(1)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def start():
        one_at_a_time.append(asyncio.Lock())
        return await asyncio.start_server(handle, "127.0.0.1", 0)

    server = loop.run_until_complete(start())
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        settings = LoadSettings(mode="rate", load=200, duration_s=1.5, warmup_s=0, window_s=0.5,
                                request_timeout_s=0.3, max_connections=2)
        rec = asyncio.run(open_loop("127.0.0.1", port, HttpGet("127.0.0.1", port, "x", {}, {}), settings))
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    waited_ms = (rec.done_ns - rec.scheduled_ns) / 1e6
    ok = rec.codes == OK
    assert 20 <= ok.sum() <= 90  # about 1.5 s of a 50/s server
    assert waited_ms[ok].max() <= 300 + 100  # the timeout, plus the watchdog's period and the host's jitter
    given_up = (rec.codes == NOT_SENT) & (rec.sent_ns == rec.done_ns) & (waited_ms >= 300)
    assert given_up.sum() >= 100  # most of the 300 requests: the server could take a sixth of them
    assert len(served) <= ok.sum() + (rec.codes == TIMEOUT).sum() + 2  # nothing stale was sent to it


@pytest.mark.parametrize("pacer_class", ["TimerfdPacer", "LoopTimerPacer"])
def test_pacer_wakes_at_its_time_repeats_on_request_and_closes(pacer_class):
    """One wake-up per `arm`, never before its time; `every` repeats until `arm` replaces it; `pause` and
    `close` end them."""
    import os
    import sys
    import time

    from tasks.loadgen import pacer

    if pacer_class == "TimerfdPacer" and not sys.platform.startswith("linux"):
        pytest.skip("timerfd is Linux only")  # make_pacer falls back to LoopTimerPacer there

    async def scenario() -> dict:
        fired: list[int] = []
        p = getattr(pacer, pacer_class)(asyncio.get_running_loop(), lambda: fired.append(time.monotonic_ns()))
        at = time.monotonic_ns() + 30_000_000
        p.arm(at)
        p.arm(at)  # re-arming replaces, it does not add a wake-up
        await asyncio.sleep(0.1)
        once = list(fired)
        fired.clear()
        p.every(10_000_000)
        await asyncio.sleep(0.1)
        periodic = len(fired)
        p.arm(time.monotonic_ns() + 20_000_000)  # back to one-shot
        await asyncio.sleep(0.01)
        fired.clear()
        await asyncio.sleep(0.1)
        after_arm = len(fired)
        p.every(5_000_000)
        p.pause()
        fired.clear()
        await asyncio.sleep(0.05)
        after_pause = len(fired)
        fd = getattr(p, "_fd", None)
        p.every(5_000_000)
        p.close()
        fired.clear()
        await asyncio.sleep(0.05)
        return {"once": once, "at": at, "periodic": periodic, "after_arm": after_arm, "after_pause": after_pause,
                "after_close": len(fired), "fd": fd}

    r = asyncio.run(scenario())
    assert len(r["once"]) == 1 and r["once"][0] >= r["at"]
    assert r["once"][0] - r["at"] < 50_000_000  # generous for a loaded CI host; typical is tens of microseconds
    assert 4 <= r["periodic"] <= 11  # every 10 ms for 100 ms
    assert r["after_arm"] <= 1 and r["after_pause"] == 0 and r["after_close"] == 0
    if r["fd"] is not None:
        with pytest.raises(OSError):
            os.fstat(r["fd"])  # the timerfd is closed


def test_make_pacer_uses_a_timerfd_on_linux():
    import sys

    from tasks.loadgen.pacer import LoopTimerPacer, TimerfdPacer, make_pacer

    async def kind() -> type:
        p = make_pacer(lambda: None)
        p.close()
        return type(p)

    assert asyncio.run(kind()) is (TimerfdPacer if sys.platform.startswith("linux") else LoopTimerPacer)

