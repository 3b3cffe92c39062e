"""The engine: issue requests over lean keep-alive connections and record each one.

Per request it stores monotonic nanosecond timestamps (scheduled send, actual send, completion) and an
error kind into flat arrays; nothing is judged here. Closed loop: `concurrency` connections, each sending
its next request when the previous one completes; latency is measured from the actual send. Open loop:
requests are due on a seeded schedule (constant or Poisson), latency is measured from the *scheduled*
send, so a stalled server cannot hide its stall (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import time
from array import array
from dataclasses import dataclass, field

import numpy as np

from tasks.loadgen.http import HttpConnection
from tasks.loadgen.protocols.base import CONNECTION, TIMEOUT, Codec
from tasks.loadgen.settings import LoadSettings

WATCHDOG_PERIOD_S = 0.05
DRAIN_GRACE_S = 1.0  # after the measured time, in-flight requests get this long (bounded by the timeout)


@dataclass
class Recording:
    """What happened, request by request, in nanoseconds relative to `t0_ns` (start of the warm-up)."""

    t0_ns: int
    warmup_end_ns: int
    end_ns: int
    scheduled_ns: np.ndarray
    sent_ns: np.ndarray
    done_ns: np.ndarray
    codes: np.ndarray
    generator_cpu_s: float = 0.0
    wall_s: float = 0.0
    meta: dict = field(default_factory=dict)

    def save(self, path: str) -> None:
        np.savez_compressed(path, scheduled_ns=self.scheduled_ns, sent_ns=self.sent_ns, done_ns=self.done_ns,
                            codes=self.codes, bounds=np.array([self.t0_ns, self.warmup_end_ns, self.end_ns]),
                            cpu=np.array([self.generator_cpu_s, self.wall_s]))

    @classmethod
    def load(cls, path: str) -> Recording:
        with np.load(path) as data:
            t0, warm, end = (int(v) for v in data["bounds"])
            cpu, wall = (float(v) for v in data["cpu"])
            return cls(t0, warm, end, data["scheduled_ns"], data["sent_ns"], data["done_ns"], data["codes"], cpu, wall)


class _Recorder:
    def __init__(self) -> None:
        self.scheduled, self.sent, self.done = array("q"), array("q"), array("q")
        self.codes = array("b")

    def add(self, scheduled: int, sent: int, done: int, code: int) -> None:
        self.scheduled.append(scheduled)
        self.sent.append(sent)
        self.done.append(done)
        self.codes.append(code)


async def _watchdog(conns: list[HttpConnection], timeout_ns: int, stop: asyncio.Event) -> None:
    """Abort requests in flight for longer than the timeout (cheaper than a timer per request)."""
    while not stop.is_set():
        now = time.monotonic_ns()
        for conn in conns:
            if conn.waiter is not None and now - conn.sent_ns > timeout_ns:
                conn.abort(TimeoutError("request timed out"))
        await asyncio.sleep(WATCHDOG_PERIOD_S)


async def closed_loop(host: str, port: int, codec: Codec, settings: LoadSettings) -> Recording:
    request = codec.request_bytes()
    rec = _Recorder()
    conns = [await HttpConnection.open(host, port) for _ in range(settings.concurrency)]
    t0 = time.monotonic_ns()
    warm_end = t0 + int(settings.warmup_s * 1e9)
    end = warm_end + int(settings.duration_s * 1e9)
    stop = asyncio.Event()
    cpu0, wall0 = time.process_time(), time.monotonic()

    async def worker(index: int) -> None:
        conn = conns[index]
        check, monotonic_ns, add = codec.check, time.monotonic_ns, rec.add
        while True:
            sent = monotonic_ns()
            if sent >= end:
                return
            try:
                status, body = await conn.request(request, sent)
                code = check(status, body)
            except TimeoutError:
                code = TIMEOUT
            except (ConnectionError, OSError):
                code = CONNECTION
            add(sent, sent, monotonic_ns(), code)
            if code in (TIMEOUT, CONNECTION):
                conn.abort(ConnectionError("reconnect"))
                try:
                    conn = conns[index] = await HttpConnection.open(host, port)
                except OSError:
                    await asyncio.sleep(0.05)

    guard = asyncio.ensure_future(_watchdog(conns, int(settings.request_timeout_s * 1e9), stop))
    try:
        await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(settings.concurrency))),
                               timeout=settings.warmup_s + settings.duration_s + settings.request_timeout_s + DRAIN_GRACE_S)
    finally:
        stop.set()
        guard.cancel()
        for conn in conns:
            if conn.transport is not None:
                conn.transport.close()
    return _finish(rec, t0, warm_end, end, cpu0, wall0)


def arrival_schedule_ns(settings: LoadSettings, arrival: str) -> np.ndarray:
    """Send times (ns from start) for the warm-up plus measured time; Poisson gaps are seeded."""
    total_s = settings.warmup_s + settings.duration_s
    count = int(total_s * settings.load * 1.2) + 16
    if arrival == "poisson":
        gaps = np.random.default_rng(settings.seed).exponential(1.0 / settings.load, count)
    else:
        gaps = np.full(count, 1.0 / settings.load)
    times = np.cumsum(gaps) - gaps[0]
    return (times[times < total_s] * 1e9).astype(np.int64)


async def open_loop(host: str, port: int, codec: Codec, settings: LoadSettings, arrival: str = "constant",
                    max_connections: int = 1024) -> Recording:
    """Send on schedule over a pool of connections; a send that finds no idle connection opens one."""
    request = codec.request_bytes()
    rec = _Recorder()
    schedule = arrival_schedule_ns(settings, arrival)
    idle: list[HttpConnection] = [await HttpConnection.open(host, port) for _ in range(min(16, max_connections))]
    conns = list(idle)
    stop = asyncio.Event()
    t0 = time.monotonic_ns()
    warm_end = t0 + int(settings.warmup_s * 1e9)
    end = warm_end + int(settings.duration_s * 1e9)
    cpu0, wall0 = time.process_time(), time.monotonic()
    pending: set[asyncio.Task] = set()
    check = codec.check

    async def one(scheduled: int) -> None:
        if idle:
            conn = idle.pop()
        elif len(conns) < max_connections:
            try:
                conn = await HttpConnection.open(host, port)
            except OSError:
                rec.add(scheduled, time.monotonic_ns(), time.monotonic_ns(), CONNECTION)
                return
            conns.append(conn)
        else:  # every connection busy: the send waits, and its latency still counts from `scheduled`
            while not idle:
                await asyncio.sleep(0)
            conn = idle.pop()
        sent = time.monotonic_ns()
        try:
            status, body = await conn.request(request, sent)
            code = check(status, body)
        except TimeoutError:
            code = TIMEOUT
        except (ConnectionError, OSError):
            code = CONNECTION
        rec.add(scheduled, sent, time.monotonic_ns(), code)
        if conn.transport is not None and conn.waiter is None:
            idle.append(conn)
        else:
            conns.remove(conn)

    guard = asyncio.ensure_future(_watchdog(conns, int(settings.request_timeout_s * 1e9), stop))
    try:
        for offset in schedule:
            due = t0 + int(offset)
            delay = due - time.monotonic_ns()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            task = asyncio.ensure_future(one(due))
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(pending, timeout=settings.request_timeout_s + DRAIN_GRACE_S)
    finally:
        stop.set()
        guard.cancel()
        for task in pending:
            task.cancel()
        for conn in conns:
            if conn.transport is not None:
                conn.transport.close()
    return _finish(rec, t0, warm_end, end, cpu0, wall0)


def _finish(rec: _Recorder, t0: int, warm_end: int, end: int, cpu0: float, wall0: float) -> Recording:
    def rel(a: array) -> np.ndarray:
        return np.frombuffer(a, dtype=np.int64) - t0

    return Recording(
        t0_ns=0, warmup_end_ns=warm_end - t0, end_ns=end - t0,
        scheduled_ns=rel(rec.scheduled), sent_ns=rel(rec.sent), done_ns=rel(rec.done),
        codes=np.frombuffer(rec.codes, dtype=np.int8).copy(),
        generator_cpu_s=time.process_time() - cpu0, wall_s=time.monotonic() - wall0,
    )
