"""The host's busy CPU time for the host-noise benchmark, read through hoststate's /proc/stat reader."""

from __future__ import annotations

from tasks.measure import neighbour_probe
from tasks.measure.hoststate import CpuTime


def test_neighbour_probe_reads_the_hosts_busy_time_through_read_proc_stat(monkeypatch) -> None:
    monkeypatch.setattr(neighbour_probe, "read_proc_stat", lambda: {"cpu": CpuTime(busy_s=10.0, steal_s=2.5)})
    assert neighbour_probe.host_busy_cpu_s() == 12.5  # steal is time the host's cores were taken from us too
    monkeypatch.setattr(neighbour_probe, "read_proc_stat", lambda: None)
    assert neighbour_probe.host_busy_cpu_s() is None
