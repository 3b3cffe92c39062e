"""Is this host fit to measure on? The pre-flight check of `python -m tasks.cli doctor` and of every run's plan step
(pyperf's `system show`): each finding says what was read, what it does to the numbers, and how serious it is.

    findings = host_findings(sample_s=3.0)     # cores, isolation, governor, turbo, SMT, limits, load, counters, ...
    refused = hard_limits(config)              # what makes this host unable to measure the run at all
    check_host(config)                         # both; raises HostRefused before any work when a hard limit fails

Severities, mildest first: `ok`; `note` (worth knowing, nothing to do); `warning` (the numbers are worse for it: a
busy host, a moving clock); `refused` (a hard limit: the run is refused before anything is converted or started).
Every file is read under `HostPaths` (the real /sys and /proc, or fake ones in tests); what a host does not expose
reads "unknown" with what that means.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tasks.core.errors import ServingEvalError
from tasks.core.paths import cache_root
from tasks.measure.hoststate import read_loadavg, read_proc_stat
from tasks.plan.config import RunConfig
from tasks.serve.budget import format_cpu_set, host_cpus, parse_cpu_set, plan_budget

BUSY_PCT = 25.0  # other work above this during the sample: points measured now would likely be contended
STEAL_PCT = 5.0  # steal above this: the hypervisor gives this VM's CPUs to others
MIN_MEMORY_MB = 512  # available memory below this refuses a run: a server and its generator would not fit
LOW_MEMORY_MB = 2048
MIN_DISK_MB = 512  # free disk under the cache below this refuses a run (runtimes, artifacts, logs)
LOW_DISK_MB = 5120
PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "arm64": 241}  # the syscall's number per machine
PERF_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5
PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS = 0, 1
PERF_FLAGS = 1 | 1 << 5 | 1 << 6  # disabled, exclude_kernel, exclude_hv: allowed at perf_event_paranoid 2


class HostRefused(ServingEvalError):
    """The host fails a hard limit for this run (every failed limit is named, with what to change)."""


@dataclass(frozen=True)
class Finding:
    name: str
    value: str  # what was read
    severity: str  # "ok", "note", "warning" or "refused"
    effect: str  # what it does to the numbers (and, when refused, what to change)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HostPaths:
    """Where the host is read: /sys, /proc and the cache folder's disk (fake folders in tests)."""

    sys: Path = Path("/sys")
    proc: Path = Path("/proc")
    disk: Path | None = None  # None: the cache folder (tasks.core.paths.cache_root)
    usable_cpus: tuple[int, ...] | None = None  # None: this process's affinity

    @property
    def cpu_dir(self) -> Path:
        return self.sys / "devices" / "system" / "cpu"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cpu_list(text: str | None) -> tuple[int, ...]:
    return parse_cpu_set(text) if text else ()


def cpu_findings(paths: HostPaths) -> list[Finding]:
    usable = paths.usable_cpus if paths.usable_cpus is not None else host_cpus()
    online = _cpu_list(_read(paths.cpu_dir / "online")) or usable
    value = f"{len(online)} online ({format_cpu_set(online)}), {len(usable)} usable here ({format_cpu_set(usable)})"
    if len(usable) < 2:
        return [Finding("cpus", value, "warning", "the server and the load generator share one CPU: every figure "
                                                  "includes the generator's own cost (pin_cpus cannot pin them apart)")]
    return [Finding("cpus", value, "ok", "the server and the load generator get CPUs of their own (pin_cpus)")]


def isolation_findings(paths: HostPaths) -> list[Finding]:
    isolated = _read(paths.cpu_dir / "isolated")
    nohz = _read(paths.cpu_dir / "nohz_full")
    nohz_text = nohz or ("none" if nohz is not None else "not in this kernel")
    value = f"isolated: {isolated or 'none'}; nohz_full: {nohz_text}"
    if isolated:
        return [Finding("isolation", value, "ok", "isolated CPUs run only what is pinned to them: give them to the "
                                                  "server (server_cpus) and other work cannot share its cores")]
    return [Finding("isolation", value, "note", "no CPU is isolated: other work may run on the server's CPUs; every "
                                                "load point records it (neighbour_cpu_pct, server_cpus_neighbour_pct) "
                                                "and a contended point is re-measured, then marked contended")]


