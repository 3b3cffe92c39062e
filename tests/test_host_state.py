"""The host's state over a load point (tasks/measure/hoststate.py) and when it makes a point contended
(tasks/validate/outcome.py): the arithmetic on two readings, the files it reads (fake /proc in tmp_path), the rules,
and one real probe with a process of this test spinning beside a "server"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

import tasks.measure.point as point_module
from tasks.core.errors import ConfigError
from tasks.measure.hoststate import (
    CpuTime,
    HostState,
    HostStateProbe,
    Reading,
    host_state,
    read_loadavg,
    read_pressure_some_us,
    read_proc_stat,
    thread_waits_ns,
)
from tasks.plan.cells import Cell
from tasks.plan.config import RunConfig
from tasks.validate.outcome import (
    STARVED_NEIGHBOUR_PCT,
    Contention,
    ServerHealth,
    contended_reason,
    host_quiet,
    judge_host,
    pair_host_flag,
)

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


STARVED = {"neighbour_cpu_pct": 20.0, "steal_pct": 0.0, "server_cpu_share_pct": 24.0, "server_cpu_wait_pct": 19.0,
           "server_cpus_neighbour_pct": 73.0, "server_cores": 1}


def test_other_work_beyond_max_neighbour_pct_makes_a_point_contended():
    busy = {**STARVED, "neighbour_cpu_pct": 62.0, "steal_pct": 4.0, "server_cpus_neighbour_pct": 0.0}
    found = judge_host(busy, 25.0)
    assert found and "other work used 62 % of the host's CPU" in found.reason
    assert "max_neighbour_pct 25" in found.reason and "steal 4 %" in found.reason and found.summary == "other work 62 %"
    assert judge_host({**busy, "neighbour_cpu_pct": 25.0}, 25.0) is None  # "more than"
    assert judge_host(busy, 100.0) is None  # 100: never judged


def test_a_server_starved_on_its_own_cpus_is_contended_whatever_the_hosts_total():
    found = judge_host(STARVED, 25.0)
    assert found and "starved" in found.reason and "73 %" in found.reason
    assert found.summary.startswith("the server got 24 %")  # the host-wide rule did not fire (20 % <= 25 %)
    assert judge_host(STARVED, 100.0) is None


@pytest.mark.parametrize("change", [
    {"server_cpus_neighbour_pct": STARVED_NEIGHBOUR_PCT - 1},  # its CPUs ran only it: it waited for its own threads
    {"server_cpu_wait_pct": 3.0},  # hardly waited
    {"server_cpu_share_pct": 90.0, "server_cpu_wait_pct": 20.0},  # waited little against what it ran
    {"server_cpu_wait_pct": None},  # no schedstat here: unknown breaks no rule
])
def test_not_starved(change):
    assert judge_host({**STARVED, **change}, 25.0) is None


def test_a_server_whose_threads_only_wait_for_each_other_is_not_contended():
    """Eight threads on one CPU: the run queue is long, the CPU is the server's, no other work there."""
    assert judge_host({**STARVED, "server_cpu_share_pct": 97.0, "server_cpu_wait_pct": 400.0,
                       "server_cpus_neighbour_pct": 2.0}, 25.0) is None


def test_quiet_and_the_reason_of_a_point_contended_twice():
    assert host_quiet({"neighbour_cpu_pct": 10.0, "server_cpus_neighbour_pct": 5.0}, 25.0)
    assert not host_quiet({"neighbour_cpu_pct": 30.0, "server_cpus_neighbour_pct": 5.0}, 25.0)
    assert not host_quiet({"neighbour_cpu_pct": 10.0, "server_cpus_neighbour_pct": 60.0}, 25.0)
    assert host_quiet({"neighbour_cpu_pct": None, "server_cpus_neighbour_pct": None}, 25.0)
    first = Contention("other work used 62 % of the host's CPU during the point (more than max_neighbour_pct 25)",
                       "other work 62 %")
    again = Contention("other work used 58 % ...", "other work 58 %")
    assert contended_reason(first, 20.2, True, again) == (
        "other work used 62 % of the host's CPU during the point (more than max_neighbour_pct 25); re-measured "
        "after waiting 20 s: still other work 58 %")
    assert "did not quiet" in contended_reason(first, 30, False, again)


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


