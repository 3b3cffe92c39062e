"""ProcessLauncher.stop also ends workers that left the process group (setsid), like BentoML's circus workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from tasks.serve.launchers.base import LaunchHandle
from tasks.serve.launchers.process import ProcessLauncher

# The leader starts a worker that calls setsid() (leaving the group, as circus does) and ignores SIGTERM,
# then both wait: a group-only stop would leave the worker running.
LEADER = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
worker = subprocess.Popen([sys.executable, "-c",
    "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_stop_kills_descendants_that_left_the_group(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=tmp_path)
    worker_pid = int(proc.stdout.readline())
    deadline = time.monotonic() + 10
    while os.getsid(worker_pid) != worker_pid and time.monotonic() < deadline:  # wait for its setsid()
        time.sleep(0.02)
    assert os.getpgid(worker_pid) != proc.pid, "the worker should have left the leader's group"
    handle = LaunchHandle(launcher="process", run_id="t-tree", cell_id="tree", pid=proc.pid, pgid=proc.pid,
                          create_time=psutil.Process(proc.pid).create_time(), workdir=str(tmp_path))
    started = time.monotonic()
    try:
        ProcessLauncher().stop(handle, grace_s=0.5)
        stop_s = time.monotonic() - started
        survivors = [pid for pid in (proc.pid, worker_pid) if _running(pid)]
    finally:
        for pid in (worker_pid, proc.pid):  # a failed stop must not leave them behind
            if _running(pid):
                os.kill(pid, 9)
        proc.stdout.close()
    assert survivors == []
    assert stop_s < 10


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
