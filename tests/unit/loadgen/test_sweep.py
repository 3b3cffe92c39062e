"""Sweeps (tasks/loadgen/sweep.py): concurrency and rate sweeps follow their stop rules, on a stand-in point."""

from __future__ import annotations

from dataclasses import replace

from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.sweep import concurrency_sweep, rate_sweep


def _fake_point(capacity_rps: float, base_ms: float = 1.0):
    """A server model for sweep logic: throughput saturates at capacity, p99 explodes near it."""
    from tasks.loadgen.measurement import Measurement

    def run(settings: LoadSettings) -> Measurement:
        offered = settings.load * 1000 / base_ms if settings.mode == "concurrency" else settings.load
        rps = min(offered, capacity_rps)
        p99 = base_ms / max(1e-3, 1 - rps / capacity_rps) if settings.mode == "rate" else base_ms * settings.load
        return Measurement(1, 100, 0, 0.0, {}, 0, 0, rps, rps, p99, p99, p99, p99, p99, p99, p99, "sent", 3,
                           (rps,) * 3, True, False, 0.0, 0, 0, 0.0, 10.0, 5.0, False, 1, "")
    return run


def test_sweeps_follow_their_stop_rules():
    base = LoadSettings(duration_s=1, window_s=1)
    closed = concurrency_sweep(_fake_point(8000), base, max_concurrency=64)
    assert [c for c, _ in closed.points] == [1, 2, 4, 8, 16] and closed.best_load == 8
    bounded = concurrency_sweep(_fake_point(8000), base, concurrencies=[1, 2, 4, 8], p99_bound_ms=3)
    assert [c for c, _ in bounded.points] == [1, 2, 4] and bounded.best_load == 2
    rate = rate_sweep(_fake_point(1000), replace(base, mode="rate", load=1), start_rps=100, p99_bound_ms=10,
                      resolution_pct=2, max_points=20)
    assert 880 <= rate.best_load <= 900  # p99 <= 10 ms  <=>  rate <= 900
    assert all(m.latency_ms_p99 <= 10 for r, m in rate.points if r <= rate.best_load)
