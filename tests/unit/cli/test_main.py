"""The command line through `main()` (tasks/cli/main.py): `doctor` on this machine (every finding printed, and
as a command) and `plan` (the cells of a suite, a bad field named; nothing run)."""

from __future__ import annotations

import json
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


def test_plan_lists_the_cells_of_a_suite_and_names_a_bad_field(tmp_path, monkeypatch, capsys):
    import tasks.plan.suites

    (tmp_path / "tiny.yaml").write_text("models: [mlp]\nformats: [onnx]\nservers: [custom, triton]\n"
                                        "concurrencies: [1, 8]\n")
    (tmp_path / "broken.yaml").write_text("models: [mlp]\nconcurrencies: [0]\n")
    monkeypatch.setattr(tasks.plan.suites, "SUITES_DIR", tmp_path)
    assert main(["plan", "--suite", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "plan of suite tiny: 1 conversions, 2 server sessions, 4 cells (nothing run)" in out
    assert "mlp.onnx.triton.process.cpu.b1.concurrency8" in out
    assert main(["plan", "--suite", "tiny", "--conf", '{"concurrencies": [2]}', "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["suite"] == "tiny" and [c["load"] for s in plan["sessions"] for c in s["cells"]] == [2.0, 2.0]
    assert main(["plan", "--suite", "broken"]) == 2
    assert "concurrencies=0" in capsys.readouterr().err
    assert main(["plan", "--suite", "missing"]) == 2
    assert "suite='missing': must be one of ['broken', 'tiny']" in capsys.readouterr().err
    assert main(["plan", "--conf", '{"concurency": [1]}']) == 2
    assert "concurency=[1]: is not a Param" in capsys.readouterr().err
    assert main(["plan", "--conf", "{not json"]) == 2
