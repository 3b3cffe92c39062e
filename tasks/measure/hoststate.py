"""The host's state over one load point: how much of the host other work used, the hypervisor's steal, whether the
server got the CPU it was given, and the load average (docs/design.md#the-hosts-state).

    with HostStateProbe(live.handle, server_cpus=(1,), generator_cpus=(0,)) as probe:
        ...  # the load point
    probe.result.row_fields()   # neighbour_cpu_pct, steal_pct, server_cpu_share_pct, ... (the row's columns)

What is read, at the start and the end of the point (`Reading`), and what it becomes (`HostState`, pure arithmetic
on two readings, `host_state`):

- every CPU's busy time from /proc/stat (user + nice + system + irq + softirq, and steal): all of it that is not
  ours is other work's (`neighbour_cpu_pct`, % of every CPU of the host over the point; steal included, shown apart as
  `steal_pct`). Ours: this process and its reaped children (the load generator's workers), the server — its
  process tree (psutil, reaped descendants included through their parents' child times) or its container (its
  cgroup's CPU time: a container is no descendant of this process) — and the engine's `docker-proxy` forwarding the
  server's published ports. A live child of this process that is neither (a test's CPU spinner, an embedded S3) is
  other work. irq and softirq count as busy: a kernel without IRQ time accounting (this VM's) charges the softirq
  a task ran (our own loopback traffic) to the task's CPU time, so leaving them out would make ours exceed the
  CPUs' busy time; where the kernel accounts IRQ time apart, our requests' softirq (a few % of a core at thousands
  of requests a second) reads as other work, an error towards "busy";
- the server's CPU share of its budget: its CPU time / (its CPUs × the point's length) (`server_cpu_share_pct`);
- how long the server's threads waited on a run queue, runnable but not running (/proc/<pid>/task/<tid>/schedstat,
  second field), summed over its threads, % of its CPUs × the point (`server_cpu_wait_pct`); a thread that ended
  during the point takes its wait with it (errs on "not starved");
- other work on the server's own CPUs (`server_cpus_neighbour_pct`): their busy time less the server's and, where
  the load generator is pinned elsewhere, this process's own; on an unpinned server, the host's figure;
- the host's CPU pressure (/proc/pressure/cpu "some": the share of time some task waited for a CPU), the
  container's where cgroup v2 has `cpu.pressure`, and the 1-minute load average at the end.

A source this host lacks reads None ("unknown"): no /proc/stat, no schedstat, no PSI, a container on a remote
engine. Nothing is judged here: `tasks.validate.outcome.judge_host` says when a point was contended.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from tasks.loadgen.resources import CgroupReader
from tasks.runtimes.docker_engine import docker_client

PROC = Path("/proc")
ENGINE_HELPER = "docker-proxy"  # forwards a container's published port: the server's own traffic


@dataclass(frozen=True)
class CpuTime:
    """One CPU line of /proc/stat, in seconds: busy (user + nice + system + irq + softirq) and steal."""

    busy_s: float
    steal_s: float


def read_proc_stat(path: Path = PROC / "stat") -> dict[str, CpuTime] | None:
    """"cpu" (every CPU) and "cpu0", "cpu1", ... -> CpuTime; None without /proc/stat."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for line in lines:
        if not line.startswith("cpu"):
            continue
        name, *values = line.split()
        numbers = [int(v) for v in values] + [0] * 8
        user, nice, system, irq, softirq, steal = (numbers[i] for i in (0, 1, 2, 5, 6, 7))
        out[name] = CpuTime((user + nice + system + irq + softirq) / ticks, steal / ticks)
    return out if "cpu" in out else None


