"""Every published metric, declared once: its unit, its good direction, and what the other stages need to know of
it (how small a change still counts, how noisy it is from night to night, where it is judged and shown).

Reports, comparisons and regression checks read this table; nothing else decides whether up is good or which
metrics a stage looks at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"
DEFAULT_MIN_EFFECT = 0.05
DEFAULT_PRIOR_NOISE = 0.10
# under overload, a p99 within this multiple of the pre-burst p99 is where it was: the burst's, the stack held the load
# (tasks/validate/overload.py); a window's after it, the stack recovered (tasks/loadgen/overload.py)
OVERLOAD_P99_RATIO = 1.2


def number(value: object) -> float | None:
    """A metric's value as a finite float, or None for missing, NaN/NA, booleans and text: the one reading every
    comparison, report and regression check makes of a published figure."""
    if value is None or isinstance(value, bool):
        return None
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: str  # HIGHER or LOWER
    label: str
    # below this relative change a significant change is still no change (the regression check, comparisons)
    min_effect: float = DEFAULT_MIN_EFFECT
    # ... and below this absolute change (in `unit`) too: start-ups were read in 0.1 s steps until readiness was
    # polled finely (tasks/serve/session.py), and a start-up 0.15 s slower is not what anyone scales on
    min_abs_change: float | None = None
    prior_noise: float = DEFAULT_PRIOR_NOISE  # a quiet host's night-to-night spread (log), the noise model's prior
    judged: bool = False  # the regression check tests it
    compared: bool = False  # `tasks.cli compare` and the trend compare it cell by cell
    reported: bool = False  # a column of the report's per-model tables
    drift: bool = False  # the control's drift is reported in it
    window_spread: bool = False  # its within-run spread is the windows' throughput CV (closed loop: latency ~ 1/rate)
    same_figure_as: str | None = None  # the same figure in another unit: one hypothesis, not two, in a night's tests
    duet: bool = False  # a duet's verdict is on its pairs' ratios of it (tasks/regress/duet_verdict.py)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("throughput_rps", "req/s", HIGHER, "Throughput", prior_noise=0.05, judged=True, compared=True,
           reported=True, drift=True, window_spread=True, duet=True),
    Metric("throughput_sps", "samples/s", HIGHER, "Samples per second", prior_noise=0.05, judged=True,
           window_spread=True, same_figure_as="throughput_rps"),  # requests/s times the batch size
    Metric("latency_ms_mean", "ms", LOWER, "Latency mean", prior_noise=0.05, judged=True, window_spread=True),
    Metric("latency_ms_p50", "ms", LOWER, "Latency p50", prior_noise=0.04, judged=True, compared=True, reported=True,
           drift=True, window_spread=True, duet=True),
    Metric("latency_ms_p90", "ms", LOWER, "Latency p90", prior_noise=0.06, judged=True, window_spread=True),
    Metric("latency_ms_p95", "ms", LOWER, "Latency p95", prior_noise=0.08, judged=True, window_spread=True),
    Metric("latency_ms_p99", "ms", LOWER, "Latency p99", prior_noise=0.12, judged=True, compared=True, reported=True,
           drift=True, window_spread=True, duet=True),
    Metric("latency_ms_p999", "ms", LOWER, "Latency p99.9", min_effect=0.10, prior_noise=0.20, judged=True,
           window_spread=True),
    Metric("error_rate", "ratio", LOWER, "Error rate", judged=True, reported=True),
    Metric("server_cpu_pct", "%", LOWER, "Server CPU", reported=True),
    Metric("server_rss_mb", "MiB", LOWER, "Server memory", reported=True),
    # the server's CPU time per request: what a duet judges first (it passes through host noise least)
    Metric("server_cpu_us_per_request", "µs", LOWER, "Server CPU per request", reported=True, duet=True),
    # what serving costs (tasks/core/cost.py): per 1,000 inferences (samples), and with prices per million
    Metric("server_core_s_per_1k", "core-s / 1k inferences", LOWER, "Server CPU-core-seconds per 1,000 inferences"),
    Metric("gpu_s_per_1k", "GPU-s / 1k inferences", LOWER, "GPU-seconds per 1,000 inferences"),
    Metric("price_per_million", "price / 1M inferences", LOWER, "Price of a million inferences"),
    # under overload (tasks/loadgen/overload.py): what a stack still serves at 1.5x and 3x its capacity, and after
    Metric("goodput_rps", "req/s", HIGHER, "Goodput during the burst"),
    Metric("goodput_pct", "% of capacity", HIGHER, "Goodput during the burst, % of capacity"),
    Metric("burst_p99_ms", "ms", LOWER, "Latency p99 during the burst"),
    Metric("recovery_s", "s", LOWER, "Recovery time after the burst"),
    # the host's state during a point (tasks/measure/hoststate.py): lower is a quieter host, judged by
    # tasks/validate/outcome.py, never ranked or regressed
    Metric("neighbour_cpu_pct", "%", LOWER, "Neighbour CPU"),
    Metric("steal_pct", "%", LOWER, "Steal"),
    Metric("server_cpu_wait_pct", "%", LOWER, "Server run-queue wait"),
    Metric("startup_s", "s", LOWER, "Start-up time", min_effect=0.20, min_abs_change=0.15, prior_noise=0.15,
           judged=True, reported=True),
    # derived in the report: throughput_rps / (server_cpu_pct / 100), the requests one busy core serves
    Metric("throughput_rps_per_core", "req/s per core", HIGHER, "Throughput per CPU core"),
    # the served-output check before load and the artifact's parity: worst |a-b| / (atol + rtol*|b|), <= 1 passes
    Metric("served_err_ratio", "× tolerance", LOWER, "Served-output error"),
    Metric("max_err_ratio", "× tolerance", LOWER, "Parity error"),
    # what a request weighs on its wire: its payload (an HTTP body, a gRPC message) and its response's
    Metric("request_bytes", "bytes", LOWER, "Request payload"),
    Metric("response_bytes", "bytes", LOWER, "Response payload"),
    # where a request's time goes, per request as the stack reports it (tasks.loadgen.measurement.ServerTiming)
    Metric("server_ms", "ms", LOWER, "Inside the server"),
    Metric("queue_ms", "ms", LOWER, "Queue"),
    Metric("decode_ms", "ms", LOWER, "Request decode"),
    Metric("infer_ms", "ms", LOWER, "Inference"),
    Metric("encode_ms", "ms", LOWER, "Response encode"),
    Metric("outside_ms", "ms", LOWER, "Outside the server"),
    # derived in the report: 100 x (1 - JSON's throughput / the best wire's), what JSON costs a stack
    Metric("json_tax_pct", "%", LOWER, "JSON tax"),
    # how a server lives, per server life (tasks/measure/lifecycle.py): shown, never ranked or regressed
    Metric("first_correct_s", "s", LOWER, "Time to first correct answer"),
    Metric("idle_rss_mb", "MiB", LOWER, "Idle memory"),
    Metric("session_rss_peak_mb", "MiB", LOWER, "Peak memory over the session"),
    Metric("rss_growth_mb", "MiB", LOWER, "Memory growth over the load points"),
    Metric("runtime_size_mb", "MiB", LOWER, "Runtime size (image or venv)"),
)}


def bad_sign(metric: str) -> int:
    """+1 when a rise of `metric` is bad (latency), -1 when a fall is (throughput). A metric outside the table has no
    known good direction: a ValueError naming it, never a guess."""
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: not in the metrics table (tasks/core/metrics.py), so whether a rise is "
                         "bad is unknown")
    return -1 if METRICS[metric].better == HIGHER else 1


def metrics_where(flag: str) -> tuple[str, ...]:
    """The names of the metrics with `flag` set (judged, compared, reported, drift, window_spread, duet), in table
    order."""
    return tuple(name for name, metric in METRICS.items() if getattr(metric, flag))
