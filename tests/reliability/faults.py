"""Driving one server session through the real pipeline steps, with a fault injected while it measures."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tasks.pipeline import cleanup_run_dir, convert_step, run_dir, start_run, sweep_leftovers
from tasks.serve.launchers.base import LaunchHandle, recorded_handles
from tests.dagrun import HOST_NOT_JUDGED, NO_CONTROL


def conf(bucket: str, **overrides) -> dict:
    base = {"suite": "smoke", "models": ["mlp"], "formats": ["onnx"], "servers": ["custom"], "concurrencies": [1, 2],
            "duration_s": 4.0, "warmup_s": 0.5, "window_s": 1.0, "request_timeout_s": 2.0,
            "s3_bucket": bucket, "s3_prefix": "eval", "aws_conn_id": "serving_eval_s3", "ready_timeout_s": 60,
            **HOST_NOT_JUDGED, **NO_CONTROL}
    return {**base, **overrides}


def measure_one_session(params: dict, conn, run_id: str) -> tuple[dict, dict]:
    """(session output, planned) of the run's first session, measured in this process like the DAG's task."""
    from tasks.measure.session import measure_session
    from tasks.pipeline import run_plan

    planned = start_run(params, run_id=run_id, logical_date="2026-11-30T02:00:00+00:00", conn=conn)
    try:
        plan = run_plan(planned)
        converted = [convert_step(c, log=lambda _: None) for c in plan.conversions]
        return measure_session(plan.sessions[0], converted, planned["run"], plan.config), planned
    finally:
        sweep_leftovers(run_id)
        cleanup_run_dir(run_id)


def load_started(run_id: str, nth: int = 1, timeout_s: float = 120.0) -> None:
    """Wait until the run's `nth` load point has begun (each makes, then removes, a load-* folder in the run's
    folder; the points last seconds, so polling every 20 ms sees each one)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen |= {p.name for p in Path(run_dir(run_id)).glob("load-*")}
        if len(seen) >= nth:
            return
        time.sleep(0.02)
    raise TimeoutError(f"load point {nth} of run {run_id} did not begin within {timeout_s} s")


def live_handle(run_id: str) -> LaunchHandle:
    (handle,) = recorded_handles(run_id)
    return handle


def inject(run_id: str, action: Callable[[LaunchHandle], None], *, after_s: float, nth: int = 1) -> threading.Thread:
    """In the background: once load point `nth` began, wait `after_s` and apply `action` to the live server."""
    def run() -> None:
        load_started(run_id, nth)
        time.sleep(after_s)
        action(live_handle(run_id))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def kill(handle: LaunchHandle) -> None:
    os.kill(handle.pid, signal.SIGKILL)


def hang(handle: LaunchHandle) -> None:
    os.killpg(handle.pgid, signal.SIGSTOP)
