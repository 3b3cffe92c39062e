"""The gRPC engine: the closed and open loops of `http_engine.py` over grpc.aio channels (any gRPC codec).

The request is the codec's serialized message, encoded once and sent as is on the codec's unary-unary method
(`Codec.grpc_method`: KServe v2 ModelInfer, TorchServe Predictions, TF Serving Predict) without serializers
(bytes in, bytes out: no protobuf is built per request). Per call it records the same flat
arrays as the HTTP engine (scheduled send, actual send, completion, error kind), so the `Recording` it
returns is summarized, merged across workers and persisted unchanged.

Closed loop: `concurrency` calls always in flight, each issued when the previous one of its slot completed;
latency from the actual send. Open loop: calls due on the seeded schedule of `engine.arrival_schedule_ns`,
at most `settings.max_connections` in flight (a due call waits in a backlog for a free slot); latency from
the scheduled send. The calls are spread round-robin over `channel_count` channels, each its own HTTP/2
connection.

Stop rules, as in `http_engine.py`: the measured time ends `duration_s` after the warm-up, or earlier at a window
boundary when `stop_when_stable` holds. Every call carries a deadline of `request_timeout_s` from its scheduled
send (an expired one counts as a timeout; one that waited in the backlog that long is given up unsent); in-flight
calls get at most `request_timeout_s` + DRAIN_GRACE_S after the measured time, then are cancelled and counted as
timeouts; due calls never sent by then count as not_sent.
"""

from __future__ import annotations

import asyncio
import math
import time
from array import array
from time import monotonic_ns

import grpc
import numpy as np

from tasks.loadgen.http_engine import (
    DRAIN_GRACE_S,
    NS,
    RECONNECT_PAUSE_S,
    OnWindow,
    StartAt,
    _Driver,
    _Scheduled,
    arrival_schedule_ns,
)
from tasks.loadgen.protocols.base import CONNECTION, TIMEOUT, Codec
from tasks.loadgen.recording import NO_SLOT, Recording
from tasks.loadgen.settings import LoadSettings

STREAMS_PER_CHANNEL = 16  # concurrent calls per channel (HTTP/2 connection) before another channel is opened
MAX_CHANNELS = 8
MIN_CALL_TIMEOUT_NS = 1_000_000  # a call taken from the backlog just before its deadline still goes out
CONNECT_TIMEOUT_S = 10.0  # every channel must be connected within this before the load point starts
CHANNEL_OPTIONS = (
    ("grpc.use_local_subchannel_pool", 1),  # each channel its own connection, not one shared subchannel
    ("grpc.enable_retries", 0),  # a failed call is recorded, never retried behind our back
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
)


def channel_count(in_flight: int) -> int:
    """Channels for at most `in_flight` concurrent calls: one per STREAMS_PER_CHANNEL, up to MAX_CHANNELS."""
    return max(1, min(MAX_CHANNELS, math.ceil(in_flight / STREAMS_PER_CHANNEL)))


class _GrpcDriver(_Driver):
    """The recording arrays, clock bounds and stability rule of `_Driver`, with calls instead of connections."""

    def __init__(self, host: str, port: int, codec: Codec, settings: LoadSettings, channels: int) -> None:
        super().__init__(host, port, codec, settings, 0)
        self.channels = [grpc.aio.insecure_channel(f"{host}:{port}", options=CHANNEL_OPTIONS)
                         for _ in range(channels)]
        self.calls = [channel.unary_unary(codec.grpc_method) for channel in self.channels]
        self.next_call = 0
        self.in_flight: dict[int, tuple[int, int]] = {}  # call number -> (scheduled, sent)
        self.call_number = 0
        self.tasks: set[asyncio.Task] = set()

    async def connect(self) -> None:
        ready = asyncio.gather(*(channel.channel_ready() for channel in self.channels))
        try:
            await asyncio.wait_for(ready, CONNECT_TIMEOUT_S)
        except TimeoutError as exc:
            raise ConnectionError(f"gRPC endpoint {self.host}:{self.port}: channels must connect within "
                                  f"{CONNECT_TIMEOUT_S:.0f} s before load starts") from exc

    def pick_call(self):
        call = self.calls[self.next_call]
        self.next_call = (self.next_call + 1) % len(self.calls)
        return call

    async def issue(self, call, scheduled: int | None, slot: int = NO_SLOT) -> int:
        """One call; records it and returns its error kind. `scheduled` None: the closed loop's actual send."""
        number = self.call_number = self.call_number + 1
        sent = monotonic_ns()
        scheduled = sent if scheduled is None else scheduled
        self.in_flight[number] = (scheduled, sent, slot)
        detail = ""
        try:
            # bounded from the scheduled send, as the HTTP engine's requests (a late send gets what is left)
            left_ns = scheduled + self.timeout_ns - sent
            body = await call(self.request, timeout=max(left_ns, MIN_CALL_TIMEOUT_NS) / NS)
            code = self.check(0, body)
            if code:
                detail = f"unexpected response message ({len(body)} bytes)"
            else:
                self.response_bytes += len(body)
        except grpc.aio.AioRpcError as exc:
            code = self.check(exc.code().value[0], b"")
            detail = f"gRPC {exc.code().name}: {exc.details()}"
        done = monotonic_ns()
        del self.in_flight[number]
        self.record(scheduled, sent, done, code, slot)
        if code:
            self.note_error(code, detail, done)
        return code

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run_until_bound(self) -> None:
        """Wait for the loop to finish, bounded; raise the first unexpected error of a task."""
        bound_s = (self.end - monotonic_ns()) / NS + self.settings.request_timeout_s + DRAIN_GRACE_S
        try:
            await asyncio.wait_for(asyncio.shield(self.finished), timeout=max(0.0, bound_s))
        except TimeoutError:
            pass  # bounded: whatever is still in flight is counted as a timeout by `close`

    async def close(self) -> None:
        """Count the calls still in flight as timeouts, cancel them and close every channel."""
        now = monotonic_ns()
        for scheduled, sent, slot in self.in_flight.values():
            self.record(scheduled, sent, now, TIMEOUT, slot)
        if self.in_flight:
            self.note_error(TIMEOUT, "still in flight at the load point's bound", now)
        self.in_flight.clear()
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(channel.close() for channel in self.channels), return_exceptions=True)
        errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)]
        if errors:
            raise errors[0]

    def fail(self, exc: BaseException) -> None:
        if self.finished is not None and not self.finished.done():
            self.finished.set_exception(exc)