def test_a_duet_pair_is_flagged_only_when_its_two_sides_saw_different_host_states():
    def sides(a: dict, b: dict) -> dict:
        return {"reference": {"throughput_rps": 100.0, "host": a}, "candidate": {"throughput_rps": 90.0, "host": b}}

    busy = {"neighbour_cpu_pct": 70.0, "server_cpus_neighbour_pct": 60.0}
    assert pair_host_flag(sides(busy, {**busy, "neighbour_cpu_pct": 66.0})) is None  # a busy host hits both: cancels
    flag = pair_host_flag(sides(busy, {**busy, "server_cpus_neighbour_pct": 20.0}))
    assert flag and "other work on the servers' CPUs 60 % (reference) against 20 % (candidate)" in flag
    assert pair_host_flag(sides({}, {})) is None  # no host state recorded: nothing to tell apart


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


def _state(neighbour: float) -> HostState:
    return HostState(window_s=2.0, cores=2, server_cores=1, neighbour_cpu_pct=neighbour, steal_pct=1.0,
                     server_cpus_neighbour_pct=5.0, server_cpu_share_pct=80.0, server_cpu_wait_pct=2.0,
                     host_cpu_pressure_pct=None, load_avg_1m=1.0)


@pytest.mark.parametrize(("neighbours", "status", "remeasured"), [
    ((5.0,), "ok", False),  # quiet: measured once
    ((62.0, 8.0), "ok", True),  # contended, then quiet: the second measurement's figures, ok
    ((62.0, 58.0), "contended", True),  # contended twice: kept, marked, both readings in the reason
])
def test_a_contended_point_is_measured_again_once_then_judged(monkeypatch, neighbours, status, remeasured):
    runs = iter(neighbours)
    calls = []

    def fake_run_point(ctx, life, cell):
        neighbour = next(runs)
        calls.append(neighbour)
        measurement = SimpleNamespace(to_dict=lambda: {"requests": 100, "errors": 0, "error_rate": 0.0,
                                                       "errors_by_kind": {}})
        state = _state(neighbour)
        return point_module.PointRun({"throughput_rps": 1000.0 - neighbour, **state.row_fields(),
                                        "host_state": state.to_json()}, measurement, None, state,
                                       ServerHealth(None, True))

    monkeypatch.setattr(point_module, "run_point", fake_run_point)
    run = {"run_id": "r", "logical_date": "d", "started_at": "s", "schema_version": "1.5", "code": {}, "host": {}}
    ctx = SimpleNamespace(config=RunConfig(quiet_wait_s=0.0), run=run,
                          budget=SimpleNamespace(cpus=(1,), generator_cpus=(0,)))
    live = SimpleNamespace(server=SimpleNamespace(name="custom"), server_version="1", startup_s=1.0,
                           runtime_image="venv", runtime_image_kind="venv", restarts=0, handle=None)
    life = SimpleNamespace(live=live, served={}, timeline={"cells": {}}, inputs=None, profile=None)
    cell = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency", 2.0)
    row, _ = point_module.measure_point(ctx, life, cell)
    assert calls == list(neighbours) and row["status"] == status and row["remeasured"] is remeasured
    assert row["throughput_rps"] == 1000.0 - neighbours[-1]  # the last measurement's figures
    if status == "contended":
        assert row["reason"].startswith("other work used 62 % of the host's CPU") and "still other work 58 %" in \
            row["reason"]
        assert json.loads(row["host_state"])["first"]["host"]["neighbour_cpu_pct"] == 62.0
    else:
        assert row["reason"] is None
    events = life.timeline["cells"][cell.cell_id]
    assert ("quiet_wait" in events) is remeasured
