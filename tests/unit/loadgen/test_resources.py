"""A server's footprint (tasks/loadgen/resources.py): a real process tree's and a real cgroup's counts."""

from __future__ import annotations

import psutil


def test_a_real_process_trees_footprint_and_a_real_cgroups_counts():
    import os
    import subprocess
    import sys

    from tasks.loadgen.resources import CgroupReader, read_footprint
    from tasks.serve.launchers.base import LaunchHandle

    script = ("import subprocess, sys, threading, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
              "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(3)]\n"
              "print('up', flush=True); time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        footprint = read_footprint(LaunchHandle(launcher="process", run_id="t", cell_id="c", pid=proc.pid))
        assert footprint.processes == 2 and footprint.threads >= 5  # 4 threads in the parent, 1 in its child
        assert footprint.rss_mb > 1 and footprint.source == "process tree"
    finally:
        for pid in [c.pid for c in psutil.Process(proc.pid).children(recursive=True)] + [proc.pid]:
            os.kill(pid, 9)  # the two processes this test started, by PID
        proc.wait(timeout=10)
    assert read_footprint(LaunchHandle(launcher="process", run_id="t", cell_id="c", pid=proc.pid)) is None
    reader = CgroupReader.for_pid(os.getpid())  # this test's own cgroup, as a container's is read
    if reader is not None:
        assert reader.processes() >= 1 and reader.threads() >= reader.processes()