def frequency_findings(paths: HostPaths) -> list[Finding]:
    governors = sorted({g for g in (_read(p) for p in paths.cpu_dir.glob("cpu[0-9]*/cpufreq/scaling_governor")) if g})
    if not governors:
        governor = Finding("governor", "unknown (no cpufreq here: a VM, or a CPU driver without it)", "note",
                           "the clock is not this host's to set: compare runs of hosts alike (the regression check "
                           "compares a host only with itself)")
    elif governors == ["performance"]:
        governor = Finding("governor", "performance", "ok", "the clock stays high: short and long points run alike")
    else:
        governor = Finding("governor", ", ".join(governors), "warning",
                           "the clock follows the load: a short or light point runs at a lower clock than a long or "
                           "heavy one (set the `performance` governor for steadier numbers)")
    no_turbo = _read(paths.cpu_dir / "intel_pstate" / "no_turbo")
    boost = _read(paths.cpu_dir / "cpufreq" / "boost")
    if no_turbo is None and boost is None:
        turbo = Finding("turbo", "unknown (neither intel_pstate/no_turbo nor cpufreq/boost is readable)", "note",
                        "if the CPU boosts, its clock depends on temperature and on how many cores are busy")
    elif no_turbo == "1" or boost == "0":
        turbo = Finding("turbo", "off", "ok", "the clock does not move with temperature or the neighbours' load")
    else:
        turbo = Finding("turbo", "on", "note", "the clock depends on temperature and on how many cores are busy: "
                                               "a busy neighbour slows the server's cores too")
    return [governor, turbo]


def smt_findings(paths: HostPaths) -> list[Finding]:
    active, control = _read(paths.cpu_dir / "smt" / "active"), _read(paths.cpu_dir / "smt" / "control")
    if active == "1":
        return [Finding("smt", f"on ({control or 'control unknown'})", "warning",
                        "two logical CPUs share one core: work on the sibling of a server CPU slows the server without "
                        "showing on its CPUs; give the server whole cores (both siblings) or turn SMT off")]
    if active == "0":
        return [Finding("smt", f"off ({control or 'control unknown'})", "ok", "every logical CPU is a core of its own")]
    return [Finding("smt", "unknown", "note", "whether logical CPUs share cores is not reported here")]


