"""Every published metric, declared once with its unit and its good direction.

Reports and regression checks read this table; nothing else decides whether up is good.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"


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


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("throughput_rps", "req/s", HIGHER, "Throughput"),
    Metric("throughput_sps", "samples/s", HIGHER, "Samples per second"),
    Metric("latency_ms_mean", "ms", LOWER, "Latency mean"),
    Metric("latency_ms_p50", "ms", LOWER, "Latency p50"),
    Metric("latency_ms_p90", "ms", LOWER, "Latency p90"),
    Metric("latency_ms_p95", "ms", LOWER, "Latency p95"),
    Metric("latency_ms_p99", "ms", LOWER, "Latency p99"),
    Metric("latency_ms_p999", "ms", LOWER, "Latency p99.9"),
    Metric("error_rate", "ratio", LOWER, "Error rate"),
    Metric("startup_s", "s", LOWER, "Start-up time"),
    Metric("server_cpu_pct", "%", LOWER, "Server CPU"),
    Metric("server_rss_mb", "MiB", LOWER, "Server memory"),
    # derived in the report: throughput_rps / (server_cpu_pct / 100), the requests one busy core serves
    Metric("throughput_rps_per_core", "req/s per core", HIGHER, "Throughput per CPU core"),
    # the served-output check before load and the artifact's parity: worst |a-b| / (atol + rtol*|b|), <= 1 passes
    Metric("served_err_ratio", "× tolerance", LOWER, "Served-output error"),
    Metric("max_err_ratio", "× tolerance", LOWER, "Parity error"),
)}
