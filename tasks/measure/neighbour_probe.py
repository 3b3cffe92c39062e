"""How much of the host's CPU other work used while we measured: a re-measurement taken while neighbours
stole the cores is no evidence either way.

    with NeighbourProbe() as probe:
        ...  # start a server, load-test it, stop it
    probe.result.neighbour_cpu_pct   # CPU time of everything outside this process tree, % of the host's cores

All CPU time the host's cores spent busy (`/proc/stat`) minus the CPU time of this process and its
descendants (the servers it launched and the load generator's workers: live ones through psutil, reaped ones
through the children's rusage) is the neighbours'. A server's descendants that outlive their server (orphans
reaped by init) count as neighbours too, which errs on the side of "the host was busy".
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from tasks.measure.hoststate import read_proc_stat


@dataclass(frozen=True)
class HostLoad:
    window_s: float
    host_busy_cpu_s: float  # every core's busy time in the window
    own_cpu_s: float  # this process tree's CPU time in the window
    cores: int

    @property
    def neighbour_cpu_pct(self) -> float:
        """Other work's CPU time, as % of all the host's cores over the window (0 when unknown)."""
        if self.window_s <= 0 or self.cores <= 0:
            return 0.0
        return max(0.0, 100.0 * (self.host_busy_cpu_s - self.own_cpu_s) / (self.window_s * self.cores))

    def to_dict(self) -> dict:
        return {"window_s": self.window_s, "host_busy_cpu_s": self.host_busy_cpu_s, "own_cpu_s": self.own_cpu_s,
                "cores": self.cores, "neighbour_cpu_pct": self.neighbour_cpu_pct}


def host_busy_cpu_s() -> float | None:
    """Busy CPU seconds of all cores since boot, steal included (`hoststate.read_proc_stat`), None without
    /proc/stat."""
    cpus = read_proc_stat()
    return None if cpus is None else cpus["cpu"].busy_s + cpus["cpu"].steal_s


def own_cpu_s() -> tuple[float, dict[tuple[int, float], float]]:
    """(this process's and its reaped children's CPU seconds, {(pid, create_time): CPU s} of live descendants)."""
    t = os.times()
    live = {}
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            live[(child.pid, child.create_time())] = times.user + times.system
        except psutil.Error:
            continue
    return t.user + t.system + t.children_user + t.children_system, live


class NeighbourProbe:
    """Measure the neighbours' CPU use between `__enter__` and `__exit__` (`result`, a HostLoad)."""

    def __init__(self) -> None:
        self.result: HostLoad | None = None

    def __enter__(self) -> NeighbourProbe:
        self._t0 = time.monotonic()
        self._busy0 = host_busy_cpu_s()
        self._own0, self._live0 = own_cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        busy1 = host_busy_cpu_s()
        own1, live1 = own_cpu_s()
        window_s = time.monotonic() - self._t0
        if self._busy0 is None or busy1 is None:
            self.result = HostLoad(window_s, 0.0, 0.0, 0)
            return
        # live descendants: their CPU since the start (or since they began); reaped ones are in own1's rusage
        live_delta = sum(cpu - self._live0.get(key, 0.0) for key, cpu in live1.items())
        self.result = HostLoad(window_s, busy1 - self._busy0, own1 - self._own0 + live_delta, psutil.cpu_count() or 1)
