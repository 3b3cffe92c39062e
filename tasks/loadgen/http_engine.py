"""The engine: issue requests over lean keep-alive connections and record each one.

Per request it appends monotonic nanosecond timestamps (scheduled send, actual send, completion) and an
error kind to flat typed arrays; nothing is judged here. Closed loop: `concurrency` connections, each
writing its next request from the previous response's callback; latency is measured from the actual send.
Open loop: requests are due on a seeded schedule (constant or Poisson) and go out on an idle connection of a
bounded pool (or wait in a backlog for one while the pool grows); latency is measured from the *scheduled*
send, so a stalled server cannot hide its stall (no coordinated omission). The schedule's wake-ups come from
`pacer.py` (a timerfd on Linux), so between sends the generator sleeps instead of spinning the event loop:
on one host it must not take CPU from the server it measures.

Stop rules, all written down here: the measured time ends `duration_s` after the warm-up, or earlier at a
window boundary when `stop_when_stable` is set and the stability rule of `recording.window_stable` holds
after at least `min_windows` windows. In-flight requests then get at most `request_timeout_s` + DRAIN_GRACE_S.
Every request is bounded by `request_timeout_s` from its scheduled send (closed loop: its send), the same start
its latency is measured from: one in flight past it is aborted and counted as a timeout, one still waiting in
the open loop's backlog then is given up unsent (`not_sent`), one sent late gets what is left of it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from array import array
from collections.abc import Awaitable, Callable
from time import monotonic_ns

import numpy as np

from tasks.loadgen.http import HttpConnection
from tasks.loadgen.pacer import Pacer, make_pacer
from tasks.loadgen.protocols.base import CONNECTION, ERROR_KINDS, NOT_SENT, TIMEOUT, Codec
from tasks.loadgen.recording import (
    FIRST_ERROR_MAX_CHARS,
    LATE_START_NS,
    NO_SLOT,
    Recording,
    window_counts,
    window_stable,
)
from tasks.loadgen.settings import LoadSettings

WATCHDOG_PERIOD_S = 0.05
DRAIN_GRACE_S = 1.0  # after the measured time, in-flight requests get this long on top of the request timeout
RECONNECT_PAUSE_S = 0.05
OPEN_LOOP_INITIAL_CONNECTIONS = 16
OPEN_LOOP_MAX_OPENING = 8  # connections being opened at once while a backlog waits
MIN_WAKE_GAP_NS = 100_000  # open loop: one schedule wake-up per 100 us at most; a due send waits at most this
NS = 1_000_000_000
StartAt = int | Callable[[], Awaitable[int]] | None  # the common start of a load point's workers
OnWindow = Callable[[dict], None] | None  # receives each measured window's figures as it ends (progress lines)


class _Driver:
    """State shared by both loops: the recording arrays, the connections, the clock bounds and the stop rule."""

    def __init__(self, host: str, port: int, codec: Codec, settings: LoadSettings, start_ns: int) -> None:
        self.host, self.port, self.settings = host, port, settings
        self.request = codec.request_bytes()
        self.check = codec.check
        self.request_bytes = codec.payload_size(self.request)
        self.response_bytes = 0  # the payload bytes of every successful response, summed
        self.scheduled, self.sent, self.done = array("q"), array("q"), array("q")
        self.codes = array("b")
        self.slots: array | None = None  # the closed loop's slot of each request (recording.Recording.slots)
        self.first_error, self.first_error_ns = "", -1
        self.conns: list[HttpConnection] = []
        self.t0 = start_ns
        self.warm_end = start_ns + int(settings.warmup_s * NS)
        self.end = self.warm_end + int(settings.duration_s * NS)
        self.stopped_early = False
        self.generator_late = 0  # open loop: see Recording.generator_late
        self.finished: asyncio.Future | None = None
        self.timeout_ns = int(settings.request_timeout_s * NS)
        self.window_ns = int(settings.window_s * NS)
        self.on_window: OnWindow = None
        self.reported = 0  # the last window whose progress figures went to on_window

    def record(self, scheduled: int, sent: int, done: int, code: int, slot: int = NO_SLOT) -> None:
        self.scheduled.append(scheduled)
        self.sent.append(sent)
        self.done.append(done)
        self.codes.append(code)
        if self.slots is not None:
            self.slots.append(slot)

    def note_error(self, code: int, detail: str, at_ns: int) -> None:
        """Keep the message of the first failed request (what the row's reason quotes); later ones only count."""
        if not self.first_error:
            self.first_error = f"{ERROR_KINDS.get(code, code)}: {detail}"[:FIRST_ERROR_MAX_CHARS]
            self.first_error_ns = at_ns - self.t0

    def note_response_error(self, code: int, status: int, body: bytes, at_ns: int) -> None:
        if not self.first_error:
            text = body[:300].decode(errors="replace").strip()
            self.note_error(code, f"HTTP {status}: {text}" if status else f"unparsable response: {text}", at_ns)

    def on_lost(self, conn: HttpConnection, exc: BaseException | None) -> None:
        if conn.busy:
            conn.busy = False
            now = monotonic_ns()
            self.record(conn.scheduled_ns, conn.sent_ns, now, CONNECTION, conn.slot)
            self.note_error(CONNECTION, f"connection lost while a request was in flight ({exc or 'closed by peer'})",
                            now)
        if conn in self.conns:
            self.conns.remove(conn)
            self.replace(conn)

    def replace(self, conn: HttpConnection) -> None:
        """A connection was lost; subclasses decide whether to open another."""

    async def watchdog(self) -> None:
        """Abort requests in flight longer than the timeout (one periodic scan, not a timer per request)."""
        while True:
            await asyncio.sleep(WATCHDOG_PERIOD_S)
            now = monotonic_ns()
            for conn in list(self.conns):
                # from the scheduled send in the open loop (the user's wait, as the latency); closed: the send
                if conn.busy and now - (conn.scheduled_ns or conn.sent_ns) > self.timeout_ns:
                    conn.busy = False
                    self.record(conn.scheduled_ns, conn.sent_ns, now, TIMEOUT, conn.slot)
                    self.note_error(TIMEOUT, f"no response within {self.settings.request_timeout_s:g} s "
                                             "(request_timeout_s)", now)
                    conn.abort()  # connection_lost follows: the connection leaves the pool and is replaced

    async def begin(self, start_ns: StartAt) -> tuple[float, float]:
        """Wait for the load point's common start, arm the stop rule; return the CPU and wall clocks then."""
        _start_clock(self, await _wait_until(start_ns))
        self.finished = asyncio.get_running_loop().create_future()
        if self.settings.stop_when_stable:
            self._schedule_window(1)
        if self.on_window is not None:
            self._schedule_report(1)
        return time.process_time(), time.monotonic()

    def _schedule_report(self, k: int) -> None:
        boundary = self.warm_end + k * self.window_ns
        if boundary <= self.end:
            delay_s = max(0.0, (boundary - monotonic_ns()) / NS) + 0.002
            asyncio.get_running_loop().call_later(delay_s, self.report_window, k)

    def report_window(self, k: int) -> None:
        """At the end of measured window `k`: its successes, errors and latency p50/p99 (from the actual send in
        the closed loop, the scheduled one in the open loop), for the progress lines. Recording is not touched."""
        if self.end < self.warm_end + k * self.window_ns or k <= self.reported:
            return
        self.reported = k
        lo, hi = self.warm_end + (k - 1) * self.window_ns, self.warm_end + k * self.window_ns
        done = np.frombuffer(self.done, dtype=np.int64)
        codes = np.frombuffer(self.codes, dtype=np.int8)[:len(done)]
        starts = np.frombuffer(self.scheduled if len(self.scheduled) == len(done) else self.sent, dtype=np.int64)
        inside = (done >= lo) & (done < hi)
        ok = inside & (codes == 0)
        latency_ms = (done[ok] - starts[:len(done)][ok]) / 1e6
        self.on_window({"window": k, "ok": int(ok.sum()), "errors": int((inside & (codes != 0)).sum()),
                        "p50_ms": float(np.percentile(latency_ms, 50)) if latency_ms.size else None,
                        "p99_ms": float(np.percentile(latency_ms, 99)) if latency_ms.size else None})
        self._schedule_report(k + 1)

    def stability_check(self, k: int) -> None:
        """At the end of measured window `k` (1-based): stop early when the stability rule holds."""
        if self.end <= self.warm_end + k * self.window_ns - 1:
            return
        counts = window_counts(np.array(self.done, dtype=np.int64), np.array(self.codes, dtype=np.int8),
                               self.warm_end, self.window_ns, k)
        if k >= self.settings.min_windows and window_stable(counts / self.settings.window_s,
                                                             self.settings.stability_pct):
            self.end = self.warm_end + k * self.window_ns
            self.stopped_early = True
            self.on_stop()
        else:
            self._schedule_window(k + 1)

    def _schedule_window(self, k: int) -> None:
        boundary = self.warm_end + k * self.window_ns
        if boundary > self.end:
            return
        loop = asyncio.get_running_loop()
        loop.call_later(max(0.0, (boundary - monotonic_ns()) / NS) + 0.002, self.stability_check, k)

    def on_stop(self) -> None:
        """The measured time was cut short; subclasses stop issuing."""

    def finish_if_idle(self) -> None:
        if self.finished is not None and not self.finished.done() and not any(c.busy for c in self.conns):
            self.finished.set_result(None)

    def report_remaining(self) -> None:
        """The windows whose report was still due when the load point ended (the last one's timer fires 2 ms
        after the end, when a fast server's last responses may already be in and the loop about to close)."""
        if self.on_window is None:
            return
        k = self.reported + 1
        while self.warm_end + k * self.window_ns <= self.end:
            self.report_window(k)
            k += 1

    def recording(self, cpu0: float, wall0: float) -> Recording:
        self.report_remaining()

        def rel(a: array) -> np.ndarray:
            return np.frombuffer(a, dtype=np.int64) - self.t0

        wall = time.monotonic() - wall0
        cpu = time.process_time() - cpu0
        return Recording(
            t0_ns=self.t0, warmup_end_ns=self.warm_end - self.t0, end_ns=self.end - self.t0,
            scheduled_ns=rel(self.scheduled), sent_ns=rel(self.sent), done_ns=rel(self.done),
            codes=np.frombuffer(self.codes, dtype=np.int8).copy(),
            generator_cpu_s=cpu, wall_s=wall, worker_cpu_pct=(100.0 * cpu / wall if wall > 0 else 0.0,),
            stopped_early=self.stopped_early, generator_late=self.generator_late,
            slots=None if self.slots is None else np.frombuffer(self.slots, dtype=np.int32).copy(),
            first_error=self.first_error, first_error_ns=self.first_error_ns,
            request_bytes=self.request_bytes, response_bytes=self.response_bytes,
        )

    def close_all(self) -> None:
        """Close every connection; a request still in flight at the load point's bound counts as a timeout."""
        conns, self.conns = self.conns, []
        now = monotonic_ns()
        for conn in conns:
            if conn.busy:
                conn.busy = False
                self.record(conn.scheduled_ns, conn.sent_ns, now, TIMEOUT, conn.slot)
                self.note_error(TIMEOUT, "still in flight at the load point's bound", now)
            conn.close()


class _ClosedLoop(_Driver):
    """`concurrency` slots, each one connection with one request always in flight. A lost connection is
    reopened for its slot; every refused attempt is recorded as a connection error (sent = done = the attempt),
    so a dead server shows as errors, not as a quiet gap."""

    def __init__(self, host: str, port: int, codec: Codec, settings: LoadSettings, start_ns: int) -> None:
        super().__init__(host, port, codec, settings, start_ns)
        self.slots = array("i")

    def on_response(self, conn: HttpConnection, status: int, body: bytes) -> None:
        done = monotonic_ns()
        code = self.check(status, body)
        self.sent.append(conn.sent_ns)
        self.done.append(done)
        self.codes.append(code)
        self.slots.append(conn.slot)
        if code:
            self.note_response_error(code, status, body, done)
        else:
            self.response_bytes += len(body)
        if done < self.end:
            conn.send(self.request, 0)
        elif self.finished is not None:
            self.finish_if_idle()

    def replace(self, conn: HttpConnection) -> None:
        if monotonic_ns() < self.end:
            asyncio.get_running_loop().create_task(self._reconnect(conn.slot))
        else:
            self.finish_if_idle()

    async def _reconnect(self, slot: int) -> None:
        while monotonic_ns() < self.end:
            try:
                conn = await HttpConnection.open(self.host, self.port, self, slot)
            except OSError as exc:
                now = monotonic_ns()
                self.record(now, now, now, CONNECTION, slot)
                self.note_error(CONNECTION, f"reconnecting to {self.host}:{self.port} failed: {exc}", now)
                await asyncio.sleep(RECONNECT_PAUSE_S)
                continue
            self.conns.append(conn)
            conn.send(self.request, 0)
            return
        self.finish_if_idle()

    def record(self, scheduled: int, sent: int, done: int, code: int, slot: int = NO_SLOT) -> None:
        self.sent.append(sent)  # closed loop: scheduled == sent, filled in at the end
        self.done.append(done)
        self.codes.append(code)
        self.slots.append(slot)

    def recording(self, cpu0: float, wall0: float) -> Recording:
        self.scheduled = self.sent
        return super().recording(cpu0, wall0)


async def closed_loop(host: str, port: int, codec: Codec, settings: LoadSettings, *,
                      start_ns: StartAt = None, concurrency: int | None = None,
                      on_window: OnWindow = None) -> Recording:
    """`concurrency` (default: the settings') connections, each with one request always in flight."""
    n_conns = concurrency or settings.concurrency
    driver = _ClosedLoop(host, port, codec, settings, 0)
    driver.on_window = on_window
    driver.conns = [await HttpConnection.open(host, port, driver, slot) for slot in range(n_conns)]
    cpu0, wall0 = await driver.begin(start_ns)
    loop = asyncio.get_running_loop()
    guard = loop.create_task(driver.watchdog())
    try:
        for conn in list(driver.conns):
            conn.send(driver.request, 0)
        bound_s = (driver.end - monotonic_ns()) / NS + settings.request_timeout_s + DRAIN_GRACE_S
        try:
            await asyncio.wait_for(asyncio.shield(driver.finished), timeout=bound_s)
        except TimeoutError:
            pass  # bounded: whatever is still in flight is left out (the watchdog counted the timeouts)
    finally:
        guard.cancel()
        driver.close_all()
    return driver.recording(cpu0, wall0)


class _Scheduled:
    """The open loop's schedule, shared by the HTTP and gRPC engines (mixed into a `_Driver`).

    Due times are absolute CLOCK_MONOTONIC ns, fixed when the load point starts. `tick` (woken by a pacer)
    hands every due request to `issue_due`, which sends it or backlogs it; a completion may take the next
    due one straight away (`take_due`), so at high rates most requests go out without a wake-up. The pacer
    wakes at the next due time when that is at least MIN_WAKE_GAP_NS away, else every MIN_WAKE_GAP_NS: at
    most one wake-up per gap, each sending all that came due (a send is then at most the gap plus the
    wake-up latency late, and `schedule_lag_ms_p99` shows it).
    """

    t0: int
    warm_end: int
    end: int
    generator_late: int
    timeout_ns: int
    backlog: collections.deque[int]
    record: Callable[..., None]
    note_error: Callable[[int, str, int], None]

    def init_schedule(self, schedule_ns: np.ndarray) -> None:
        self.schedule = np.asarray(schedule_ns, dtype=np.int64)
        self.dues: list[int] = []
        self.next_index = 0
        self.last = 0
        self.backlog = collections.deque()
        self.pacer: Pacer | None = None

    def start_schedule(self) -> None:
        """After `begin`: fix the due times within the measured bound and issue the first ones."""
        self.dues = (self.schedule[self.schedule < self.end - self.t0] + self.t0).tolist()
        self.last = len(self.dues)
        self.pacer = make_pacer(self.tick)
        self.tick()

    def issue_due(self, due: int) -> None:
        """Send the request due at `due` now, or backlog it."""
        raise NotImplementedError

    def after_tick(self) -> None:
        """After a tick's sends (the HTTP engine grows its pool for a backlog here)."""

    def tick(self) -> None:
        now = monotonic_ns()
        if self.backlog:
            self.expire_backlog(now)  # also while no completion comes to take from the backlog
        dues, i, n, issue = self.dues, self.next_index, self.last, self.issue_due
        while i < n:
            due = dues[i]
            if due > now:
                break
            if now - due > LATE_START_NS and due >= self.warm_end:
                self.generator_late += 1
            issue(due)
            i += 1
        self.next_index = i
        self.after_tick()
        if i < n:
            if dues[i] - now >= MIN_WAKE_GAP_NS:
                self.pacer.arm(dues[i])  # sparse: wake for this one
            elif not self.pacer.period_ns:
                self.pacer.every(MIN_WAKE_GAP_NS)  # dense: wake every gap, for all that came due
        else:
            self.pacer.pause()  # nothing left to schedule (completions still drain the backlog)
            self.finish_if_idle()

    def take_due(self, now: int) -> int:
        """The backlog's oldest due time, else the next scheduled one if it is due by `now`; 0 if none. Backlogged
        requests whose timeout has passed since their scheduled send are given up unsent first (`expire_backlog`)."""
        if self.backlog:
            self.expire_backlog(now)
            if self.backlog:
                return self.backlog.popleft()
        i = self.next_index
        if i < self.last:
            due = self.dues[i]
            if due <= now:
                self.next_index = i + 1
                if now - due > LATE_START_NS and due >= self.warm_end:
                    self.generator_late += 1
                return due
        return 0

    def expire_backlog(self, now: int) -> None:
        """Give up, unsent, every backlogged request older than the timeout: its user stopped waiting at its
        scheduled send + `request_timeout_s`. Sending it late would only make an overloaded server work for no one
        (with a 1 s timeout and a 1.5 x burst, those stale sends kept a one-worker server saturated through the
        whole 0.5 x stretch after the burst); it counts as `not_sent` at the time it waited."""
        backlog, timeout_ns = self.backlog, self.timeout_ns
        expired = 0
        while backlog and now - backlog[0] >= timeout_ns:
            self.record(backlog.popleft(), now, now, NOT_SENT)
            expired += 1
        if expired:
            self.note_error(NOT_SENT, f"{expired} due requests waited {timeout_ns / NS:g} s (request_timeout_s) "
                                      "for a free connection and were given up unsent: every connection was busy",
                            now)

    def on_stop(self) -> None:
        self.last = self.next_index

    def schedule_done(self) -> bool:
        return not self.backlog and self.next_index >= self.last

    def stop_schedule(self) -> None:
        """Stop waking; count every due request never sent (backlogged or not yet issued) as not sent."""
        if self.pacer is not None:
            self.pacer.close()
            self.pacer = None
        now = monotonic_ns()
        unissued = self.dues[self.next_index:self.last]  # the generator never reached these
        self.generator_late += sum(1 for due in unissued if due >= self.warm_end)
        for due in [*self.backlog, *unissued]:
            self.record(due, now, now, NOT_SENT)  # scheduled, never sent within the bound: counted, not dropped
        if self.backlog or unissued:
            self.note_error(NOT_SENT, f"{len(self.backlog) + len(unissued)} due requests found no free connection "
                                      "before the load point's bound", now)
        self.backlog.clear()
        self.next_index = self.last


class _OpenLoop(_Scheduled, _Driver):
    def __init__(self, host: str, port: int, codec: Codec, settings: LoadSettings, start_ns: int,
                 schedule_ns: np.ndarray) -> None:
        super().__init__(host, port, codec, settings, start_ns)
        self.init_schedule(schedule_ns)
        self.idle: list[HttpConnection] = []
        self.opening = 0
        self.max_connections = settings.max_connections

    def issue_due(self, due: int) -> None:
        if self.idle:
            self.idle.pop().send(self.request, due)
        else:
            self.backlog.append(due)

    def after_tick(self) -> None:
        if self.backlog:
            self._grow_pool()

    def _grow_pool(self) -> None:
        """Open connections for a backlog: up to the pool bound, OPEN_LOOP_MAX_OPENING at a time (opening
        hundreds at once after a stall costs the generator more than the stall did)."""
        spare = min(self.max_connections - len(self.conns), OPEN_LOOP_MAX_OPENING) - self.opening
        if spare > 0:
            loop = asyncio.get_running_loop()
            for _ in range(min(len(self.backlog), spare)):
                self.opening += 1
                loop.create_task(self._grow())

    async def _grow(self) -> None:
        try:
            conn = await HttpConnection.open(self.host, self.port, self)
        except OSError:
            return
        finally:
            self.opening -= 1
        self.conns.append(conn)
        self._next(conn, monotonic_ns())

    def _next(self, conn: HttpConnection, now: int) -> None:
        due = self.take_due(now)
        if due:
            conn.send(self.request, due)
        else:
            self.idle.append(conn)
            if self.next_index >= self.last:
                self.finish_if_idle()

    def on_response(self, conn: HttpConnection, status: int, body: bytes) -> None:
        done = monotonic_ns()
        code = self.check(status, body)
        self.scheduled.append(conn.scheduled_ns)
        self.sent.append(conn.sent_ns)
        self.done.append(done)
        self.codes.append(code)
        if code:
            self.note_response_error(code, status, body, done)
        else:
            self.response_bytes += len(body)
        self._next(conn, done)

    def replace(self, conn: HttpConnection) -> None:
        if conn in self.idle:
            self.idle.remove(conn)
        if self.backlog:
            self._grow_pool()
        if self.next_index >= self.last:
            self.finish_if_idle()

    def finish_if_idle(self) -> None:
        if self.schedule_done():
            super().finish_if_idle()


def arrival_schedule_ns(settings: LoadSettings, arrival: str | None = None, *, seed: int | None = None,
                        stride: int = 1, offset: int = 0) -> np.ndarray:
    """Send times (ns from start) over the warm-up plus measured time.

    Constant: every `stride`-th slot from `offset` of the stream at `settings.load` (so N workers with
    stride N and offsets 0..N-1 together send exactly the single stream). Poisson: gaps of a stream at
    `settings.load / stride` drawn from `seed` (N such streams add up to a Poisson stream at the full rate).
    """
    arrival = arrival or settings.arrival
    total_s = settings.warmup_s + settings.duration_s
    if arrival == "poisson":
        rate = settings.load / stride
        count = int(total_s * rate * 1.2) + 64
        gaps = np.random.default_rng(settings.seed if seed is None else seed).exponential(1.0 / rate, count)
        times_ns = np.round((np.cumsum(gaps) - gaps[0]) * NS)
    else:
        slots = np.arange(offset, int(total_s * settings.load) + 1, stride, dtype=np.float64)
        times_ns = np.round(slots * NS / settings.load)
    return times_ns[times_ns < total_s * NS].astype(np.int64)


async def open_loop(host: str, port: int, codec: Codec, settings: LoadSettings, arrival: str | None = None, *,
                    start_ns: StartAt = None, schedule_ns: np.ndarray | None = None,
                    on_window: OnWindow = None) -> Recording:
    """Send on schedule over a pool of at most `settings.max_connections` connections."""
    schedule = arrival_schedule_ns(settings, arrival) if schedule_ns is None else schedule_ns
    driver = _OpenLoop(host, port, codec, settings, 0, schedule)
    driver.on_window = on_window
    try:
        for _ in range(min(OPEN_LOOP_INITIAL_CONNECTIONS, settings.max_connections)):
            conn = await HttpConnection.open(host, port, driver)
            driver.conns.append(conn)
            driver.idle.append(conn)
        cpu0, wall0 = await driver.begin(start_ns)
        guard = asyncio.get_running_loop().create_task(driver.watchdog())
        try:
            driver.start_schedule()
            bound_s = (driver.end - monotonic_ns()) / NS + settings.request_timeout_s + DRAIN_GRACE_S
            try:
                await asyncio.wait_for(asyncio.shield(driver.finished), timeout=bound_s)
            except TimeoutError:
                pass
        finally:
            guard.cancel()
            driver.stop_schedule()
    finally:
        driver.close_all()
    return driver.recording(cpu0, wall0)


async def _wait_until(start: StartAt) -> int | None:
    """Wait for the common start: an absolute CLOCK_MONOTONIC ns, or a barrier that returns one."""
    start_ns = await start() if callable(start) else start
    if start_ns is not None:
        delay = (start_ns - monotonic_ns()) / NS
        if delay > 0:
            await asyncio.sleep(delay)
    return start_ns


def _start_clock(driver: _Driver, start_ns: int | None) -> None:
    t0 = start_ns if start_ns is not None else monotonic_ns()
    shift = t0 - driver.t0
    driver.t0, driver.warm_end, driver.end = t0, driver.warm_end + shift, driver.end + shift
