"""The host's busy CPU time for the host-noise benchmark, read through hoststate's /proc/stat reader."""

from __future__ import annotations

from tasks.measure import hostload
from tasks.measure.hoststate import CpuTime


def test_hostload_reads_the_hosts_busy_time_through_read_proc_stat(monkeypatch) -> None:
    monkeypatch.setattr(hostload, "read_proc_stat", lambda: {"cpu": CpuTime(busy_s=10.0, steal_s=2.5)})
    assert hostload.host_busy_cpu_s() == 12.5  # steal is time the host's cores were taken from us too
    monkeypatch.setattr(hostload, "read_proc_stat", lambda: None)
    assert hostload.host_busy_cpu_s() is None
