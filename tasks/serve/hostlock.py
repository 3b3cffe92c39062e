"""One server session at a time per host, whoever starts it: a file lock held for the whole session.

Airflow's one-slot pool already serialises the DAG's measuring tasks, but a CLI run, a second Airflow
deployment or a test on the same host does not go through that pool. Every server session takes this
host-wide lock first (an exclusive `flock` in the cache folder, released by the kernel when its holder dies,
so a killed task never leaves it held); a second session waits for it and says whose session it waits for.
The lock is per host *name* (`SERVING_EVAL_HOST`, default the machine's hostname), so two measuring hosts
simulated on one machine (two Celery workers, each standing for a host) each have their own.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tasks.core.metadata import host_name
from tasks.core.names import safe_component
from tasks.core.paths import cache_root

WAIT_LOG_EVERY_S = 30.0


@contextmanager
def host_lock(run_id: str, session_id: str, log=print) -> Iterator[None]:
    """Hold this host's session lock while the block runs (waiting for another session to end first)."""
    path = cache_root() / "locks" / f"host-{safe_component(host_name())}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            started = last = time.monotonic()
            log(f"host lock {path}: waiting for the server session of {_holder(path)} to end")
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.2)
                    if time.monotonic() - last > WAIT_LOG_EVERY_S:
                        last = time.monotonic()
                        log(f"host lock: still waiting ({last - started:.0f} s) for {_holder(path)}")
        try:
            lock.seek(0)
            lock.truncate()
            lock.write(json.dumps({"run_id": run_id, "session_id": session_id, "pid": os.getpid()}))
            lock.flush()
            yield
        finally:
            lock.seek(0)
            lock.truncate()
            fcntl.flock(lock, fcntl.LOCK_UN)


def _holder(path) -> str:
    try:
        data = json.loads(open(path).read() or "{}")
    except (OSError, ValueError):
        return "another run"
    if not data:
        return "another run"
    return f"run {data.get('run_id')} (session {data.get('session_id')}, pid {data.get('pid')})"
