"""Progress lines: one as each stage, server session, load point, longer look, duet pair and size round ends, and a
heartbeat inside a long look, so nothing a user runs is silent for minutes.

    emit("point", "resnet50/onnx/triton concurrency 4 (binary)", "12.9 req/s, p99 82 ms, ok", 10.2,
         left="cell 3 of 12 of the session", ends_s=clock.end_s)
    # progress point: resnet50/onnx/triton concurrency 4 (binary): 12.9 req/s, p99 82 ms, ok, in 10 s;
    #   cell 3 of 12 of the session; the night ends about 09:31 UTC

    with listening() as events:       # a test (or a caller) sees every event as it is emitted
        run_pipeline(...)

Each line goes to stdout, flushed, starting with PREFIX: the Airflow task log of the step that emitted it has it,
and `make demo`, which runs `airflow dags test` with its output in a log file, echoes the lines that start with
PREFIX to the terminal as they come (a bar where a terminal is attached: tasks/cli/local.py). A line says what
ended, its key figure, how long it took, what is left, and, in a budgeted night, when the night is planned to end.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

PREFIX = "progress"
KINDS = ("stage", "session", "point", "look", "pair", "round", "heartbeat")
HEARTBEAT_S = 30.0  # inside a look longer than this, a line every HEARTBEAT_S


@dataclass(frozen=True)
class Event:
    """One thing that ended (or, a heartbeat, is still going): its kind (one of KINDS), what it was, its key figure,
    its seconds, what is left, and when the night is planned to end (epoch seconds; None without a budget)."""

    kind: str
    what: str
    figure: str = ""
    seconds: float | None = None
    left: str = ""
    ends_s: float | None = None

    def line(self) -> str:
        text = f"{PREFIX} {self.kind}: {self.what}"
        done = ", ".join(p for p in (self.figure, "" if self.seconds is None else f"in {self.seconds:.0f} s") if p)
        parts = [text + (f": {done}" if done else ""), self.left]
        if self.ends_s is not None:
            parts.append("the night ends about " + datetime.fromtimestamp(self.ends_s, UTC).strftime("%H:%M UTC"))
        return "; ".join(p for p in parts if p)


_listeners: list[Callable[[Event], object]] = []


def emit(kind: str, what: str, figure: str = "", seconds: float | None = None, left: str = "",
         ends_s: float | None = None) -> Event:
    """Print one progress line and hand the event to every listener."""
    if kind not in KINDS:
        raise ValueError(f"progress kind {kind!r}: must be one of {', '.join(KINDS)}")
    event = Event(kind, what, figure, None if seconds is None else round(seconds, 1), left, ends_s)
    print(event.line(), flush=True)
    for listener in list(_listeners):
        listener(event)
    return event


@contextmanager
def listening() -> Iterator[list[Event]]:
    """Every event emitted inside the block, in order."""
    events: list[Event] = []
    _listeners.append(events.append)
    try:
        yield events
    finally:
        _listeners.remove(events.append)


def stage(name: str, figure: Callable[[Any], str] | None = None) -> Callable:
    """A step that emits a `stage` event when it returns: `name`, `figure(its result)`, its seconds."""

    def wrap(step: Callable) -> Callable:
        @functools.wraps(step)
        def run(*args, **kwargs):
            begin = time.monotonic()
            out = step(*args, **kwargs)
            emit("stage", name, figure(out) if figure else "", time.monotonic() - begin)
            return out

        return run

    return wrap


class Heartbeat:
    """A `heartbeat` event at most every HEARTBEAT_S while something long runs (`beat()` from its own progress, e.g.
    each measured window of a look): "still measuring ...: 60 of 120 s"."""

    def __init__(self, what: str, total_s: float, every_s: float = HEARTBEAT_S) -> None:
        self.what, self.total_s, self.every_s = what, total_s, every_s
        self.begin = self.last = time.monotonic()

    def beat(self, figure: str = "") -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        emit("heartbeat", f"still measuring {self.what}", figure,
             left=f"{now - self.begin:.0f} of {self.total_s:.0f} s")
