"""Pacers (tasks/loadgen/pacer.py): a timer fires at its time, repeats on request and closes; Linux gets a timerfd."""

from __future__ import annotations

import asyncio
import sys

import pytest


@pytest.mark.parametrize("pacer_class", ["TimerfdPacer", "LoopTimerPacer"])
def test_pacer_wakes_at_its_time_repeats_on_request_and_closes(pacer_class):
    """One wake-up per `arm`, never before its time; `every` repeats until `arm` replaces it; `pause` and
    `close` end them."""
    import os
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

    from tasks.loadgen.pacer import LoopTimerPacer, TimerfdPacer, make_pacer

    async def kind() -> type:
        p = make_pacer(lambda: None)
        p.close()
        return type(p)

    assert asyncio.run(kind()) is (TimerfdPacer if sys.platform.startswith("linux") else LoopTimerPacer)
