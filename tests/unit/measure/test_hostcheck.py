"""The pre-flight check of a host (tasks/measure/hostcheck.py): each finding from fake /sys and /proc files, and
the hard limits the plan step refuses a run on. The command: tests/unit/cli/test_doctor.py."""

from __future__ import annotations

import errno
import os

import pytest

from tasks.measure import hostcheck
from tasks.measure.hostcheck import HostPaths, HostRefused, check_host, hard_limits, host_findings
from tasks.pipeline import plan_run
from tasks.plan.config import RunConfig
from tasks.serve.budget import host_cpus
from tasks.store.s3 import ConnectionFields


def _write(root, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _proc(root, *, available_kb: int, loadavg: str, cgroup: str, mountinfo: str) -> None:
    _write(root, "proc/meminfo", f"MemTotal: 16000000 kB\nMemAvailable: {available_kb} kB\n")
    _write(root, "proc/loadavg", f"{loadavg} 1/100 4242\n")
    _write(root, "proc/self/cgroup", cgroup)
    _write(root, "proc/self/mountinfo", mountinfo)
    _write(root, "proc/pressure/cpu", "some avg10=3.50 avg60=2.00 avg300=1.00 total=1000\n")
    _write(root, "proc/sys/kernel/perf_event_paranoid", "3\n")


def _by_name(findings) -> dict:
    return {f.name: f for f in findings}


def _no_counters():
    return -1, errno.ENOENT


def test_a_tuned_host_reads_ok(tmp_path):
    cpu = "sys/devices/system/cpu"
    _write(tmp_path, f"{cpu}/online", "0-3\n")
    _write(tmp_path, f"{cpu}/isolated", "2-3\n")
    _write(tmp_path, f"{cpu}/nohz_full", "2-3\n")
    for n in range(4):
        _write(tmp_path, f"{cpu}/cpu{n}/cpufreq/scaling_governor", "performance\n")
    _write(tmp_path, f"{cpu}/intel_pstate/no_turbo", "1\n")
    _write(tmp_path, f"{cpu}/smt/active", "0\n")
    _write(tmp_path, f"{cpu}/smt/control", "off\n")
    cgroup = tmp_path / "cg"
    _write(cgroup, "eval.slice/cpu.max", "max 100000\n")
    _write(cgroup, "eval.slice/memory.max", "max\n")
    _proc(tmp_path, available_kb=12_000_000, loadavg="0.20 0.30 0.25", cgroup="0::/eval.slice\n",
          mountinfo=f"30 1 0:26 / {cgroup} rw,nosuid - cgroup2 cgroup2 rw\n")
    paths = HostPaths(sys=tmp_path / "sys", proc=tmp_path / "proc", disk=tmp_path, usable_cpus=(0, 1, 2, 3))
    found = _by_name(host_findings(paths, open_event=lambda: (os.open(os.devnull, os.O_RDONLY), 0)))
    assert found["cpus"].value == "4 online (0-3), 4 usable here (0-3)" and found["cpus"].severity == "ok"
    assert found["isolation"].severity == "ok" and "isolated: 2-3; nohz_full: 2-3" == found["isolation"].value
    assert found["governor"].value == "performance" and found["turbo"].value == "off"
    assert found["smt"].value == "off (off)" and found["cpu_limit"].severity == "ok"
    assert found["memory_limit"].value == "none" and found["load"].severity == "ok"
    assert "CPU pressure (some, 10 s) 3.50 %" in found["load"].value
    assert found["hw_counters"].severity == "ok" and found["memory"].severity == "ok"
    assert all(f.severity in ("ok", "note") for f in found.values()), [f for f in found.values()]
    assert all(f.effect for f in found.values())  # every finding says what it does to the numbers


def test_a_busy_limited_vm_warns_and_refuses_what_cannot_work(tmp_path):
    cpu = "sys/devices/system/cpu"
    _write(tmp_path, f"{cpu}/online", "0-3\n")
    _write(tmp_path, f"{cpu}/isolated", "\n")
    _write(tmp_path, f"{cpu}/cpu0/cpufreq/scaling_governor", "powersave\n")
    _write(tmp_path, f"{cpu}/cpufreq/boost", "1\n")
    _write(tmp_path, f"{cpu}/smt/active", "1\n")
    cgroup = tmp_path / "cg"
    _write(cgroup, "cpu/docker/abc/cpu.cfs_quota_us", "150000\n")
    _write(cgroup, "cpu/docker/abc/cpu.cfs_period_us", "100000\n")
    _write(cgroup, "memory/docker/abc/memory.limit_in_bytes", f"{2 * 2**30}\n")
    _proc(tmp_path, available_kb=300 * 1024, loadavg="9.00 8.00 7.00",
          cgroup="4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n",
          mountinfo=f"30 1 0:26 / {cgroup}/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"
                    f"31 1 0:27 / {cgroup}/memory rw - cgroup cgroup rw,memory\n")
    paths = HostPaths(sys=tmp_path / "sys", proc=tmp_path / "proc", disk=tmp_path, usable_cpus=(0, 1, 2, 3))
    found = _by_name(host_findings(paths, open_event=_no_counters))
    assert found["isolation"].severity == "note" and "nohz_full: not in this kernel" in found["isolation"].value
    assert found["governor"].severity == "warning" and "follows the load" in found["governor"].effect
    assert found["turbo"].value == "on" and found["smt"].severity == "warning"
    assert found["cpu_limit"].severity == "warning" and found["cpu_limit"].value.startswith("1.5 CPUs")
    assert found["memory_limit"].value.startswith("2.0 GiB")
    assert found["load"].severity == "warning" and "9.00 8.00 7.00" in found["load"].value
    assert found["memory"].severity == "refused"
    assert "no hardware performance counters (perf_event_open: ENOENT" in found["hw_counters"].value
    with pytest.raises(HostRefused, match="memory"):
        check_host(None, paths, open_event=_no_counters)


def test_counters_not_allowed_say_why(tmp_path):
    _proc(tmp_path, available_kb=10**7, loadavg="0 0 0", cgroup="", mountinfo="")
    (finding,) = hostcheck.counter_findings(HostPaths(proc=tmp_path / "proc"), lambda: (-1, errno.EACCES))
    assert "not allowed (kernel.perf_event_paranoid=3)" in finding.value


def test_a_run_whose_budget_leaves_the_generator_no_cpu_is_refused_before_any_work():
    everything = len(host_cpus())  # the server takes every CPU: with pin_cpus nothing is left for the generator
    (refused,) = hard_limits(RunConfig(server_cpus=everything))
    assert refused.severity == "refused" and "pin_cpus=false" in refused.effect
    assert hard_limits(RunConfig(server_cpus=everything, pin_cpus=False)) == []
    with pytest.raises(HostRefused, match="cpus_for_the_run"):
        plan_run({"server_cpus": everything, "control_cell": "none"}, ConnectionFields("c", None, None, {}))