def read_pressure_some_us(path: Path) -> int | None:
    """The `total=` of a PSI file's "some" line (microseconds some task waited for the resource), or None."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                return int(dict(part.split("=") for part in line.split()[1:])["total"])
    except (OSError, KeyError, ValueError):
        return None
    return None


def read_loadavg(path: Path = PROC / "loadavg") -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def thread_waits_ns(pid: int, proc: Path = PROC) -> dict[tuple[int, int], int] | None:
    """(pid, tid) -> nanoseconds each thread of `pid` spent runnable on a run queue (schedstat's second field);
    None when the kernel keeps no schedstat (or the process is gone)."""
    try:
        tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
    except (OSError, ValueError):
        return None
    waits = {}
    for tid in tids:
        try:
            waits[(pid, tid)] = int((proc / str(pid) / "task" / str(tid) / "schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return waits if waits or not tids else None


@dataclass(frozen=True)
class Reading:
    """Everything read at one instant (cumulative counters), for `host_state` to subtract."""

    t_s: float  # monotonic
    cpus: dict[str, CpuTime] | None
    own_s: float  # this process and its reaped children (the load generator's workers)
    self_s: float  # this process alone (its threads)
    helpers_s: dict[int, float] = field(default_factory=dict)  # pid -> CPU s of processes serving the server (ours)
    server_cpu_s: float | None = None
    server_waits_ns: dict[tuple[int, int], int] | None = None
    server_pressure_us: int | None = None
    server_throttled_us: int | None = None
    pressure_us: int | None = None
    load_avg_1m: float | None = None


HOST_COLUMNS = ("neighbour_cpu_pct", "steal_pct", "server_cpus_neighbour_pct", "server_cpu_share_pct",
                "server_cpu_wait_pct", "host_cpu_pressure_pct", "load_avg_1m")


@dataclass(frozen=True)
class HostState:
    """The host over one window: every figure in % unless named otherwise; None where its source is missing."""

    window_s: float
    cores: int  # the host's CPUs (/proc/stat)
    server_cores: int  # the CPUs the server could run on (its budget)
    neighbour_cpu_pct: float | None  # other work (steal included), % of all the host's CPUs
    steal_pct: float | None  # the hypervisor's steal, % of all the host's CPUs
    server_cpus_neighbour_pct: float | None  # other work on the server's CPUs, % of them
    server_cpu_share_pct: float | None  # the server's CPU time, % of its CPUs over the window
    server_cpu_wait_pct: float | None  # its threads' run-queue wait, % of its CPUs over the window
    host_cpu_pressure_pct: float | None  # PSI "some" of the host, % of the window
    load_avg_1m: float | None
    server_cpu_pressure_pct: float | None = None  # PSI "some" of the server's cgroup (cgroup v2), % of the window
    server_throttled_pct: float | None = None  # the server's cgroup throttled (CPU quota), % of the window
    sources: dict = field(default_factory=dict)  # what was read for each figure ("unknown" where nothing)

    def row_fields(self) -> dict:
        """The results columns this state fills (the `host_state` JSON is `to_json`)."""
        return {name: _round(getattr(self, name)) for name in HOST_COLUMNS}

    def to_dict(self) -> dict:
        return {k: _round(v) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def to_json(self, **extra: object) -> str:
        return json.dumps({**self.to_dict(), **extra}, sort_keys=True)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _pct(part: float | None, whole: float) -> float | None:
    return None if part is None or whole <= 0 else max(0.0, 100.0 * part / whole)


def host_state(a: Reading, b: Reading, server_cpus: tuple[int, ...] = (), generator_cpus: tuple[int, ...] = (),
               server_source: str = "process tree") -> HostState:
    """The state between two readings. `server_cpus`: the server's CPU set (empty: every CPU); `generator_cpus`: the
    load generator's (where disjoint from the server's, its CPU is not subtracted from the server's CPUs' other
    work: it ran elsewhere)."""
    window = max(b.t_s - a.t_s, 1e-9)
    per_cpu = sorted(k for k in (b.cpus or {}) if k != "cpu")
    cores = len(per_cpu) or os.cpu_count() or 1
    mine = [c for c in per_cpu if int(c[3:]) in server_cpus] if server_cpus else per_cpu
    pinned = bool(server_cpus) and 0 < len(mine) < len(per_cpu)
    server_cores = len(mine) if pinned else (len(server_cpus) or cores)
    sources = {"host_cpu": "/proc/stat" if a.cpus and b.cpus else "unknown",
               "server_cpu": server_source if a.server_cpu_s is not None and b.server_cpu_s is not None
               else "unknown",
               "server_wait": "schedstat" if a.server_waits_ns is not None and b.server_waits_ns is not None
               else "unknown",
               "pressure": "/proc/pressure/cpu" if a.pressure_us is not None and b.pressure_us is not None
               else "unknown"}
    server_s = (b.server_cpu_s - a.server_cpu_s) if sources["server_cpu"] != "unknown" else None
    helpers_s = sum(cpu - a.helpers_s.get(pid, 0.0) for pid, cpu in b.helpers_s.items())
    own_s = (b.own_s - a.own_s) + helpers_s
    neighbour = steal = on_server = None
    if a.cpus and b.cpus:
        def busy(names: list[str]) -> tuple[float, float]:
            used = sum(b.cpus[n].busy_s + b.cpus[n].steal_s - a.cpus[n].busy_s - a.cpus[n].steal_s
                       for n in names if n in a.cpus)
            return used, sum(b.cpus[n].steal_s - a.cpus[n].steal_s for n in names if n in a.cpus)

        used, stolen = busy(["cpu"])[0], busy(per_cpu)[1]
        steal = _pct(stolen, window * cores)
        if server_s is not None:
            neighbour = min(100.0, _pct(used - own_s - server_s, window * cores))
            if not pinned:
                on_server = neighbour
            else:
                elsewhere = bool(generator_cpus) and not set(generator_cpus) & set(server_cpus)
                ours_there = (b.self_s - a.self_s + helpers_s) if elsewhere else own_s
                on_server = min(100.0, _pct(busy(mine)[0] - server_s - ours_there, window * len(mine)))
    wait_ns = None
    if sources["server_wait"] == "schedstat":
        wait_ns = sum(ns - a.server_waits_ns.get(key, 0) for key, ns in b.server_waits_ns.items())

    def pressure(x: int | None, y: int | None) -> float | None:
        return None if x is None or y is None else min(100.0, _pct((y - x) / 1e6, window))

    return HostState(
        window_s=window, cores=cores, server_cores=server_cores, neighbour_cpu_pct=neighbour, steal_pct=steal,
        server_cpus_neighbour_pct=on_server, server_cpu_share_pct=_pct(server_s, window * server_cores),
        server_cpu_wait_pct=_pct(None if wait_ns is None else wait_ns / 1e9, window * server_cores),
        host_cpu_pressure_pct=pressure(a.pressure_us, b.pressure_us), load_avg_1m=b.load_avg_1m,
        server_cpu_pressure_pct=pressure(a.server_pressure_us, b.server_pressure_us),
        server_throttled_pct=pressure(a.server_throttled_us, b.server_throttled_us), sources=sources)


class ServerReader:
    """The server's cumulative CPU time and its threads' run-queue waits: a process tree (the process launcher) or a
    container's cgroup (the Docker launcher, where the engine runs on this host); plus the `docker-proxy` processes
    forwarding its published ports."""

    def __init__(self, handle=None, proc: Path = PROC, client=None) -> None:
        self.proc = proc
        self.pid = int(getattr(handle, "pid", 0) or 0)
        self.container_id = getattr(handle, "container_id", "") or ""
        self.cgroup = None  # a tasks.loadgen.resources.CgroupReader for a container
        self.kind = "process tree" if self.pid and not self.container_id else "unknown"
        self._procs: dict[int, psutil.Process] = {}
        self.helpers = _port_forwarders(getattr(handle, "ports", {}) or {}) if self.container_id else []
        if self.container_id:
            self._find_cgroup(client)

    def _find_cgroup(self, client) -> None:
        try:
            client = client or docker_client()
            pid = int(client.api.inspect_container(self.container_id)["State"]["Pid"] or 0)
        except Exception:  # noqa: BLE001 - no engine here, or no container: the server's figures are unknown
            return
        self.cgroup = CgroupReader.for_pid(pid, self.container_id) if pid else None
        if self.cgroup is not None:
            self.kind = "cgroup"

    def _tree(self) -> list[psutil.Process]:
        try:
            root = self._procs.setdefault(self.pid, psutil.Process(self.pid))
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            return []
        return [self._procs.setdefault(p.pid, p) for p in members]

    def pids(self) -> list[int]:
        if self.cgroup is not None:
            try:
                return [int(p) for p in (self.cgroup.cpu_file.parent / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return []
        return [p.pid for p in self._tree()] if self.kind == "process tree" else []

    def cpu_s(self) -> float | None:
        """CPU seconds of the server so far: its cgroup's, or its tree's (each member with its reaped children, so a
        worker that ended and was reaped by its parent keeps counting)."""
        if self.cgroup is not None:
            try:
                return self.cgroup.cpu_ns() / 1e9
            except (OSError, ValueError, KeyError):
                return None
        if self.kind != "process tree":
            return None
        total, seen = 0.0, False
        for member in self._tree():
            try:
                t = member.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
            seen = True
        return total if seen else None

    def waits_ns(self) -> dict[tuple[int, int], int] | None:
        waits: dict[tuple[int, int], int] = {}
        pids = self.pids()
        for pid in pids:
            found = thread_waits_ns(pid, self.proc)
            if found is None and pid == pids[0]:
                return None  # no schedstat on this kernel (or the server is gone)
            waits.update(found or {})
        return waits if pids else None

    def cgroup_counter(self, name: str, key: str) -> int | None:
        """A counter of the container's cgroup v2 files (`cpu.pressure` some total, `cpu.stat` throttled_usec)."""
        if self.cgroup is None or self.cgroup.cpu_file.name != "cpu.stat":
            return None
        path = self.cgroup.cpu_file.parent / name
        if name == "cpu.pressure":
            return read_pressure_some_us(path)
        try:
            return int(dict(line.split() for line in path.read_text().splitlines() if line.strip())[key])
        except (OSError, KeyError, ValueError):
            return None

    def helpers_s(self) -> dict[int, float]:
        out = {}
        for helper in self.helpers:
            try:
                t = helper.cpu_times()
                out[helper.pid] = t.user + t.system
            except psutil.Error:
                continue
        return out


