"""Ctrl-C and SIGTERM as a stop request that cannot be lost.

Python runs a signal handler in the main thread between two bytecodes, wherever the thread is. When that is
inside a fork hook (every subprocess started with `preexec_fn` runs the logging module's `_releaseLock`), a
finalizer or a weakref callback, CPython prints "Exception ignored in ..." and carries on: the
KeyboardInterrupt the handler raised is lost. A SIGTERMed `tasks.cli run` then went on to measure for 30 s,
publish and exit 0 (once in CI; 1 in 35 tries here with the signal sent as a load point's workers started).

So the handler also records the request, and the loops a run spends its time in call `check()`, which raises
it again. Where no handler is installed (a task inside Airflow, whose own supervisor handles signals),
`check()` does nothing.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

_received: int | None = None


def _request_stop(signum: int, frame: object) -> None:
    global _received
    _received = signum
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def stop_on_signals(signums: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """While inside: each of `signums` raises KeyboardInterrupt now and at every later `check()`."""
    global _received
    _received = None
    previous = {signum: signal.signal(signum, _request_stop) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received = None


def stop_requested() -> bool:
    return _received is not None


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested (again, in case the handler's own raise was lost).
    Call it on the way forward, never from clean-up code: clean-ups must run to the end."""
    if _received is not None:
        raise KeyboardInterrupt(f"signal {_received} (stop requested)")


def wait(proc: subprocess.Popen, deadline: float | None = None, slice_s: float = 0.5) -> int | None:
    """`proc`'s exit code, or None at `deadline` (time.monotonic(); None: no limit). A requested stop is raised
    between slices of the wait, so a lost interrupt ends it within `slice_s`."""
    while True:
        check()
        timeout = slice_s if deadline is None else max(0.01, min(slice_s, deadline - time.monotonic()))
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                return None
