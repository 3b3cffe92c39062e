"""Summaries of a recording: percentiles, windows, stability, a throughput interval and the generator's self-check.

A `Measurement` is immutable; warm-up requests are counted apart and never mixed into the figures. A failed
request is counted by kind, never as a fast success.

Definitions, written down once:
- measured requests: scheduled (open loop) or sent (closed loop) in [warm-up end, end of measured time);
- throughput_rps: successful completions inside the measured time / its length (a server that falls behind
  an open-loop schedule shows its real pace, not the offered rate);
- latency samples: every measured successful request, from its actual send (closed loop) or its scheduled
  send (open loop); plus *censored* samples, so that a hang cannot hide from the percentiles:
  - a request that timed out counts at its timeout (at least `request_timeout_s`, more if it was given up
    later), an open-loop request never sent counts at the time it waited until the generator gave up;
  - closed loop: while a connection slot waits on a request that ends in a timeout, it would have sent
    requests every E (the slot's median successful latency) had the server answered: coordinated omission.
    Those omitted requests count as censored samples too, each at the time from its would-be send to the
    end of the slot's stall (consecutive timeouts of the slot are one stall), the expected-interval
    correction of HdrHistogram/wrk. At most OMITTED_SAMPLES_PER_STALL are materialized per stall, each
    weighted so that they stand for all of them.
  `censored` and `omitted` count both kinds; `latency_ms_*` are percentiles over all samples, weighted, each
  the inverted CDF (the smallest sample whose cumulative weight reaches q %: always a latency that was seen);
- latency_samples: the requests the percentiles rest on: successes, timeouts and requests never sent (the slow
  ones count); the omitted stand-ins are not independent draws and do not add to it. Each percentile carries a
  distribution-free 95 % interval and, where the requests are too few for it (fewer than 1 / (1 - q), so the
  estimate would be the sample maximum), no figure but a lower bound, `_at_least` (tasks/core/confidence.py;
  docs/measuring.md#confidence);
- windows: the measured time is cut into `window_s` time windows, each counting successful completions; where
  those hold fewer than MIN_WINDOW_COMPLETIONS on average (a slow model: one request more or less would move
  a window by several %), windows are cut by request count instead (perf_analyzer's count windows): K
  consecutive completions per window, its throughput K / the time they spanned (`window_basis` says which);
- cv: the coefficient of variation of the windows' throughputs; throughput_rps_ci_low/high: a 95 % interval
  of throughput, throughput_rps x (1 -/+ t(0.975, n-1) x sd / (mean x sqrt(n))) over the n windows;
- stable: the last STABLE_WINDOWS windows' throughputs each lie within stability_pct of their mean;
- late start: a send more than LATE_START_NS after its scheduled time (open loop only), whatever the cause;
- generator late start: one of those the generator itself reached late (`Recording.generator_late`), not one
  it reached on time that then waited for a free connection while the server was slow;
- generator_saturated: some worker used >= GENERATOR_SATURATED_CPU_PCT of a core, or more than
  GENERATOR_SATURATED_LATE_FRACTION of the open-loop sends (and at least GENERATOR_SATURATED_MIN_LATE: at 6 req/s
  one late wake-up of a busy VM is 2 % of a point) were generator late starts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from tasks.core.confidence import PERCENTILE_LEVELS, PercentileClaim, exceedance, percentile_claim
from tasks.loadgen import histogram
from tasks.loadgen.protocols.base import ERROR_KINDS, NOT_SENT, OK, TIMEOUT
from tasks.loadgen.recording import LATE_START_NS, Recording, window_counts, window_stable
from tasks.loadgen.settings import LoadSettings

# the published percentiles, key -> level (the one list: tasks/core/confidence.py)
PERCENTILES = {column.removeprefix("latency_ms_"): q for column, q in PERCENTILE_LEVELS.items()}
GENERATOR_SATURATED_CPU_PCT = 90.0  # a worker used (nearly) a whole core: it may have set the pace
GENERATOR_SATURATED_LATE_FRACTION = 0.01
GENERATOR_SATURATED_MIN_LATE = 5  # fewer late starts than this are a VM's scheduling hiccup, not a saturated client
LATENCY_FROM = ("sent", "scheduled")
MIN_WINDOW_COMPLETIONS = 50  # below this many completions per time window on average, windows are cut by count
MIN_COUNT_WINDOW = 5  # a count window holds at least this many completions
OMITTED_SAMPLES_PER_STALL = 2000
T_DECIMALS = 3  # the t quantile's precision in the throughput interval (a printed table's)


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


TIMING_PARTS = ("queue_ms", "decode_ms", "infer_ms", "encode_ms")  # a request's time inside the server, in order


@dataclass(frozen=True)
class ServerTiming:
    """What the server itself says its requests' time went to over the measured window: per request means (ms).

    Built from the increases of cumulative sums a server exposes (`requests` timed, `server_ms` their total inside
    the server, and any of TIMING_PARTS: waiting in its queue, decoding the request into the engine's inputs, the
    engine, encoding the outputs into the response). A part the server does not report is None, never 0; so is a
    sum that did not grow at all while the server timed requests (TorchServe counts its gRPC requests but adds
    their time to none of its latency counters): a real duration summed over requests is never exactly zero.
    """

    requests: float
    server_ms: float | None = None
    queue_ms: float | None = None
    decode_ms: float | None = None
    infer_ms: float | None = None
    encode_ms: float | None = None

    @classmethod
    def from_deltas(cls, deltas: dict[str, float]) -> ServerTiming | None:
        """From the window's increases (keys `requests`, `server_ms`, TIMING_PARTS); None without timed requests."""
        count = deltas.get("requests")
        if not count or count <= 0:
            return None
        return cls(count, **{k: deltas[k] / count for k in ("server_ms", *TIMING_PARTS) if deltas.get(k, 0) > 0})


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
    window_basis: str = "time"  # "time" (window_s windows) or "count" (K completions each)
    throughput_rps_ci_low: float | None = None
    throughput_rps_ci_high: float | None = None
    censored: int = 0  # latency samples of requests that timed out or were never sent (at their lower bound)
    omitted: int = 0  # closed loop: requests a stalled slot would have sent (coordinated omission), as samples
    first_error: str = ""  # the message of the earliest failed request
    request_bytes: int | None = None  # the payload of one request: its HTTP body or gRPC message
    response_bytes: float | None = None  # the mean payload of a successful response
    server_timed_requests: float | None = None  # the requests the server's timings (below) are over
    server_ms: float | None = None  # the server's own total per request, where it reports one
    queue_ms: float | None = None
    decode_ms: float | None = None
    infer_ms: float | None = None
    encode_ms: float | None = None
    outside_ms: float | None = None  # latency_ms_mean - server_ms: the client, the network and the server's front
    # the server's CPU over the measured window (100 = one core), from its CPU time read at both ends of it; None
    # where no reader was given or a read failed (the caller then has only its sampled mean over the load point)
    server_window_cpu_pct: float | None = None
    latency_samples: int = 0  # the requests the percentiles rest on (module docstring)
    # per bound of the settings' `bounds_ms`: (bound_ms, requests slower than it, the effective count of that
    # series): what a "p99 within the bound" decision is taken on (tasks/core/confidence.py)
    bound_counts: tuple = ()
    # each percentile's 95 % interval (None: no end on that side) and, where it is only a lower bound, that bound
    latency_ms_p50_ci_low: float | None = None
    latency_ms_p50_ci_high: float | None = None
    latency_ms_p50_at_least: float | None = None
    latency_ms_p90_ci_low: float | None = None
    latency_ms_p90_ci_high: float | None = None
    latency_ms_p90_at_least: float | None = None
    latency_ms_p95_ci_low: float | None = None
    latency_ms_p95_ci_high: float | None = None
    latency_ms_p95_at_least: float | None = None
    latency_ms_p99_ci_low: float | None = None
    latency_ms_p99_ci_high: float | None = None
    latency_ms_p99_at_least: float | None = None
    latency_ms_p999_ci_low: float | None = None
    latency_ms_p999_ci_high: float | None = None
    latency_ms_p999_at_least: float | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["window_throughput_rps"] = list(self.window_throughput_rps)
        data["bound_counts"] = [list(c) for c in self.bound_counts]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Measurement:
        return cls(**{**data, "window_throughput_rps": tuple(data["window_throughput_rps"]),
                      "bound_counts": tuple(tuple(c) for c in data.get("bound_counts", ()))})

    def errors_by_kind_json(self) -> str:
        return json.dumps(self.errors_by_kind, sort_keys=True)


