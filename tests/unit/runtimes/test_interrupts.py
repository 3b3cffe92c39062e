"""A stop request (SIGTERM, Ctrl-C) survives CPython losing the KeyboardInterrupt its handler raised.

The lost interrupt is made here the way CPython loses one: the signal's handler runs inside a finalizer, where
an exception is only printed ("Exception ignored in ..."). In CI it ran inside the logging module's fork hook
while a load point's workers were being started, and a SIGTERMed `tasks.cli run` measured on and exited 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tasks.runtimes import interrupts

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class SignalledInFinalizer:
    """Delivers SIGTERM to this process from inside `__del__`: the handler's KeyboardInterrupt is lost there."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGTERM)


def lose_a_sigterm() -> None:
    SignalledInFinalizer()  # made and finalized at once


def test_a_sigterm_whose_interrupt_was_lost_is_raised_again_by_check():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.stop_on_signals():
        interrupts.check()  # nothing requested yet: goes on
        lose_a_sigterm()  # no KeyboardInterrupt reached this frame ...
        assert interrupts.stop_requested()
        with pytest.raises(KeyboardInterrupt, match="signal 15"):  # ... but the next check raises it
            interrupts.check()
    assert not interrupts.stop_requested()  # the request ends with the command that received it
    assert signal.getsignal(signal.SIGTERM) is before  # and so does the handler


def test_without_the_handler_check_never_raises():
    interrupts.check()
    assert not interrupts.stop_requested()


def test_waiting_for_a_child_ends_on_a_lost_stop():
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with interrupts.stop_on_signals():
            lose_a_sigterm()
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                interrupts.wait(worker)  # no deadline: as `tasks.cli airflow` waits for Airflow
            assert time.monotonic() - started < 20  # not after the child's 30 s
    finally:
        worker.kill()
        worker.wait()


def test_waiting_for_a_child_returns_its_exit_code_or_none_at_the_deadline():
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert interrupts.wait(done, deadline=time.monotonic() + 30) == 3
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.monotonic()
        assert interrupts.wait(slow, deadline=time.monotonic() + 1.0) is None
        assert 0.9 < time.monotonic() - started < 20  # at the deadline, not at the child's exit 30 s later
    finally:
        slow.kill()
        slow.wait()
