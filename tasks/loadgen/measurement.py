"""Summaries of a recording: percentiles with numpy, windows, stability and the generator's self-check.

A `Measurement` is immutable; warm-up requests are counted apart and never mixed into the figures. Only
successful requests give latencies: a failed request is counted by kind, never as a fast (or slow) success.

Definitions, written down once:
- measured requests: scheduled (open loop) or sent (closed loop) in [warm-up end, end of measured time);
- throughput_rps: successful completions inside the measured time / its length (a server that falls behind
  an open-loop schedule shows its real pace, not the offered rate);
- window k: the successful completions whose completion time falls in [warm-up end + k*window_s, ... +window_s);
  `window_throughput_rps` is their count / window_s, `cv` their coefficient of variation;
- stable: the last STABLE_WINDOWS windows' throughputs each lie within stability_pct of their mean;
- late start: a send more than LATE_START_NS after its scheduled time (open loop only), whatever the cause;
- generator late start: one of those the generator itself reached late (`Recording.generator_late`), not one
  it reached on time that then waited for a free connection while the server was slow;
- generator_saturated: some worker used >= GENERATOR_SATURATED_CPU_PCT of a core, or more than
  GENERATOR_SATURATED_LATE_FRACTION of the open-loop sends were generator late starts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from tasks.loadgen import histogram
from tasks.loadgen.engine import LATE_START_NS, Recording
from tasks.loadgen.protocols.base import ERROR_KINDS, OK, TIMEOUT
from tasks.loadgen.settings import STABLE_WINDOWS, LoadSettings

PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}
GENERATOR_SATURATED_CPU_PCT = 90.0  # a worker used (nearly) a whole core: it may have set the pace
GENERATOR_SATURATED_LATE_FRACTION = 0.01
LATENCY_FROM = ("sent", "scheduled")


@dataclass(frozen=True)
class ServerCounts:
    """A server's own request counter (e.g. Triton nv_inference_request_success) next to the client's.

    `server_requests` is the counter's increase between two scrapes at `window_start_ns`/`window_end_ns`
    (relative to the recording's t0); `client_requests` the successful completions the client saw in that
    same interval. `*_total` are the increases over the whole load point (warm-up and drain included).
    """

    window_start_ns: int
    window_end_ns: int
    server_requests: float
    client_requests: int
    server_requests_total: float
    client_requests_total: int

    @property
    def server_throughput_rps(self) -> float | None:
        span_s = (self.window_end_ns - self.window_start_ns) / 1e9
        return self.server_requests / span_s if span_s > 0 else None


@dataclass(frozen=True)
class Measurement:
    duration_s: float
    requests: int
    errors: int
    error_rate: float
    errors_by_kind: dict
    timeouts: int
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
    stopped_early: bool
    cv: float | None
    late_starts: int
    generator_late_starts: int
    schedule_lag_ms_p99: float | None
    generator_cpu_pct: float  # the busiest worker's CPU, 100 = one core
    generator_cpu_us_per_request: float | None
    generator_saturated: bool
    workers: int
    latency_hdr: str  # HdrHistogram (us), base64: for merging, never for the figures above
    server_requests: float | None = None
    server_throughput_rps: float | None = None
    server_client_requests: int | None = None  # the client's successes over the server counter's window

    def to_dict(self) -> dict:
        data = asdict(self)
        data["window_throughput_rps"] = list(self.window_throughput_rps)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Measurement:
        return cls(**{**data, "window_throughput_rps": tuple(data["window_throughput_rps"])})

    def errors_by_kind_json(self) -> str:
        return json.dumps(self.errors_by_kind, sort_keys=True)


def measured_mask(recording: Recording) -> np.ndarray:
    return (recording.scheduled_ns >= recording.warmup_end_ns) & (recording.scheduled_ns < recording.end_ns)


def latencies_ns(recording: Recording, latency_from: str) -> np.ndarray:
    """Latencies of the measured, successful requests, from the scheduled or the actual send time."""
    if latency_from not in LATENCY_FROM:
        raise ValueError(f"latency_from={latency_from!r}: must be one of {list(LATENCY_FROM)}")
    start = recording.scheduled_ns if latency_from == "scheduled" else recording.sent_ns
    ok = measured_mask(recording) & (recording.codes == OK)
    return recording.done_ns[ok] - start[ok]


def latencies_ms(recording: Recording, latency_from: str) -> np.ndarray:
    return latencies_ns(recording, latency_from) / 1e6


def window_counts(done_ns: np.ndarray, codes: np.ndarray, start_ns: int, window_ns: int, n_windows: int) -> np.ndarray:
    """Successful completions per window: the one definition used by the summary and the stop rule."""
    ok_done = done_ns[(codes == OK) & (done_ns >= start_ns)]
    index = (ok_done - start_ns) // window_ns
    return np.bincount(index[index < n_windows].astype(np.int64), minlength=n_windows)[:n_windows]


def window_stable(window_rps: np.ndarray, stability_pct: float) -> bool:
    """perf_analyzer's rule: the last STABLE_WINDOWS windows each lie within stability_pct of their mean."""
    if len(window_rps) < STABLE_WINDOWS:
        return False
    last = np.asarray(window_rps[-STABLE_WINDOWS:], dtype=float)
    mean = float(last.mean())
    return mean > 0 and bool(np.all(np.abs(last - mean) <= mean * stability_pct / 100))


def summarize(recording: Recording, settings: LoadSettings, latency_from: str = "sent",
              server: ServerCounts | None = None) -> Measurement:
    measured = measured_mask(recording)
    codes = recording.codes[measured]
    requests = int(measured.sum())
    errors = int((codes != OK).sum())
    lat_ns = latencies_ns(recording, latency_from)
    lat = lat_ns / 1e6
    duration_s = (recording.end_ns - recording.warmup_end_ns) / 1e9
    in_time = (recording.codes == OK) & (recording.done_ns >= recording.warmup_end_ns) & (
        recording.done_ns < recording.end_ns)
    completed = int(in_time.sum())

    window_ns = int(settings.window_s * 1e9)
    n_windows = int((recording.end_ns - recording.warmup_end_ns) // window_ns)
    counts = window_counts(recording.done_ns, recording.codes, recording.warmup_end_ns, window_ns, n_windows)
    window_rps = counts / settings.window_s
    cv = float(window_rps.std() / window_rps.mean()) if n_windows >= 2 and window_rps.mean() > 0 else None

    lag = recording.sent_ns[measured] - recording.scheduled_ns[measured]
    late = int((lag > LATE_START_NS).sum())
    cpu_pct = max(recording.worker_cpu_pct, default=0.0)
    total = len(recording.codes)
    generator_late = recording.generator_late
    saturated = cpu_pct >= GENERATOR_SATURATED_CPU_PCT or (
        latency_from == "scheduled" and requests > 0 and generator_late / requests > GENERATOR_SATURATED_LATE_FRACTION)

    def pct(q: float) -> float | None:
        return float(np.percentile(lat, q)) if lat.size else None

    return Measurement(
        duration_s=duration_s, requests=requests, errors=errors,
        error_rate=errors / requests if requests else 0.0,
        errors_by_kind={ERROR_KINDS[int(k)]: int((codes == k).sum()) for k in np.unique(codes) if k != OK},
        timeouts=int((codes == TIMEOUT).sum()),
        warmup_requests=int((recording.scheduled_ns < recording.warmup_end_ns).sum()),
        throughput_rps=completed / duration_s, throughput_sps=completed * settings.batch_size / duration_s,
        latency_ms_mean=float(lat.mean()) if lat.size else None,
        **{f"latency_ms_{k}": pct(q) for k, q in PERCENTILES.items()},
        latency_ms_max=float(lat.max()) if lat.size else None,
        latency_from=latency_from, windows=n_windows, window_throughput_rps=tuple(float(v) for v in window_rps),
        stable=window_stable(window_rps, settings.stability_pct), stopped_early=recording.stopped_early, cv=cv,
        late_starts=late, generator_late_starts=generator_late,
        schedule_lag_ms_p99=float(np.percentile(lag, 99) / 1e6) if lag.size else None,
        generator_cpu_pct=cpu_pct,
        generator_cpu_us_per_request=recording.generator_cpu_s * 1e6 / total if total else None,
        generator_saturated=bool(saturated), workers=recording.workers,
        latency_hdr=histogram.encode(histogram.histogram_from_ns(lat_ns)),
        server_requests=server.server_requests if server else None,
        server_throughput_rps=server.server_throughput_rps if server else None,
        server_client_requests=server.client_requests if server else None,
    )
