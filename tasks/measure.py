"""One server session measured: start the server, run each of its load points, always stop it.

Every planned cell comes back as a row: `ok` with its figures, or `failed`/`skipped` with a reason. A
failure in one cell never loses the cells already measured.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from tasks.config import RunConfig
from tasks.convert import Artifact
from tasks.errors import ConfigError, ServingEvalError
from tasks.loadgen.measurement import Measurement
from tasks.loadgen.resources import sampler_for
from tasks.loadgen.run import run_load_point
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.sweep import concurrency_sweep, rate_sweep
from tasks.plan import SWEEP_MODES
from tasks.results import CELL_KEY, empty_row
from tasks.serve.base import Endpoint, ServingOptions
from tasks.serve.budget import ServerBudget, plan_budget
from tasks.serve.launchers import get_launcher
from tasks.serve.servers import get_server
from tasks.serve.session import server_session
from tasks.spec import load_spec

MEASUREMENT_COLUMNS = (
    "duration_s", "requests", "errors", "error_rate", "throughput_rps", "throughput_sps", "latency_ms_mean",
    "latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99", "latency_ms_p999", "latency_ms_max",
    "latency_from", "stable", "windows", "cv", "late_starts", "generator_late_starts", "generator_cpu_pct",
    "generator_saturated",
    "warmup_requests", "timeouts", "stopped_early", "schedule_lag_ms_p99", "generator_cpu_us_per_request", "workers",
    "latency_hdr", "server_requests", "server_throughput_rps",
)


def base_row(run: dict, cell: dict) -> dict:
    row = empty_row()
    row.update({k: run[k] for k in ("run_id", "logical_date", "started_at", "schema_version")})
    row.update(run["code"])
    row.update(run["host"])
    row.update({k: cell[k] for k in CELL_KEY})
    row["protocol"] = cell.get("protocol")
    return row


def not_measured(run: dict, cell: dict, status: str, reason: str, **extra: object) -> dict:
    row = base_row(run, cell)
    row.update(status=status, reason=reason[:4000], **extra)
    return row


def measure_session(session: dict, conversions: list[dict], run: dict, config: RunConfig) -> dict:
    """Measure every cell of one server session; return {"rows": [...], "timeline": {...}}. Every row records
    the CPU/memory budget its server was given (tasks/serve/budget.py)."""
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus)
    out = _measure_session(session, conversions, run, config, budget)
    for row in out["rows"]:
        row.update(budget.row_fields(config.launcher))
    return out


def _measure_session(session: dict, conversions: list[dict], run: dict, config: RunConfig,
                     budget: ServerBudget) -> dict:
    cells = session["cells"]
    timeline: dict = {"session_id": session["session_id"], "server": session["server"], "cells": {}}
    conv = next((c for c in conversions if c and (c["model"], c["format"]) == (session["model"], session["format"])),
                None)
    if conv and conv.get("skipped"):
        return {"rows": [not_measured(run, c, "skipped", conv["skipped"]) for c in cells], "timeline": timeline}
    if conv is None or conv.get("error"):
        reason = f"conversion to {session['format']} failed: {conv['error'] if conv else 'no conversion result'}"
        return {"rows": [not_measured(run, c, "failed", reason) for c in cells], "timeline": timeline}
    artifact = Artifact.from_dict(conv["artifact"])
    if not artifact.parity_passed:
        p = conv["parity"]
        reason = (f"artifact failed parity: max_abs_err={p['max_abs_err']:.3g} max_rel_err={p['max_rel_err']:.3g} "
                  f"(atol={p['atol']}, rtol={p['rtol']}); not served")
        return {"rows": [not_measured(run, c, "failed", reason, model_sha256=artifact.sha256) for c in cells],
                "timeline": timeline}
    spec = load_spec(session["model"])
    options = ServingOptions(max_batch_size=config.max_batch_size, dynamic_batching=config.dynamic_batching,
                             device=config.device, cpus=budget.cpu_count, images=config.images)
    server = get_server(session["server"], options)
    skip = server.skip_reason(config.launcher, fmt=session["format"])
    if skip:
        return {"rows": [not_measured(run, c, "skipped", skip, model_sha256=artifact.sha256) for c in cells],
                "timeline": timeline}
    gen_cpus = budget.generator_cpus
    rows: list[dict] = []
    measured: set[str] = set()  # cell ids whose rows are in `rows` (a sweep cell has one row per point)
    served = {"model_sha256": artifact.sha256, "engine": server.engines.get(artifact.format)}
    log_dir = Path(run["run_dir"]) / "logs"
    try:
        launcher = get_launcher(config.launcher)
        with server_session(server, artifact, spec, launcher, run_id=run["run_id"], cell_id=session["session_id"],
                            log_dir=log_dir, ready_timeout_s=config.ready_timeout_s, cpus=budget.cpus,
                            memory=budget.memory, timeline=timeline) as live:
            for cell in cells:
                first_row = len(rows)
                if cell["mode"] in SWEEP_MODES:
                    rows += _measure_sweep(run, cell, live, spec, config, gen_cpus, served, timeline)
                else:
                    rows.append(_measure_cell(run, cell, live, spec, config, gen_cpus, served, timeline))
                measured.add(cell["cell_id"])
                code = launcher.exit_code(live.handle)
                if code is not None:
                    reason = (f"server {server.name} exited with code {code} during the load test; "
                              f"log tail:\n{launcher.log_tail(live.handle)}")
                    for row in rows[first_row:]:  # this cell's figures came (at least partly) from a dead server
                        row.update(status="failed", reason=reason[:4000])
                    raise ServingEvalError(reason)
    except Exception as exc:  # noqa: BLE001 - any failure becomes the reason of the cells not yet measured
        reason = f"{type(exc).__name__}: {exc}"
        rows += [not_measured(run, c, "failed", reason, **served) for c in cells if c["cell_id"] not in measured]
    return {"rows": rows, "timeline": timeline}


def load_endpoint(live, protocol: str | None) -> Endpoint:
    """Where the cell's protocol is spoken: the server's REST endpoint, or its "grpc" port for `grpc_protocol`."""
    endpoint = live.endpoint
    if protocol in (None, endpoint.protocol):
        return endpoint
    grpc_protocol = getattr(live.server, "grpc_protocol", None)
    if protocol != grpc_protocol or "grpc" not in endpoint.ports:
        raise ConfigError("protocol", protocol, f"server {live.server.name!r} speaks {endpoint.protocol!r}"
                                                f"{f' or {grpc_protocol!r}' if grpc_protocol else ''}")
    return replace(endpoint, port=endpoint.ports["grpc"], protocol=protocol)


def server_counter(live):
    """The server's cumulative successful-request counter, where it exposes one (Triton), else None."""
    counts = getattr(live.server, "server_side_counts", None)
    if counts is None:
        return None
    return lambda: counts(live.endpoint)["nv_inference_request_success"]


