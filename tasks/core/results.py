"""The results table contract (DESIGN.md): one row per cell, versioned; Parquet and CSV.

Columns are declared once here with their types; rows are plain dicts until `to_frame`.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = "1.3"  # 1.1: `protocol`; 1.2: `generator_late_starts`; 1.3: see COLUMNS_SINCE
STATUSES = ("ok", "failed", "skipped")
CELL_KEY = ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load", "config_id")
SESSION_KEY = CELL_KEY[:5]  # model, format, server, launcher, device: what one server session serves and where
POINT_KEY = (*CELL_KEY[:8], "protocol")  # a planned point: the cell key before a configuration, and its wire
DEFAULT_CONFIG_ID = "default"  # the `config_id` of an untuned server's rows (tasks/serve/knobs.py)

# name -> pandas dtype. Order is the published column order.
COLUMNS: dict[str, str] = {
    # run identity
    "run_id": "string", "logical_date": "string", "started_at": "string", "finished_at": "string",
    "schema_version": "string", "pipeline_version": "string", "git_sha": "string",
    "suite": "string",  # the evaluation suite the run's Params came from (suites/<name>.yaml), or null
    "role": "string",  # "control": the control cell the plan added (not part of the comparison); else null
    # cell key
    "model": "string", "format": "string", "server": "string", "launcher": "string", "device": "string",
    "batch_size": "Int64", "mode": "string", "load": "Float64",
    # what was served
    "model_sha256": "string", "server_version": "string", "runtime_image": "string", "engine": "string",
    "protocol": "string",  # the codec spoken (kserve_v2_rest, kserve_v2_grpc...); rows before 1.1: the server's REST
    "runtime_image_kind": "string",  # official (a registry's image) | project (built by `make images`) | venv
    "config_id": "string",  # short id of the serving configuration (knob values); "default" when untuned
    "config": "string",  # the serving configuration's knob values as JSON
    "best_config": "boolean",  # with a configuration search: this configuration won for its server and model
    "server_cpus": "string",  # the CPUs the server was given (a count or a CPU set), as applied
    "server_memory": "string",  # the server's memory limit as applied (e.g. "4g"), or null when none
    # host
    "hostname": "string", "cpu_model": "string", "cpu_count": "Int64", "gpu_name": "string", "gpu_driver": "string",
    # load outcome
    "duration_s": "Float64", "requests": "Int64", "errors": "Int64", "error_rate": "Float64",
    "throughput_rps": "Float64", "throughput_sps": "Float64",
    "throughput_rps_ci_low": "Float64", "throughput_rps_ci_high": "Float64",  # 95 % interval over the windows
    "latency_ms_mean": "Float64", "latency_ms_p50": "Float64", "latency_ms_p90": "Float64",
    "latency_ms_p95": "Float64", "latency_ms_p99": "Float64", "latency_ms_p999": "Float64",
    "latency_ms_max": "Float64", "latency_from": "string",
    "stable": "boolean", "windows": "Int64", "cv": "Float64",
    "late_starts": "Int64", "generator_late_starts": "Int64", "generator_cpu_pct": "Float64",
    "generator_saturated": "boolean",
    "warmup_requests": "Int64",
    "timeouts": "Int64", "errors_by_kind": "string", "stopped_early": "boolean", "schedule_lag_ms_p99": "Float64",
    "generator_cpu_us_per_request": "Float64", "workers": "Int64", "latency_hdr": "string",
    "server_requests": "Float64", "server_throughput_rps": "Float64",
    # the engine's own speed in process on the server's CPUs with its threads (tasks/measure/engine_speed.py): the
    # ceiling a stack serving the same engine is read against
    "engine_inprocess_rps": "Float64",
    # resources
    "server_cpu_pct": "Float64", "server_rss_mb": "Float64", "gpu_util_pct": "Float64", "gpu_mem_mb": "Float64",
    "gpu_power_w": "Float64",
    "startup_s": "Float64",
    # outcome: the served-output check before load (worst |a-b| / (atol + rtol*|b|) against the reference; <= 1
    # passes) and how many times the session's server was restarted before this point (a crash gets one restart)
    "served_err_ratio": "Float64", "restarts": "Int64",
    # a sweep's point that failed only because its load exceeded what the server sustains (the server healthy
    # after it, a lower load ok): the sweep's answer, not a fault; it does not make the run partial
    "beyond_capacity": "boolean",
    "status": "string", "reason": "string",
}
# Columns added in 1.3; rows of older runs read back with them empty.
COLUMNS_SINCE = {"1.3": ("suite", "role", "runtime_image_kind", "config_id", "config", "server_cpus", "server_memory",
                         "throughput_rps_ci_low", "throughput_rps_ci_high", "served_err_ratio", "restarts",
                         "beyond_capacity", "best_config", "engine_inprocess_rps")}
KEY_COLUMNS = ("run_id", "schema_version", *CELL_KEY, "status")


def cell_key(row: dict[str, Any]) -> tuple:
    """The cell key of a row (or a planned cell's fields): the one spelling of it. Rows from before schema 1.3 (no
    `config_id`) ran the default configuration."""
    return tuple((row.get(k) or DEFAULT_CONFIG_ID) if k == "config_id" else row.get(k) for k in CELL_KEY)


def empty_row() -> dict[str, Any]:
    return dict.fromkeys(COLUMNS)


def to_frame(rows: list[dict[str, Any]]):
    """Rows -> a DataFrame with exactly the contract's columns and types (unknown keys are dropped)."""
    import pandas as pd

    frame = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=list(COLUMNS))
    return frame.astype(COLUMNS)


def frame_records(frame) -> list[dict[str, Any]]:
    """A results frame back as plain row dicts: missing values None, numpy scalars as Python values."""
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in records]


def to_parquet_bytes(frame) -> bytes:
    import io

    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def to_csv_bytes(frame) -> bytes:
    return frame.to_csv(index=False).encode()
