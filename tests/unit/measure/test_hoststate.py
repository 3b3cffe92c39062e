"""The host's state over a load point (tasks/measure/hoststate.py): other work, the server's CPUs, pressure, the
files it reads, a real probe, a duet's sides; the run config's host-state params. A contended point re-measured:
tests/unit/measure/test_point.py; the judgement of a state: tests/unit/validate/test_outcome.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from tasks.core.errors import ConfigError
from tasks.measure.hoststate import (
    CpuTime,
    HostStateProbe,
    Reading,
    host_state,
    read_loadavg,
    read_pressure_some_us,
    read_proc_stat,
    thread_waits_ns,
)
from tasks.plan.config import RunConfig

TICK = os.sysconf("SC_CLK_TCK")


def _cpus(**lines: tuple[float, float]) -> dict[str, CpuTime]:
    return {name: CpuTime(busy, steal) for name, (busy, steal) in lines.items()}


def _reading(t: float, cpus: dict, own: float = 0.0, self_s: float = 0.0, server: float | None = 0.0,
             waits: dict | None = None, **extra) -> Reading:
    return Reading(t_s=t, cpus=cpus, own_s=own, self_s=self_s, server_cpu_s=server,
                   server_waits_ns={} if waits is None else waits, **extra)


def test_other_work_is_the_hosts_busy_time_less_ours_and_the_servers():
    # 2 CPUs over 10 s (20 CPU-s): 14 busy (1 of it steal), 3 ours (generator), 5 the server's -> 6 others'
    a = _reading(0.0, _cpus(cpu=(100, 10), cpu0=(50, 5), cpu1=(50, 5)), own=1.0, self_s=0.5, server=2.0)
    b = _reading(10.0, _cpus(cpu=(113, 11), cpu0=(57.5, 5.5), cpu1=(55.5, 5.5)), own=4.0, self_s=0.5, server=7.0,
                 load_avg_1m=1.5)
    state = host_state(a, b)
    assert state.cores == 2 and state.server_cores == 2 and state.window_s == pytest.approx(10.0)
    assert state.neighbour_cpu_pct == pytest.approx(100 * 6 / 20)
    assert state.steal_pct == pytest.approx(100 * 1 / 20)
    assert state.server_cpu_share_pct == pytest.approx(100 * 5 / 20)
    assert state.server_cpus_neighbour_pct == state.neighbour_cpu_pct  # unpinned: the host's figure
    assert state.load_avg_1m == 1.5 and state.sources["host_cpu"] == "/proc/stat"


def test_a_pinned_server_s_cpus_less_its_own_time_and_the_measuring_process_are_other_work_there():
    # server on cpu1, generator pinned to cpu0; over 4 s cpu1 was busy 3.6 s: 1.0 the server's, 0.2 this process's
    a = _reading(0.0, _cpus(cpu=(0, 0), cpu0=(0, 0), cpu1=(0, 0)), own=0.0, self_s=0.0, server=0.0,
                 waits={(9, 9): 0, (9, 10): 0})
    b = _reading(4.0, _cpus(cpu=(7.6, 0), cpu0=(4.0, 0), cpu1=(3.6, 0)), own=3.2, self_s=0.2, server=1.0,
                 waits={(9, 9): 800_000_000, (9, 10): 200_000_000, (9, 11): 100_000_000})
    state = host_state(a, b, server_cpus=(1,), generator_cpus=(0,))
    assert state.server_cores == 1
    assert state.server_cpu_share_pct == pytest.approx(25.0)  # 1.0 s of 4 s of one CPU
    assert state.server_cpus_neighbour_pct == pytest.approx(100 * (3.6 - 1.0 - 0.2) / 4)
    assert state.server_cpu_wait_pct == pytest.approx(100 * 1.1 / 4)  # a thread born during the point counts whole
    assert state.neighbour_cpu_pct == pytest.approx(100 * (7.6 - 3.2 - 1.0) / 8)
    # the generator sharing the server's CPUs: all of our 3.2 s may have run there, which leaves nothing to others
    shared = host_state(a, b, server_cpus=(1,), generator_cpus=(1,))
    assert shared.server_cpus_neighbour_pct == 0.0


def test_a_source_this_host_lacks_reads_unknown():
    a = Reading(0.0, None, 0.0, 0.0, server_cpu_s=None, server_waits_ns=None)
    b = Reading(2.0, None, 1.0, 1.0, server_cpu_s=None, server_waits_ns=None)
    state = host_state(a, b)
    assert state.neighbour_cpu_pct is None and state.steal_pct is None and state.server_cpu_share_pct is None
    assert state.server_cpu_wait_pct is None and state.host_cpu_pressure_pct is None
    assert set(state.sources.values()) == {"unknown"}
    assert all(v is None for k, v in state.row_fields().items() if k != "load_avg_1m")
    # the server's CPU unknown (a container on a remote engine): other work cannot be told from the server's
    cpus_a, cpus_b = _cpus(cpu=(0, 0), cpu0=(0, 0)), _cpus(cpu=(1, 0), cpu0=(1, 0))
    assert host_state(_reading(0, cpus_a, server=None), _reading(1, cpus_b, server=None)).neighbour_cpu_pct is None


def test_pressure_is_the_share_of_the_window_some_task_waited():
    a = _reading(0.0, _cpus(cpu=(0, 0), cpu0=(0, 0)), pressure_us=1_000_000, server_pressure_us=0)
    b = _reading(2.0, _cpus(cpu=(1, 0), cpu0=(1, 0)), pressure_us=1_500_000, server_pressure_us=200_000)
    state = host_state(a, b)
    assert state.host_cpu_pressure_pct == pytest.approx(25.0) and state.server_cpu_pressure_pct == pytest.approx(10.0)


def test_the_files_it_reads(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal: busy is user + nice + system + irq + softirq
    stat.write_text(f"cpu  {3 * TICK} {TICK} {2 * TICK} 9000 10 0 {TICK} {TICK} 0 0\n"
                    f"cpu0 {3 * TICK} {TICK} {2 * TICK} 9000 10 0 {TICK} {TICK} 0 0\nintr 1 2 3\n")
    cpus = read_proc_stat(stat)
    assert set(cpus) == {"cpu", "cpu0"} and cpus["cpu"] == CpuTime(7.0, 1.0)
    assert read_proc_stat(tmp_path / "missing") is None
    pressure = tmp_path / "cpu"
    pressure.write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\nfull avg10=0.00 avg60=0.00 "
                        "avg300=0.00 total=0\n")
    assert read_pressure_some_us(pressure) == 123456 and read_pressure_some_us(tmp_path / "none") is None
    (tmp_path / "loadavg").write_text("2.33 2.35 2.06 2/114 18936\n")
    assert read_loadavg(tmp_path / "loadavg") == 2.33
    for tid, wait in ((41, 500), (42, 700)):
        task = tmp_path / "41" / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "schedstat").write_text(f"999 {wait} 3\n")
    assert thread_waits_ns(41, tmp_path) == {(41, 41): 500, (41, 42): 700}
    assert thread_waits_ns(77, tmp_path) is None  # no such process (or no schedstat)


@pytest.mark.parametrize(("params", "field"), [({"max_neighbour_pct": 101}, "max_neighbour_pct"),
                                               ({"max_neighbour_pct": -1}, "max_neighbour_pct"),
                                               ({"quiet_wait_s": -1}, "quiet_wait_s"),
                                               ({"quiet_wait_s": 601}, "quiet_wait_s"),
                                               ({"quiet_wait_s": True}, "quiet_wait_s")])
def test_the_params_are_checked_naming_the_field(params, field):
    with pytest.raises(ConfigError, match=field):
        RunConfig.from_params(params)
    defaults = RunConfig()
    assert defaults.max_neighbour_pct == 25.0 and 0 < defaults.quiet_wait_s <= 600


SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass\n"


def test_a_real_probe_counts_a_spinning_child_of_this_process_as_other_work_and_the_server_as_the_server():
    """Two children of this test spin on one CPU: one is the "server" the probe is told about, the other a
    neighbour (a child of the measuring process is not ours unless it serves). Their CPU times, read by psutil,
    are what the probe must attribute."""
    cpu = max(os.sched_getaffinity(0))
    server = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)])
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)])
    try:
        time.sleep(0.3)
        procs = {p.pid: psutil.Process(p.pid) for p in (server, spinner)}
        before = {pid: sum(p.cpu_times()[:2]) for pid, p in procs.items()}
        with HostStateProbe(SimpleNamespace(pid=server.pid, container_id="", ports={}), server_cpus=(cpu,)) as probe:
            time.sleep(1.5)
        after = {pid: sum(p.cpu_times()[:2]) for pid, p in procs.items()}
    finally:
        for proc in (server, spinner):
            proc.kill()
            proc.wait()
    state = probe.result
    server_s, spinner_s = after[server.pid] - before[server.pid], after[spinner.pid] - before[spinner.pid]
    assert state.server_cpu_share_pct == pytest.approx(100 * server_s / state.window_s / state.server_cores, abs=10)
    host_s = state.window_s * state.cores
    assert state.neighbour_cpu_pct >= 100 * spinner_s / host_s - 5  # the spinner is other work (and maybe more)
    assert state.server_cpu_wait_pct is not None and state.server_cpu_wait_pct > 10  # it shared its CPU
    assert state.sources["server_cpu"] == "process tree" and state.sources["server_wait"] == "schedstat"


def test_each_side_of_a_duet_records_the_host_state_counting_the_other_server_as_ours(tmp_path):
    from tasks.measure import duet

    cpu = max(os.sched_getaffinity(0))
    servers = [subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)]) for _ in range(2)]
    try:
        handles = [SimpleNamespace(pid=p.pid, container_id="", ports={}) for p in servers]
        sides = [SimpleNamespace(label="reference"), SimpleNamespace(label="candidate")]
        lives = {side.label: SimpleNamespace(handle=h) for side, h in zip(sides, handles, strict=True)}
        settings = SimpleNamespace(server_cpus=(cpu,), generator_cpus=())
        other = psutil.Process(servers[1].pid)
        # the same window read three ways: each side of the pair, each with the other server as ours; and the
        # reference's server without the other
        with duet.pair_probes(sides, lives, settings) as probes, HostStateProbe(handles[0], (cpu,)) as theirs:
            before = sum(other.cpu_times()[:2])
            time.sleep(1.0)
            other_s = sum(other.cpu_times()[:2]) - before
    finally:
        for proc in servers:
            proc.kill()
            proc.wait()
    ours = probes["reference"].result
    host = ours.row_fields()
    assert set(host) >= {"neighbour_cpu_pct", "server_cpu_share_pct", "server_cpus_neighbour_pct"}
    assert 10 < host["server_cpu_share_pct"] < 90  # the two "servers" shared the CPU
    difference = theirs.result.server_cpus_neighbour_pct - ours.server_cpus_neighbour_pct
    assert difference == pytest.approx(100 * other_s / ours.window_s, abs=10)
    candidate = probes["candidate"].result  # the same window: the two sides read the same other work
    assert candidate.server_cpus_neighbour_pct == pytest.approx(ours.server_cpus_neighbour_pct, abs=5)
    assert 10 < candidate.server_cpu_share_pct < 90
