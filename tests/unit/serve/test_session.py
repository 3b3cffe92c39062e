"""Readiness polling: a server's start-up time is resolved to a few percent, not to a fixed poll interval."""

from __future__ import annotations

from tasks.serve import session
from tasks.serve.session import READY_POLL_MAX_S, READY_POLL_MIN_S, _wait_ready, ready_poll_interval


class VirtualClock:
    """Time that passes only when the waiting loop sleeps: the test reads the loop's resolution, never how
    promptly this machine's scheduler wakes a sleeper (a figure: benchmarks/startup_resolution.py)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class ReadyAt:
    """A server that turns ready at a known moment. A stand-in on purpose: no real server's ready moment is
    known to the test to the millisecond, and what is tested is the waiting loop, not a server."""

    name = "ready-at"
    ready_path = "/v2/health/ready"

    def __init__(self, at: float, clock: VirtualClock) -> None:
        self.at = at
        self.clock = clock
        self.polls = 0

    def is_ready(self, endpoint) -> bool:
        self.polls += 1
        return self.clock.monotonic() >= self.at


class Running:
    """A launcher whose server never exits (the loop asks before every poll)."""

    def exit_code(self, handle) -> int | None:
        return None

    def log_tail(self, handle) -> str:
        return ""


def test_poll_interval_is_a_fraction_of_the_wait_within_bounds():
    assert ready_poll_interval(0.0) == READY_POLL_MIN_S
    assert ready_poll_interval(1.0) == 0.05
    assert ready_poll_interval(60.0) == READY_POLL_MAX_S


def test_a_start_up_of_a_third_of_a_second_is_measured_to_within_a_few_milliseconds(monkeypatch):
    """With a fixed 0.1 s poll a 0.31 s start-up reads 0.4 s (+30 %): one poll later at random makes a start-up
    "regress" by 30 % on unchanged nights. The loop must see it ready within one short poll."""
    clock = VirtualClock()
    monkeypatch.setattr(session, "time", clock)
    started = clock.now
    server = ReadyAt(started + 0.31, clock)
    _wait_ready(server, None, Running(), None, timeout_s=5.0)
    late = clock.now - started - 0.31
    assert 0 <= late <= ready_poll_interval(0.31) < 0.03, late
    assert server.polls > 10
