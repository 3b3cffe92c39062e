"""Summaries of a recording: percentiles with numpy, windows, stability and the generator's self-check.

A `Measurement` is immutable; warm-up requests are counted apart and never mixed into the figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from tasks.loadgen.engine import Recording
from tasks.loadgen.protocols.base import ERROR_KINDS, OK
from tasks.loadgen.settings import LoadSettings

PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}
STABLE_WINDOWS = 3  # perf_analyzer's rule: the last three windows agree
LATE_START_NS = 2_000_000  # an open-loop send more than 2 ms after its scheduled time is late
GENERATOR_SATURATED_CPU_PCT = 90.0  # the generator used (nearly) a whole core: it may have set the pace
GENERATOR_SATURATED_LATE_FRACTION = 0.01


@dataclass(frozen=True)
class Measurement:
    duration_s: float
    requests: int
    errors: int
    error_rate: float
    errors_by_kind: dict
    warmup_requests: int
    throughput_rps: float
    throughput_sps: float
    latency_ms_mean: float | None
    latency_ms_p50: float | None
    latency_ms_p90: float | None
    latency_ms_p95: float | None
    latency_ms_p99: float | None
    latency_ms_p999: float | None
    latency_ms_max: float | None
    latency_from: str  # "sent" (closed loop) or "scheduled" (open loop)
    windows: int
    window_throughput_rps: tuple
    stable: bool
    cv: float | None
    late_starts: int
    schedule_lag_ms_p99: float | None
    generator_cpu_pct: float
    generator_saturated: bool

    def to_dict(self) -> dict:
        data = asdict(self)
        data["window_throughput_rps"] = list(self.window_throughput_rps)
        return data


def latencies_ms(recording: Recording, latency_from: str) -> np.ndarray:
    """Latencies of the measured, successful requests."""
    start = recording.scheduled_ns if latency_from == "scheduled" else recording.sent_ns
    measured = (recording.scheduled_ns >= recording.warmup_end_ns) & (recording.scheduled_ns < recording.end_ns)
    ok = measured & (recording.codes == OK)
    return (recording.done_ns[ok] - start[ok]) / 1e6


def summarize(recording: Recording, settings: LoadSettings, latency_from: str = "sent") -> Measurement:
    measured = (recording.scheduled_ns >= recording.warmup_end_ns) & (recording.scheduled_ns < recording.end_ns)
    codes = recording.codes[measured]
    requests = int(measured.sum())
    errors = int((codes != OK).sum())
    lat = latencies_ms(recording, latency_from)
    duration_s = (recording.end_ns - recording.warmup_end_ns) / 1e9
    ok_count = requests - errors

    window_ns = int(settings.window_s * 1e9)
    n_windows = int((recording.end_ns - recording.warmup_end_ns) // window_ns)
    ok_sched = recording.scheduled_ns[measured][codes == OK]
    index = (ok_sched - recording.warmup_end_ns) // window_ns
    counts = np.bincount(index[index < n_windows].astype(np.int64), minlength=n_windows)[:n_windows]
    window_rps = counts / settings.window_s
    stable = False
    if n_windows >= STABLE_WINDOWS:
        last = window_rps[-STABLE_WINDOWS:]
        mean = float(last.mean())
        stable = mean > 0 and bool(np.all(np.abs(last - mean) <= mean * settings.stability_pct / 100))
    cv = float(window_rps.std() / window_rps.mean()) if n_windows >= 2 and window_rps.mean() > 0 else None

    lag = (recording.sent_ns[measured] - recording.scheduled_ns[measured])
    late = int((lag > LATE_START_NS).sum())
    cpu_pct = 100.0 * recording.generator_cpu_s / recording.wall_s if recording.wall_s > 0 else 0.0
    saturated = cpu_pct >= GENERATOR_SATURATED_CPU_PCT or (
        latency_from == "scheduled" and requests > 0 and late / requests > GENERATOR_SATURATED_LATE_FRACTION)

    def pct(q: float) -> float | None:
        return float(np.percentile(lat, q)) if lat.size else None

    return Measurement(
        duration_s=duration_s, requests=requests, errors=errors,
        error_rate=errors / requests if requests else 0.0,
        errors_by_kind={ERROR_KINDS[int(k)]: int((codes == k).sum()) for k in np.unique(codes) if k != OK},
        warmup_requests=int((recording.scheduled_ns < recording.warmup_end_ns).sum()),
        throughput_rps=ok_count / duration_s, throughput_sps=ok_count * settings.batch_size / duration_s,
        latency_ms_mean=float(lat.mean()) if lat.size else None,
        **{f"latency_ms_{k}": pct(q) for k, q in PERCENTILES.items()},
        latency_ms_max=float(lat.max()) if lat.size else None,
        latency_from=latency_from, windows=n_windows, window_throughput_rps=tuple(float(v) for v in window_rps),
        stable=stable, cv=cv, late_starts=late,
        schedule_lag_ms_p99=float(np.percentile(lag, 99) / 1e6) if lag.size else None,
        generator_cpu_pct=cpu_pct, generator_saturated=bool(saturated),
    )