class _SweepStopped(Exception):
    """A sweep's point failed (its row says why): the sweep ends there."""


def _measure_sweep(run: dict, cell: dict, live, spec, config: RunConfig, gen_cpus: tuple[int, ...],
                   served: dict, timeline: dict) -> list[dict]:
    """A sweep cell: one row per load point it ran (mode and load of the point), the stop rule in the timeline."""
    rows: list[dict] = []

    def run_point(settings: LoadSettings) -> Measurement:
        load = float(settings.load)
        point = {**cell, "mode": settings.mode, "load": load, "cell_id": f"{cell['cell_id']}@{load:g}"}
        row, measurement = _measure_point(run, point, live, spec, config, gen_cpus, served, timeline)
        rows.append(row)
        if measurement is None or row["status"] != "ok":
            raise _SweepStopped(row["reason"])
        return measurement

    first_load = config.workers if cell["mode"] == "concurrency-sweep" else cell["load"]
    base = load_settings({**cell, "mode": SWEEP_MODES[cell["mode"]], "load": first_load}, config)
    events = timeline["cells"].setdefault(cell["cell_id"], {})
    try:
        if cell["mode"] == "concurrency-sweep":
            result = concurrency_sweep(run_point, base, start=config.workers, max_concurrency=int(cell["load"]),
                                       p99_bound_ms=config.p99_bound_ms)
        else:
            result = rate_sweep(run_point, base, start_rps=cell["load"], p99_bound_ms=config.p99_bound_ms)
        events["sweep"] = {"stop_reason": result.stop_reason, "best_load": result.best_load, "points": len(rows)}
    except _SweepStopped as exc:
        events["sweep"] = {"stop_reason": f"a point failed: {exc}"[:500], "best_load": None, "points": len(rows)}
    except Exception as exc:  # noqa: BLE001 - e.g. bad sweep bounds: the sweep cell fails, the session goes on
        reason = f"{type(exc).__name__}: {exc}"
        events["sweep"] = {"stop_reason": reason[:500], "best_load": None, "points": len(rows)}
        if not rows:
            return [not_measured(run, cell, "failed", reason, **served)]
    return rows


def load_settings(cell: dict, config: RunConfig) -> LoadSettings:
    return LoadSettings(
        mode=cell["mode"], load=cell["load"], batch_size=cell["batch_size"], duration_s=config.duration_s,
        warmup_s=config.warmup_s, window_s=config.window_s, stability_pct=config.stability_pct,
        request_timeout_s=config.request_timeout_s, stop_when_stable=config.stop_when_stable,
        min_windows=config.min_windows, workers=config.workers,
    )


def _measure_cell(run: dict, cell: dict, live, spec, config: RunConfig, gen_cpus: tuple[int, ...],
                  served: dict, timeline: dict) -> dict:
    return _measure_point(run, cell, live, spec, config, gen_cpus, served, timeline)[0]


def _measure_point(run: dict, cell: dict, live, spec, config: RunConfig, gen_cpus: tuple[int, ...],
                   served: dict, timeline: dict) -> tuple[dict, Measurement | None]:
    """One load point: its row, and its measurement when the load point ran."""
    measurement = None
    row = base_row(run, cell)
    row.update(served, server_version=live.server_version, startup_s=live.startup_s, runtime_image=live.runtime_image,
               runtime_image_kind=live.runtime_image_kind)
    events = timeline["cells"].setdefault(cell["cell_id"], {})
    events["load_begin"] = time.time()
    workdir = Path(tempfile.mkdtemp(prefix="serving-eval-load-"))
    try:
        settings = load_settings(cell, config)
        counters = server_counter(live)
        with sampler_for(live.handle) as sampler:
            endpoint = load_endpoint(live, cell.get("protocol"))
            measurement, _ = run_load_point(endpoint, spec, settings, workdir, arrival=config.arrival,
                                            cpus=gen_cpus, counters=counters)
        data = measurement.to_dict()
        row.update({k: data[k] for k in MEASUREMENT_COLUMNS})
        row["errors_by_kind"] = json.dumps(measurement.errors_by_kind, sort_keys=True)
        row.update(sampler.summary().to_dict())
        if measurement.requests and measurement.errors == measurement.requests:
            reason = f"all {measurement.requests} requests failed: {measurement.errors_by_kind}"
            row.update(status="failed", reason=reason)
        elif measurement.requests == 0:
            row.update(status="failed", reason="no request completed in the measured time")
        else:
            row.update(status="ok", reason=None)
    except Exception as exc:  # noqa: BLE001 - this cell fails; the session goes on
        row.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:4000])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        events["load_end"] = time.time()
    return row, measurement