def server_cpu(measurement: Measurement, sampled_pct: float | None) -> tuple[float | None, float | None]:
    """The server's CPU % and CPU time per request (µs) of a load point: over its measured window where its CPU
    time was read at both ends (`server_window_cpu_pct`), else `sampled_pct`, a resource sampler's mean over the
    whole point (which also counts the server idle while the generator starts)."""
    pct = measurement.server_window_cpu_pct if measurement.server_window_cpu_pct is not None else sampled_pct
    rps = measurement.throughput_rps
    return pct, (pct / 100.0 / rps * 1e6 if pct is not None and rps else None)


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


def t_975(df: int) -> float:
    """Student's t quantile 0.975 for `df` >= 1 degrees of freedom (scipy), at T_DECIMALS decimals."""
    from scipy import stats  # imported here: a generator worker that never summarizes does not load scipy

    return round(float(stats.t.ppf(0.975, max(df, 1))), T_DECIMALS)


def request_latencies_ns(recording: Recording, start_ns: np.ndarray, timeout_ns: int) -> np.ndarray:
    """Each request's latency from `start_ns` (its scheduled or its actual send): a timed-out request at least the
    timeout, a request never sent at its wait (never below zero). The one rule of a censored sample."""
    latency = recording.done_ns - start_ns
    timed_out = recording.codes == TIMEOUT
    latency[timed_out] = np.maximum(latency[timed_out], timeout_ns)
    return np.maximum(latency, 0)