class _GrpcClosedLoop(_GrpcDriver):
    def __init__(self, host: str, port: int, codec: Codec, settings: LoadSettings, concurrency: int) -> None:
        super().__init__(host, port, codec, settings, channel_count(concurrency))
        self.concurrency = concurrency
        self.running = 0
        self.slots = array("i")

    async def slot(self, call, index: int) -> None:
        """One of the `concurrency` slots: the next call as soon as the previous one completed."""
        try:
            while monotonic_ns() < self.end:
                if await self.issue(call, None, index) == CONNECTION:
                    await asyncio.sleep(RECONNECT_PAUSE_S)  # the server is gone: do not spin on refusals
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who raises it after clean-up
            self.fail(exc)
        finally:
            self.running -= 1
            if self.running == 0 and self.finished is not None and not self.finished.done():
                self.finished.set_result(None)

    def start(self) -> None:
        self.running = self.concurrency
        for index in range(self.concurrency):
            self.spawn(self.slot(self.pick_call(), index))


async def closed_loop(host: str, port: int, codec: Codec, settings: LoadSettings, *,
                      start_ns: StartAt = None, concurrency: int | None = None,
                      on_window: OnWindow = None) -> Recording:
    """`concurrency` (default: the settings') calls always in flight."""
    driver = _GrpcClosedLoop(host, port, codec, settings, concurrency or settings.concurrency)
    driver.on_window = on_window
    cpu0, wall0 = time.process_time(), time.monotonic()
    try:
        await driver.connect()
        cpu0, wall0 = await driver.begin(start_ns)
        driver.start()
        await driver.run_until_bound()
    finally:
        await driver.close()
    return driver.recording(cpu0, wall0)


class _GrpcOpenLoop(_Scheduled, _GrpcDriver):
    def __init__(self, host: str, port: int, codec: Codec, settings: LoadSettings, schedule_ns: np.ndarray) -> None:
        super().__init__(host, port, codec, settings, channel_count(settings.max_connections))
        self.init_schedule(schedule_ns)
        self.active = 0
        self.max_in_flight = settings.max_connections

    def issue_due(self, due: int) -> None:
        if self.active < self.max_in_flight:
            self.active += 1
            self.spawn(self.serve(self.pick_call(), due))
        else:
            self.backlog.append(due)

    async def serve(self, call, due: int) -> None:
        """One in-flight slot: the due call, then the backlog's oldest (or the next due) while any is waiting."""
        try:
            while due:
                await self.issue(call, due)
                due = self.take_due(monotonic_ns())
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who raises it after clean-up
            self.fail(exc)
        finally:
            self.active -= 1
        self.finish_if_idle()

    def finish_if_idle(self) -> None:
        if (self.finished is not None and not self.finished.done() and self.active == 0
                and self.schedule_done()):
            self.finished.set_result(None)


async def open_loop(host: str, port: int, codec: Codec, settings: LoadSettings, arrival: str | None = None, *,
                    start_ns: StartAt = None, schedule_ns: np.ndarray | None = None,
                    on_window: OnWindow = None) -> Recording:
    """Call on schedule with at most `settings.max_connections` calls in flight."""
    schedule = arrival_schedule_ns(settings, arrival) if schedule_ns is None else schedule_ns
    driver = _GrpcOpenLoop(host, port, codec, settings, schedule)
    driver.on_window = on_window
    cpu0, wall0 = time.process_time(), time.monotonic()
    try:
        await driver.connect()
        cpu0, wall0 = await driver.begin(start_ns)
        driver.start_schedule()
        await driver.run_until_bound()
    finally:
        driver.stop_schedule()
        await driver.close()
    return driver.recording(cpu0, wall0)