def _port_forwarders(ports: dict) -> list[psutil.Process]:
    """The engine's `docker-proxy` processes that forward one of these host ports."""
    wanted = {str(p) for p in ports.values()}
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.info.get("name") != ENGINE_HELPER or "-host-port" not in cmdline:
            continue
        index = cmdline.index("-host-port")
        if index + 1 < len(cmdline) and cmdline[index + 1] in wanted:
            found.append(proc)
    return found


class HostStateProbe:
    """The host's state between `__enter__` and `__exit__` (`result`), around one load point of the server behind
    `handle` (a LaunchHandle; None: no server). `others`: handles of servers also ours (a duet's other side)."""

    def __init__(self, handle=None, server_cpus: tuple[int, ...] = (), generator_cpus: tuple[int, ...] = (),
                 others: tuple = (), proc: Path = PROC, client=None) -> None:
        self.server = ServerReader(handle, proc, client)
        self.others = [ServerReader(h, proc, client) for h in others]
        self.server_cpus, self.generator_cpus, self.proc = tuple(server_cpus), tuple(generator_cpus), proc
        self.result: HostState | None = None
        self._start: Reading | None = None

    def read(self) -> Reading:
        t = os.times()
        helpers = self.server.helpers_s()
        for offset, other in enumerate(self.others, start=1):  # their CPU is ours: keyed apart from real PIDs
            cpu = other.cpu_s()
            helpers.update({-offset: cpu or 0.0, **other.helpers_s()})
        return Reading(
            t_s=time.monotonic(), cpus=read_proc_stat(self.proc / "stat"),
            own_s=t.user + t.system + t.children_user + t.children_system, self_s=t.user + t.system,
            helpers_s=helpers, server_cpu_s=self.server.cpu_s(), server_waits_ns=self.server.waits_ns(),
            server_pressure_us=self.server.cgroup_counter("cpu.pressure", "total"),
            server_throttled_us=self.server.cgroup_counter("cpu.stat", "throttled_usec"),
            pressure_us=read_pressure_some_us(self.proc / "pressure" / "cpu"),
            load_avg_1m=read_loadavg(self.proc / "loadavg"))

    def __enter__(self) -> HostStateProbe:
        self._start = self.read()
        return self

    def __exit__(self, *exc: object) -> None:
        self.result = host_state(self._start, self.read(), self.server_cpus, self.generator_cpus, self.server.kind)

    def sample(self, seconds: float) -> HostState:
        """The state over the next `seconds` (the server idle between points: a quiet host is idle there too)."""
        start = self.read()
        time.sleep(seconds)
        return host_state(start, self.read(), self.server_cpus, self.generator_cpus, self.server.kind)