def ordered_latencies_ms(recording: Recording, latency_from: str, timeout_ns: int) -> np.ndarray:
    """The latencies of the measured requests the percentiles rest on (successes, timeouts, requests never sent:
    see the module docstring), in the order they were scheduled: what a bound is decided on."""
    latency = request_latencies_ns(recording, recording.scheduled_ns if latency_from == "scheduled"
                                   else recording.sent_ns, timeout_ns)
    real = measured_mask(recording) & np.isin(recording.codes, (OK, TIMEOUT, NOT_SENT))
    index = np.flatnonzero(real)
    index = index[np.argsort(recording.scheduled_ns[index], kind="stable")]
    return latency[index] / 1e6


def claim_columns(claims: dict[str, PercentileClaim]) -> dict:
    """The published columns of the percentiles' claims: `latency_ms_<k>_ci_low/_ci_high/_at_least`."""
    out: dict = {}
    for key, claim in claims.items():
        out[f"latency_ms_{key}_ci_low"] = claim.ci_low
        out[f"latency_ms_{key}_ci_high"] = claim.ci_high
        out[f"latency_ms_{key}_at_least"] = claim.at_least
    return out


def latency_samples(recording: Recording, latency_from: str, timeout_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(latencies in ns, weights) of the measured requests: successes, censored failures and, in the closed
    loop, the requests omitted during stalls (see the module docstring)."""
    if latency_from not in LATENCY_FROM:
        raise ValueError(f"latency_from={latency_from!r}: must be one of {list(LATENCY_FROM)}")
    latency = request_latencies_ns(recording, recording.scheduled_ns if latency_from == "scheduled"
                                   else recording.sent_ns, timeout_ns)
    measured = measured_mask(recording)
    codes = recording.codes
    ok = measured & (codes == OK)
    timed_out = measured & (codes == TIMEOUT)
    not_sent = measured & (codes == NOT_SENT)
    values = [latency[ok], latency[timed_out], latency[not_sent]]
    weights = [np.ones(int(ok.sum())), np.ones(int(timed_out.sum())), np.ones(int(not_sent.sum()))]
    if latency_from == "sent" and recording.slots is not None and timed_out.any():
        omitted_values, omitted_weights = omitted_samples(recording)
        values.append(omitted_values)
        weights.append(omitted_weights)
    return np.concatenate(values).astype(np.int64), np.concatenate(weights)


def omitted_samples(recording: Recording) -> tuple[np.ndarray, np.ndarray]:
    """Closed loop: censored samples for the requests each slot would have sent while stalled on a timeout."""
    codes, slots = recording.codes, recording.slots
    ok_latency = recording.done_ns - recording.sent_ns
    all_ok = ok_latency[codes == OK]
    values, weights = [], []
    for slot in np.unique(slots[codes == TIMEOUT]):
        mine = np.flatnonzero(slots == slot)
        mine = mine[np.argsort(recording.sent_ns[mine], kind="stable")]
        slot_ok = ok_latency[mine][codes[mine] == OK]
        interval = float(np.median(slot_ok if slot_ok.size else all_ok)) if (slot_ok.size or all_ok.size) else 0.0
        if interval <= 0:
            continue  # never answered at all: nothing tells how often it would have sent
        for first, last in _stalls(codes[mine]):
            stall_start, stall_end = int(recording.sent_ns[mine[first]]), int(recording.done_ns[mine[last]])
            lo = max(stall_start + interval, recording.warmup_end_ns)  # would-be sends inside the measured time
            hi = min(stall_end, recording.end_ns)
            count = int(np.ceil((hi - lo) / interval)) if hi > lo else 0
            if count <= 0:
                continue
            shown = min(count, OMITTED_SAMPLES_PER_STALL)
            sends = lo + (np.arange(shown) + 0.5) * (hi - lo) / shown
            values.append((stall_end - sends).astype(np.int64))
            weights.append(np.full(shown, count / shown))
    if not values:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(values), np.concatenate(weights)


def _stalls(codes: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of consecutive timeouts in one slot's requests (in send order)."""
    runs, first = [], None
    for i, code in enumerate(codes):
        if code == TIMEOUT:
            first = i if first is None else first
        elif first is not None:
            runs.append((first, i - 1))
            first = None
    if first is not None:
        runs.append((first, len(codes) - 1))
    return runs


def throughput_windows(recording: Recording, settings: LoadSettings) -> tuple[np.ndarray, str]:
    """Each window's throughput (req/s) and the basis, "time" or "count" (see the module docstring)."""
    window_ns = int(settings.window_s * 1e9)
    span_ns = recording.end_ns - recording.warmup_end_ns
    n_windows = int(span_ns // window_ns)
    counts = window_counts(recording.done_ns, recording.codes, recording.warmup_end_ns, window_ns, n_windows)
    if n_windows == 0 or counts.mean() >= MIN_WINDOW_COMPLETIONS:
        return counts / settings.window_s, "time"
    done = np.sort(recording.done_ns[(recording.codes == OK) & (recording.done_ns >= recording.warmup_end_ns)
                                     & (recording.done_ns < recording.end_ns)])
    size = max(MIN_COUNT_WINDOW, len(done) // max(n_windows, 1))
    edges = done[::size]
    if len(edges) < 2:
        return np.zeros(0), "count"
    spans_s = np.diff(edges) / 1e9
    return np.where(spans_s > 0, size / np.where(spans_s > 0, spans_s, 1), 0.0), "count"


def summarize(recording: Recording, settings: LoadSettings, latency_from: str = "sent",
              server: ServerCounts | None = None, timing: ServerTiming | None = None,
              server_window_cpu_pct: float | None = None) -> Measurement:
    measured = measured_mask(recording)
    codes = recording.codes[measured]
    requests = int(measured.sum())
    errors = int((codes != OK).sum())
    ok_count = requests - errors
    lat_ns, weights = latency_samples(recording, latency_from, int(settings.request_timeout_s * 1e9))
    lat = lat_ns / 1e6
    censored = int((codes == TIMEOUT).sum() + (codes == NOT_SENT).sum())
    omitted = int(round(float(weights.sum()))) - ok_count - censored
    duration_s = (recording.end_ns - recording.warmup_end_ns) / 1e9
    in_time = (recording.codes == OK) & (recording.done_ns >= recording.warmup_end_ns) & (
        recording.done_ns < recording.end_ns)
    completed = int(in_time.sum())
    throughput_rps = completed / duration_s

    window_rps, basis = throughput_windows(recording, settings)
    n_windows = len(window_rps)
    mean_rps = float(window_rps.mean()) if n_windows else 0.0
    cv = float(window_rps.std() / mean_rps) if n_windows >= 2 and mean_rps > 0 else None
    ci_low = ci_high = None
    if n_windows >= 2 and mean_rps > 0:
        half = t_975(n_windows - 1) * float(window_rps.std(ddof=1)) / (mean_rps * np.sqrt(n_windows))
        ci_low, ci_high = max(0.0, throughput_rps * (1 - half)), throughput_rps * (1 + half)

    lag = recording.sent_ns[measured] - recording.scheduled_ns[measured]
    late = int((lag > LATE_START_NS).sum())
    cpu_pct = max(recording.worker_cpu_pct, default=0.0)
    total = len(recording.codes)
    generator_late = recording.generator_late
    saturated = cpu_pct >= GENERATOR_SATURATED_CPU_PCT or (
        latency_from == "scheduled" and requests > 0 and generator_late >= GENERATOR_SATURATED_MIN_LATE
        and generator_late / requests > GENERATOR_SATURATED_LATE_FRACTION)

    ordered = ordered_latencies_ms(recording, latency_from, int(settings.request_timeout_s * 1e9))
    claims = {k: percentile_claim(lat, weights, ordered, q) for k, q in PERCENTILES.items()}

    mean_ms = float(np.average(lat, weights=weights)) if lat.size else None
    ok_total = int((recording.codes == OK).sum())
    parts = {k: getattr(timing, k) for k in ("server_ms", *TIMING_PARTS)} if timing else {}
    outside = mean_ms - parts["server_ms"] if mean_ms is not None and parts.get("server_ms") is not None else None

    return Measurement(
        duration_s=duration_s, requests=requests, errors=errors,
        error_rate=errors / requests if requests else 0.0,
        errors_by_kind={ERROR_KINDS[int(k)]: int((codes == k).sum()) for k in np.unique(codes) if k != OK},
        timeouts=int((codes == TIMEOUT).sum()),
        warmup_requests=int((recording.scheduled_ns < recording.warmup_end_ns).sum()),
        throughput_rps=throughput_rps, throughput_sps=completed * settings.batch_size / duration_s,
        latency_ms_mean=mean_ms,
        **{f"latency_ms_{k}": claim.estimate for k, claim in claims.items()},
        latency_ms_max=float(lat.max()) if lat.size else None,
        latency_from=latency_from, windows=n_windows, window_throughput_rps=tuple(float(v) for v in window_rps),
        stable=window_stable(window_rps, settings.stability_pct), stopped_early=recording.stopped_early, cv=cv,
        late_starts=late, generator_late_starts=generator_late,
        schedule_lag_ms_p99=float(np.percentile(lag, 99) / 1e6) if lag.size else None,
        generator_cpu_pct=cpu_pct,
        generator_cpu_us_per_request=recording.generator_cpu_s * 1e6 / total if total else None,
        generator_saturated=bool(saturated), workers=recording.workers,
        latency_hdr=histogram.encode(histogram.histogram_from_ns(lat_ns, weights)),
        server_requests=server.server_requests if server else None,
        server_throughput_rps=server.server_throughput_rps if server else None,
        server_client_requests=server.client_requests if server else None,
        window_basis=basis, throughput_rps_ci_low=ci_low, throughput_rps_ci_high=ci_high,
        censored=censored, omitted=max(0, omitted), first_error=recording.first_error,
        request_bytes=recording.request_bytes or None,
        response_bytes=recording.response_bytes / ok_total if ok_total and recording.response_bytes else None,
        server_timed_requests=timing.requests if timing else None, **parts, outside_ms=outside,
        server_window_cpu_pct=server_window_cpu_pct, latency_samples=len(ordered), **claim_columns(claims),
        bound_counts=tuple((float(b), *exceedance(ordered, b)) for b in settings.bounds_ms),
    )
