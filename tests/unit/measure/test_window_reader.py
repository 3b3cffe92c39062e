"""What the load generator reads from a live server during its measured window: its count, timings and CPU."""

from __future__ import annotations

from types import SimpleNamespace

from tasks.loadgen.coordinator import server_probe
from tasks.measure.window_reader import LiveServerWindowReader


def test_a_live_server_is_read_for_what_it_reports_and_a_duet_side_for_its_cpu_only():
    cpu = SimpleNamespace(cpu_s=lambda: 2.5)
    triton = SimpleNamespace(timing_source="stats", server_side_counts=lambda e: {"nv_inference_request_success": 7},
                             server_timings=lambda e: {"requests": 7.0})
    reader = LiveServerWindowReader(cpu, SimpleNamespace(server=triton, endpoint=None))
    assert server_probe(reader)() == {"count": 7.0, "timing.requests": 7.0, "cpu_s": 2.5}
    untimed = SimpleNamespace(timing_source="", server_timings=lambda e: {"requests": 1.0})
    assert server_probe(LiveServerWindowReader(cpu, SimpleNamespace(server=untimed, endpoint=None)))() == {
        "cpu_s": 2.5}  # no counter, and a stack that reports no timing is not asked
    assert server_probe(LiveServerWindowReader(cpu))() == {"cpu_s": 2.5}