def _own_cgroup_dirs(paths: HostPaths) -> dict[str, Path]:
    """controller ("cpu", "memory", or "unified" for cgroup v2) -> this process's cgroup folder."""
    cgroups: dict[str, str] = {}
    for line in (_read(paths.proc / "self" / "cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else ["unified"]:
                cgroups[controller] = parts[2]
    found: dict[str, Path] = {}
    for line in (_read(paths.proc / "self" / "mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        fields_, tail = left.split(), right.split()
        if len(fields_) < 5 or len(tail) < 3:
            continue
        root, point, fstype, options = fields_[3], fields_[4], tail[0], tail[2].split(",")
        for controller in ("unified",) if fstype == "cgroup2" else [c for c in ("cpu", "memory") if c in options]:
            if controller in cgroups and controller not in found and fstype in ("cgroup", "cgroup2"):
                path = cgroups[controller]
                relative = path[len(root):] if root != "/" and path.startswith(root) else path
                found[controller] = Path(point) / relative.lstrip("/")
    return found


def limit_findings(paths: HostPaths, usable: int) -> list[Finding]:
    """The CPU quota and memory limit of this process's cgroup (a container's, or a systemd slice's)."""
    dirs = _own_cgroup_dirs(paths)
    quota_cpus = memory_bytes = None
    cpu_max = _read(dirs["unified"] / "cpu.max") if "unified" in dirs else None
    if cpu_max and not cpu_max.startswith("max"):
        quota, period = (int(v) for v in cpu_max.split()[:2])
        quota_cpus = quota / period
    elif "cpu" in dirs:
        quota, period = _read(dirs["cpu"] / "cpu.cfs_quota_us"), _read(dirs["cpu"] / "cpu.cfs_period_us")
        if quota and period and int(quota) > 0:
            quota_cpus = int(quota) / int(period)
    mem = _read(dirs["unified"] / "memory.max") if "unified" in dirs else None
    if mem is None and "memory" in dirs:
        mem = _read(dirs["memory"] / "memory.limit_in_bytes")
    if mem and mem != "max" and int(mem) < 2**60:
        memory_bytes = int(mem)
    if not dirs:
        cpu = Finding("cpu_limit", "unknown (no cgroup found for this process)", "note",
                      "a container's CPU quota, if any, cannot be read: the server may get less CPU time than its CPUs")
    elif quota_cpus is None:
        cpu = Finding("cpu_limit", "none (no CPU quota on this process's cgroup)", "ok",
                      "the CPUs this process may use are its whole budget")
    elif quota_cpus < usable:
        cpu = Finding("cpu_limit", f"{quota_cpus:g} CPUs of time (quota) on {usable} usable CPUs", "warning",
                      "the quota gives less CPU time than the CPUs it lets us run on: a server pinned to its CPUs is "
                      "throttled when the generator and it are busy together")
    else:
        cpu = Finding("cpu_limit", f"{quota_cpus:g} CPUs of time (quota)", "ok", "no tighter than the usable CPUs")
    if memory_bytes is None:
        memory = Finding("memory_limit", "none" if dirs else "unknown", "ok" if dirs else "note",
                         "no memory limit on this process's cgroup" if dirs else "a container's memory limit, if any, "
                         "cannot be read")
    else:
        memory = Finding("memory_limit", f"{memory_bytes / 2**30:.1f} GiB (this process's cgroup)", "note",
                         "every server, its generator and the orchestrator share this limit")
    return [cpu, memory]


def load_findings(paths: HostPaths, sample_s: float) -> list[Finding]:
    """The load average and, over `sample_s` seconds (0: not sampled), other work's CPU and the steal."""
    loadavg = _read(paths.proc / "loadavg")
    one = read_loadavg(paths.proc / "loadavg")
    pressure = (_read(paths.proc / "pressure" / "cpu") or "").splitlines()
    psi = next((line.split()[1].partition("=")[2] for line in pressure if line.startswith("some ")), None)
    usable = len(paths.usable_cpus if paths.usable_cpus is not None else host_cpus())
    value = f"load average {' '.join((loadavg or 'unknown').split()[:3])}"
    if psi is not None:
        value += f"; CPU pressure (some, 10 s) {psi} %"
    findings = []
    if sample_s > 0:
        a, t0 = read_proc_stat(paths.proc / "stat"), time.monotonic()
        time.sleep(sample_s)
        b, window = read_proc_stat(paths.proc / "stat"), time.monotonic() - t0
        if a and b:
            cores = len([k for k in b if k != "cpu"]) or 1
            busy = 100 * (b["cpu"].busy_s + b["cpu"].steal_s - a["cpu"].busy_s - a["cpu"].steal_s) / (window * cores)
            steal = 100 * (b["cpu"].steal_s - a["cpu"].steal_s) / (window * cores)
            text = f"{busy:.0f} % of the host's CPU busy over {window:.1f} s, steal {steal:.0f} %"
            if busy > BUSY_PCT:
                findings.append(Finding("busy", text, "warning",
                                        f"a busy host (more than {BUSY_PCT:g} % with nothing of ours running): load "
                                        "points measured now would be contended, re-measured and likely published "
                                        "`contended`"))
            else:
                findings.append(Finding("busy", text, "ok", "a quiet host: other work leaves the CPUs to the server"))
            if steal > STEAL_PCT:
                findings.append(Finding("steal", f"{steal:.0f} % over {window:.1f} s", "warning",
                                        "the hypervisor gives this VM's CPUs to others: every figure is slower by a "
                                        "share that changes from minute to minute (counted as other work)"))
    busy_load = one is not None and one > usable
    findings.insert(0, Finding("load", value, "warning" if busy_load else "ok",
                               f"more runnable tasks than the {usable} usable CPUs: other work competes for them"
                               if busy_load else "no more runnable tasks than CPUs on average"))
    return findings


def _perf_event_open() -> tuple[int, int]:
    """(fd, errno) of perf_event_open for the instructions counter of this process (ctypes, no perf tool)."""
    number = PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        return -1, errno.ENOSYS
    attr = (ctypes.c_uint8 * 128)()
    ctypes.memmove(attr, PERF_TYPE_HARDWARE.to_bytes(4, "little") + PERF_ATTR_SIZE.to_bytes(4, "little")
                   + PERF_COUNT_HW_INSTRUCTIONS.to_bytes(8, "little"), 16)
    ctypes.memmove(ctypes.byref(attr, 40), PERF_FLAGS.to_bytes(8, "little"), 8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(number), ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
                      ctypes.c_int(-1), ctypes.c_ulong(0))
    return int(fd), ctypes.get_errno()


def counter_findings(paths: HostPaths, open_event=None) -> list[Finding]:
    """Whether hardware performance counters exist: `open_event` (default `_perf_event_open`) returns (fd, errno)."""
    fd, err = (open_event or _perf_event_open)()
    if fd >= 0:
        os.close(fd)
        return [Finding("hw_counters", "available (perf_event_open opened PERF_COUNT_HW_INSTRUCTIONS)", "ok",
                        "instruction counts could stand beside the timings (the project does not use them yet)")]
    paranoid = _read(paths.proc / "sys" / "kernel" / "perf_event_paranoid")
    why = {errno.ENOENT: "no such hardware event: no PMU on this CPU, or none passed to this VM",
           errno.ENODEV: "no PMU device", errno.EOPNOTSUPP: "not supported here",
           errno.EACCES: f"not allowed (kernel.perf_event_paranoid={paranoid})",
           errno.EPERM: f"not allowed (kernel.perf_event_paranoid={paranoid})",
           errno.ENOSYS: f"no perf_event_open on this kernel or machine ({platform.machine()})"}
    reason = why.get(err, os.strerror(err) if err else "unknown error")
    return [Finding("hw_counters", f"no hardware performance counters (perf_event_open: "
                                   f"{errno.errorcode.get(err, err)}, {reason})", "note",
                    "instruction counts, which a busy host cannot move, are not available: every figure here is a "
                    "time, judged against its own noise and recorded with the host's state")]


def memory_findings(paths: HostPaths) -> list[Finding]:
    meminfo = dict(line.split(":", 1) for line in (_read(paths.proc / "meminfo") or "").splitlines() if ":" in line)
    available = meminfo.get("MemAvailable")
    if available is None:
        return [Finding("memory", "unknown (no /proc/meminfo)", "note", "whether the servers fit is not known")]
    mb = int(available.split()[0]) / 1024
    if mb < MIN_MEMORY_MB:
        return [Finding("memory", f"{mb:,.0f} MiB available", "refused",
                        f"under {MIN_MEMORY_MB} MiB a server and its load generator do not fit: free memory first")]
    if mb < LOW_MEMORY_MB:
        return [Finding("memory", f"{mb:,.0f} MiB available", "warning",
                        "large models or several workers may not fit; a server killed for memory fails its cells")]
    return [Finding("memory", f"{mb:,.0f} MiB available", "ok", "room for a server and its load generator")]


def disk_findings(paths: HostPaths) -> list[Finding]:
    folder = paths.disk or cache_root()
    try:
        free_mb = shutil.disk_usage(folder).free / 2**20
    except OSError as exc:
        return [Finding("disk", f"unknown ({exc})", "note", "whether runtimes and artifacts fit is not known")]
    value = f"{free_mb:,.0f} MiB free under {folder}"
    if free_mb < MIN_DISK_MB:
        return [Finding("disk", value, "refused", f"under {MIN_DISK_MB} MiB the runtimes, artifacts and logs do not "
                                                  "fit: free space or point SERVING_EVAL_CACHE elsewhere")]
    if free_mb < LOW_DISK_MB:
        return [Finding("disk", value, "warning", "a new runtime venv or image may not fit")]
    return [Finding("disk", value, "ok", "room for runtimes, artifacts and logs")]


def host_findings(paths: HostPaths | None = None, sample_s: float = 0.0, open_event=None) -> list[Finding]:
    """Every finding about this host, in a fixed order (the doctor's table, the run's provenance)."""
    paths = paths or HostPaths()
    usable = len(paths.usable_cpus if paths.usable_cpus is not None else host_cpus())
    return [*cpu_findings(paths), *isolation_findings(paths), *frequency_findings(paths), *smt_findings(paths),
            *limit_findings(paths, usable), *load_findings(paths, sample_s), *counter_findings(paths, open_event),
            *memory_findings(paths), *disk_findings(paths)]


def hard_limits(config: RunConfig, paths: HostPaths | None = None) -> list[Finding]:
    """What this run needs of the host and it lacks: with `pin_cpus`, CPUs for the server's budget plus at least one
    for the load generator (a run that would pin them onto the same CPUs is refused, not silently unpinned)."""
    paths = paths or HostPaths()
    usable = paths.usable_cpus if paths.usable_cpus is not None else host_cpus()
    if not config.pin_cpus:
        return []
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus, usable)
    if budget.generator_cpus:
        return []
    server = len(budget.cpus or usable)
    return [Finding("cpus_for_the_run", f"{len(usable)} usable CPUs ({format_cpu_set(usable)}); the server's budget "
                                        f"takes {server}", "refused",
                    f"with pin_cpus the server (server_cpus={config.server_cpus!r}: {server} CPUs) and the load "
                    f"generator (at least 1) need {server + 1} CPUs: give the server fewer CPUs, or set "
                    "pin_cpus=false to measure them sharing the CPUs (every figure then includes the generator's "
                    "cost)")]


@dataclass(frozen=True)
class HostCheck:
    findings: list[Finding] = field(default_factory=list)

    @property
    def refused(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "refused"]

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings], "refused": len(self.refused)}


def check_host(config: RunConfig | None = None, paths: HostPaths | None = None, sample_s: float = 0.0,
               open_event=None, refuse: bool = True) -> HostCheck:
    """The host's findings and the run's hard limits; with `refuse`, HostRefused when one fails."""
    findings = host_findings(paths, sample_s, open_event)
    if config is not None:
        findings += hard_limits(config, paths)
    check = HostCheck(findings)
    if refuse and check.refused:
        raise HostRefused("this host cannot measure the run: " + "; ".join(
            f"{f.name} ({f.value}): {f.effect}" for f in check.refused))
    return check


def describe(check: HostCheck) -> list[str]:
    """The findings as lines for a log or a terminal: severity, name, value, then what it does to the numbers."""
    width = max((len(f.name) for f in check.findings), default=0)
    return [f"{f.severity:<8} {f.name:<{width}}  {f.value}\n{'':<{width + 10}}{f.effect}" for f in check.findings]
