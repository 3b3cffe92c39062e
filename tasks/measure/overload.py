"""The overload phase of a server life: each wire's capacity from the session's steady points (`wire_capacities`),
and an overload cell measured on the stack's fastest wire at a multiple of it (`measure_overload`)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

from tasks.core import progress
from tasks.loadgen.overload import phases_for
from tasks.loadgen.settings import STABLE_WINDOWS
from tasks.measure.context import ServerLife, SessionContext, not_measured
from tasks.measure.point import SERVER_FAILED, life_row, point_what, run_point
from tasks.plan.cells import Cell
from tasks.validate.outcome import describe_health, judge_host
from tasks.validate.overload import OverloadSigns, class_reason, classify_overload

# An overload row's steady-point figures stay empty: a burst is not a load point to rank, plot or regress on, and
# its own figures are in the Overload columns (goodput, burst p99, recovery).
STEADY_FIGURES = (
    "throughput_rps", "throughput_sps", "throughput_rps_ci_low", "throughput_rps_ci_high", "latency_ms_mean",
    "latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99", "latency_ms_p999", "latency_ms_max",
    "stable", "windows", "cv", "stopped_early", "latency_hdr", "server_requests", "server_throughput_rps",
    "server_cpu_us_per_request", "server_ms", "queue_ms", "decode_ms", "infer_ms", "encode_ms", "outside_ms",
    "warmup_requests")


def wire_capacities(rows: list[dict], batch_size: int) -> dict[str, float]:
    """protocol -> the highest throughput of the session's ok steady points (a sweep's, a rate search's or the
    listed loads') at `batch_size` over it: each wire's capacity."""
    capacities: dict[str, float] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("mode") in ("concurrency", "rate") and r.get("batch_size") == batch_size \
                and r.get("throughput_rps"):
            protocol = str(r.get("protocol"))
            capacities[protocol] = max(capacities.get(protocol, 0.0), float(r["throughput_rps"]))
    return capacities


def session_capacity(rows: list[dict], cell: Cell) -> float | None:
    """The capacity an overload cell's burst multiplies: its wire's (`wire_capacities`); None without one."""
    return wire_capacities(rows, cell.batch_size).get(str(cell.protocol))


def slower_wire_reason(rows: list[dict], cell: Cell) -> str | None:
    """Why an overload cell is not measured: its wire is not the stack's fastest at its batch size (a stack is
    overloaded on the wire it would be served on, the one the report ranks it on); None when it is."""
    capacities = wire_capacities(rows, cell.batch_size)
    fastest = max(capacities, key=lambda p: (capacities[p], p), default=None)
    if fastest is None or fastest == cell.protocol or str(cell.protocol) not in capacities:
        return None
    return (f"overload is measured on the stack's fastest wire only: {fastest} at {capacities[fastest]:.1f} req/s, "
            f"{cell.protocol} at {capacities[str(cell.protocol)]:.1f} req/s")


def measure_overload(ctx: SessionContext, life: ServerLife, cell: Cell, rows: list[dict]) -> dict:
    """One overload cell: half the capacity, a burst at `cell.load` times it, half again (tasks/loadgen/overload.py);
    its row with the burst's figures and the class of what the stack did (tasks/validate/overload.py). A server
    that died or hung makes the row `failed` (`fails`, its log tail in the reason) and the session restarts it."""
    live, config, run = life.live, ctx.config, ctx.run
    capacity = session_capacity(rows, cell)
    slower = slower_wire_reason(rows, cell)
    if slower is not None:
        return not_measured(run, cell, "skipped", slower, **life.served, overload_factor=cell.load,
                            capacity_rps=capacity)
    if capacity is None:
        return not_measured(run, cell, "skipped", f"no capacity known: no ok point of {cell.server} at batch size "
                                                  f"{cell.batch_size} over {cell.protocol} before its overload phase",
                            **life.served, overload_factor=cell.load)
    phases = phases_for(capacity, cell.load, config.duration_s)
    settings = replace(ctx.load_settings(cell, mode="rate", load=phases.burst_rps), warmup_s=0.0,
                       duration_s=phases.total_s, window_s=min(config.window_s, phases.total_s),
                       stop_when_stable=False, min_windows=STABLE_WINDOWS)
    row = life_row(run, life, cell)
    row.update(remeasured=False, overload_factor=cell.load, capacity_rps=capacity)
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    events["load_begin"] = time.time()
    point = run_point(ctx, life, cell, settings, phases)
    events["load_end"] = time.time()
    row.update({k: v for k, v in point.fields.items() if k not in STEADY_FIGURES})
    figures = point.overload
    status, reason = "ok", None
    if figures is not None:
        signs = OverloadSigns(figures.fast_errors, figures.queued, figures.burst_p99_ms, figures.pre_burst_p99_ms)
        overload_class = classify_overload(signs, point.health.alive)
        row.update(duration_s=phases.burst_s, requests=figures.requests, errors=figures.errors,
                   error_rate=figures.errors / figures.requests if figures.requests else None,
                   timeouts=figures.timeouts, errors_by_kind=json.dumps(figures.errors_by_kind, sort_keys=True),
                   goodput_rps=figures.goodput_rps, goodput_pct=figures.goodput_pct,
                   burst_p99_ms=figures.burst_p99_ms, pre_burst_p99_ms=figures.pre_burst_p99_ms,
                   recovery_s=figures.recovery_s, recovered=figures.recovered, overload_class=overload_class,
                   overload=figures.to_json())
        events["overload"] = f"{class_reason(overload_class, signs, figures.requests)}; {figures.recovery_text()}"
    if not point.health.alive:
        status, reason = "failed", describe_health(live.server.name, point.health)
        row.update(overload_class="fails")
        row[SERVER_FAILED] = reason[:4000]
        events["server_failed"] = reason[:500]
    elif figures is None:
        status, reason = "failed", point.load_error or "the overload phase did not run"
    elif figures.requests == 0:
        status, reason = "failed", "no request was scheduled in the burst"
    elif point.host is not None:
        contention = judge_host(point.host.to_dict(), config.max_neighbour_pct)
        if contention is not None:  # not re-measured: a second burst is not the same experiment
            status, reason = "contended", contention.reason
    row.update(status=status, reason=reason[:4000] if reason else None)
    if life.profile is not None:
        life.profile.after_point(row, point.footprint_after)
    goodput = row.get("goodput_pct")
    figures_text = [f"goodput {goodput:.0f} %" if isinstance(goodput, (int, float)) else "",
                    str(row.get("overload_class") or ""), status]
    progress.emit("point", f"{point_what(row)} burst", ", ".join(f for f in figures_text if f),
                  events["load_end"] - events["load_begin"], ctx.left(), ctx.night_end_s())
    return row
