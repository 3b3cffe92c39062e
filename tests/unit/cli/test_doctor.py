"""`python -m tasks.cli doctor` (tasks/cli/doctor.py) on this machine: every finding printed, and as a command."""

from __future__ import annotations

import os
import subprocess
import sys

from tasks.cli.main import main
from tasks.measure import hostcheck
from tasks.serve.budget import host_cpus
from tests.dagrun import REPO
from tests.unit.measure.test_hostcheck import _no_counters


def test_doctor_prints_every_finding_on_this_machine_and_says_when_there_are_no_counters(monkeypatch, capsys):
    monkeypatch.setattr(hostcheck, "_perf_event_open", _no_counters)  # as on this VM: no PMU
    assert main(["doctor", "--sample-s", "0.2"]) == 0
    out = capsys.readouterr().out
    for name in ("cpus", "isolation", "governor", "turbo", "smt", "cpu_limit", "memory_limit", "load", "busy",
                 "hw_counters", "memory", "disk"):
        assert f" {name} " in out, name
    assert "no hardware performance counters" in out and "a run may measure here" in out
    assert main(["doctor", "--sample-s", "0", "--conf", f'{{"server_cpus": {len(host_cpus())}}}']) == 1


def test_doctor_runs_as_a_command():
    """The real perf_event_open: this VM has no PMU, so the doctor says there are no hardware counters here."""
    proc = subprocess.run([sys.executable, "-m", "tasks.cli", "doctor", "--sample-s", "0.5"], capture_output=True,
                          text=True, cwd=REPO, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    fd, _ = hostcheck._perf_event_open()
    if fd >= 0:  # a host with a PMU
        os.close(fd)
        assert "available (perf_event_open opened PERF_COUNT_HW_INSTRUCTIONS)" in proc.stdout
    else:
        assert "no hardware performance counters (perf_event_open:" in proc.stdout
    print(proc.stdout)
