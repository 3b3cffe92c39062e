"""The load engine (tasks/loadgen/http_engine.py): seeded arrival schedules split over workers, and the open loop
against in-process sockets (requests it cannot send, every request bounded from its scheduled send)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np

from tasks.loadgen.http_engine import arrival_schedule_ns
from tasks.loadgen.measurement import summarize
from tasks.loadgen.protocols.base import OK, TIMEOUT
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.worker import worker_share


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


def test_open_loop_records_unsendable_requests(tmp_path):
    """A server that accepts but never answers: every due request ends as timeout or not_sent, within bound, and the
    hang shows in the percentiles (censored samples at their timeout / wait), with the first error's message."""
    import socket
    import time

    from tasks.loadgen.http_engine import open_loop
    from tasks.loadgen.protocols.http_get import HttpGet

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        settings = LoadSettings(mode="rate", load=200, duration_s=1, warmup_s=0, window_s=1,
                                request_timeout_s=0.3, max_connections=2)
        started = time.monotonic()
        rec = asyncio.run(open_loop("127.0.0.1", port, HttpGet("127.0.0.1", port, "x", {}, {}), settings))
        assert time.monotonic() - started < 30  # a guard against a hang: about 1 s of schedule + 0.3 s timeout
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

    from tasks.loadgen.http_engine import open_loop
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
            pass
        finally:
            writer.close()

    async def stop():  # the handlers still queued on the lock end on this loop, before it closes
        server.close()
        handlers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

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
        asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
    waited_ms = (rec.done_ns - rec.scheduled_ns) / 1e6
    ok = rec.codes == OK
    assert 20 <= ok.sum() <= 90  # about 1.5 s of a 50/s server
    assert waited_ms[ok].max() <= 300 + 100  # the timeout, plus the watchdog's period and the host's jitter
    given_up = (rec.codes == NOT_SENT) & (rec.sent_ns == rec.done_ns) & (waited_ms >= 300)
    assert given_up.sum() >= 100  # most of the 300 requests: the server could take a sixth of them
    assert len(served) <= ok.sum() + (rec.codes == TIMEOUT).sum() + 2  # nothing stale was sent to it
