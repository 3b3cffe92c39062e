"""ProcessLauncher.stop also ends workers that left the process group (setsid), like BentoML's circus workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from tasks.runtimes.proctree import create_time_of
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
                          create_time=create_time_of(proc.pid), workdir=str(tmp_path))
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


def test_sweep_of_all_runs_ends_leftovers_of_dead_tasks_only(tmp_path):
    """A server whose starting task died is a leftover; one whose task still runs is not (another live run)."""
    import json
    import subprocess
    import sys

    import psutil

    from tasks.runtimes.ports import free_port
    from tasks.serve.base import RunSpec
    from tasks.serve.launchers.process import ProcessLauncher
    from tests.dagrun import REPO

    def spec() -> RunSpec:
        port = free_port()
        return RunSpec(runtime="custom", argv=("python", "-m", "http.server", str(port), "--bind", "127.0.0.1"),
                       ports={"http": port})

    orphan_code = """
import json, os, sys
from pathlib import Path
from tasks.serve.base import RunSpec
from tasks.serve.launchers.process import ProcessLauncher
spec = RunSpec(**json.loads(sys.argv[1]))
work = Path(sys.argv[2]); work.mkdir()
handle = ProcessLauncher().start(spec, run_id="crashed-run", cell_id="c", workdir=work, log_path=work / "log")
print(handle.pid, flush=True)
os._exit(0)  # the task dies without stopping its server
"""
    orphan_spec = spec()
    out = subprocess.run([sys.executable, "-c", orphan_code, json.dumps({**orphan_spec.__dict__}), str(tmp_path / "o")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    orphan_pid = int(out.stdout.split()[-1])  # after the venv build's lines, when this test built it
    launcher = ProcessLauncher()
    (tmp_path / "m").mkdir()
    mine = launcher.start(spec(), run_id="live-run", cell_id="c", workdir=tmp_path / "m", log_path=tmp_path / "m.log")
    try:
        swept = launcher.sweep()  # what a run's setup task does: no run id
        assert [h.pid for h in swept] == [orphan_pid]
        assert not psutil.pid_exists(orphan_pid) or psutil.Process(orphan_pid).status() == psutil.STATUS_ZOMBIE
        assert launcher.exit_code(mine) is None  # the live task's server still runs
    finally:
        launcher.stop(mine)


def test_a_process_we_started_stays_ours_when_the_wall_clock_is_stepped(monkeypatch):
    """psutil's create_time is the start since boot plus the boot time as the wall clock reads it now; a VM's clock
    stepped after a pause moves it, and a dockerd `make test` started was once left running because it no longer
    matched. The identity is kept in seconds since boot. Linux only: the step is simulated by moving psutil's
    reading of the boot time, as a stepped clock moves /proc/stat's btime."""
    import psutil._pslinux as pslinux

    from tasks.runtimes.proctree import is_running

    started = create_time_of(os.getpid())
    real = pslinux.boot_time
    monkeypatch.setattr(pslinux, "boot_time", lambda: real() + 7.0)
    assert is_running(os.getpid(), started)
    assert not is_running(os.getpid(), started - 1.0)
