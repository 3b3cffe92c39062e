"""Every published metric, declared once with its unit and its good direction.

Reports and regression checks read this table; nothing else decides whether up is good.
"""

from __future__ import annotations

from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"


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
)}
