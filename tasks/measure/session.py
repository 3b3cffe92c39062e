"""One server session measured: start the server, check what it serves over each wire its cells use, run each of
its load points, always stop it.

Every planned cell comes back as a row: `ok` with its figures, or `failed`/`skipped` with a reason, judged by
`tasks.validate.outcome` (the server alive and ready after each point *before* its row is accepted, errors within
`max_error_rate`, served outputs matching the reference over the cell's own wire). A cell planned skipped (its
server lacks the wire) is a `skipped` row with the plan's reason, and a session of only those starts nothing. A
server that dies or hangs is restarted once and the remaining points run on the new one. A failure in one cell
never loses the cells already measured.

Each row also carries what it cost (tasks/core/cost.py: CPU-core-seconds, GPU-seconds per 1,000 inferences and,
with the run's prices, the price of a million), the payload bytes of its requests and responses and, where the
stack reports it, where a request's time went (`Server.server_timings`, scraped at both ends of the measured
window: queue, decode, infer, encode, the server's total, and the rest of the client's latency outside it) with
`breakdown_source` saying what was read, or that nothing was.

Each server life is also profiled (tasks/measure/lifecycle.py): its served-output check is sent first, once it is
ready (the time to its first correct answer), then its idle size is read, what it runs from is sized and its
capabilities are probed (tasks/measure/capabilities.py: a failed probe is a finding, never a failed row), and its
size is read again after every load point; every row of the life carries the figures, and its timeline the readings.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tasks.convert import Artifact, local_artifact
from tasks.core.cost import cost_fields
from tasks.core.errors import ConfigError, ServingEvalError
from tasks.core.metadata import collect_host_metadata, host_name
from tasks.core.paths import run_dir
from tasks.core.results import CELL_KEY, DEFAULT_CONFIG_ID, OVERLOAD_MODE, empty_row
from tasks.core.spec import ModelSpec, load_spec
from tasks.loadgen.measurement import Measurement, server_cpu
from tasks.loadgen.overload import OverloadFigures, OverloadPhases, phases_for, summarize_overload
from tasks.loadgen.recording import Recording
from tasks.loadgen.resources import Footprint, read_footprint, sampler_for
from tasks.loadgen.run import run_load_point
from tasks.loadgen.settings import STABLE_WINDOWS, LoadSettings
from tasks.loadgen.sweep import concurrency_sweep, rate_sweep
from tasks.measure.capabilities import declared_only, probe_capabilities
from tasks.measure.engine_speed import engine_speed
from tasks.measure.hoststate import HostState, HostStateProbe
from tasks.measure.inputs import cell_inputs, inputs_sha, runtime_fingerprint, serving_fingerprint
from tasks.measure.lifecycle import ServerLifeProfile, feature_fields
from tasks.measure.served_check import ServedCheck, check_served_outputs
from tasks.plan.cells import SWEEP_MODES, Cell, Session
from tasks.plan.config import RunConfig
from tasks.plan.hosts import is_distributed
from tasks.plan.tune import Trial, estimate_config_s, search
from tasks.runtimes import interrupts
from tasks.serve.base import Endpoint
from tasks.serve.budget import ServerBudget, plan_budget
from tasks.serve.hostlock import host_lock
from tasks.serve.knobs import apply_config, knob_values
from tasks.serve.launchers import get_launcher
from tasks.serve.launchers.base import RuntimeSize
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.session import LiveServer, SessionSettings, server_session
from tasks.store.s3 import S3Store
from tasks.validate.outcome import (
    MAX_RESTARTS,
    MEASURED_STATUSES,
    Contention,
    PointOutcome,
    ServerHealth,
    contended_reason,
    describe_health,
    host_quiet,
    judge_host,
    judge_point,
)
from tasks.validate.overload import OverloadSigns, class_reason, classify_overload

MEASUREMENT_COLUMNS = (
    "duration_s", "requests", "errors", "error_rate", "throughput_rps", "throughput_sps", "latency_ms_mean",
    "latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99", "latency_ms_p999", "latency_ms_max",
    "latency_from", "stable", "windows", "cv", "late_starts", "generator_late_starts", "generator_cpu_pct",
    "generator_saturated",
    "warmup_requests", "timeouts", "stopped_early", "schedule_lag_ms_p99", "generator_cpu_us_per_request", "workers",
    "latency_hdr", "server_requests", "server_throughput_rps", "throughput_rps_ci_low", "throughput_rps_ci_high",
    "request_bytes", "response_bytes", "server_ms", "queue_ms", "decode_ms", "infer_ms", "encode_ms", "outside_ms",
)
NONE_REPORTED = "none reported"  # breakdown_source of a row whose stack reported no timing
READY_AFTER_POINT_S = 5.0  # after a load point the server must answer its readiness probe within this
SERVER_FAILED = "_server_failed"  # a row's private mark: its point found the server dead or hung (not published)
QUIET_SAMPLE_S = 1.0  # waiting for a quiet host: the length of each sample of it


def base_row(run: dict, cell: Cell) -> dict:
    """A row of the results contract for `cell`, with the run's identity, provenance and measuring host."""
    row = empty_row()
    row.update({k: run[k] for k in ("run_id", "logical_date", "started_at", "schema_version")})
    row.update(run["code"])
    row.update(run["host"])
    row.update({k: DEFAULT_CONFIG_ID if k == "config_id" else getattr(cell, k) for k in CELL_KEY})
    row["wire"] = cell_wire(cell)
    return row


def cell_wire(cell: Cell) -> str:
    """The cell's wire; a cell of a plan written before wires: its protocol's, on its server (json when unknown)."""
    if cell.wire:
        return cell.wire
    try:
        return get_server(cell.server).wire_of(cell.protocol) or "json"
    except ConfigError:
        return "json"


def not_measured(run: dict, cell: Cell, status: str, reason: str, **extra: object) -> dict:
    row = base_row(run, cell)
    row.update(status=status, reason=reason[:4000], **extra)
    return row


@dataclass(frozen=True)
class SessionContext:
    """What every server life of one planned session is measured with: the session, the run as this measuring host
    sees it (`host_run`), the run's configuration, the server's CPU/memory budget, and what is served."""

    session: Session
    run: dict
    config: RunConfig
    budget: ServerBudget
    artifact: Artifact
    spec: ModelSpec

    def load_settings(self, cell: Cell, mode: str | None = None, load: float | None = None) -> LoadSettings:
        """The load point of `cell` (at `mode` and `load` when given: a sweep's first point) under the run's
        timing, stability and timeout Params."""
        config = self.config
        return LoadSettings(
            mode=mode or cell.mode, load=cell.load if load is None else load, batch_size=cell.batch_size,
            duration_s=config.duration_s, warmup_s=config.warmup_s, window_s=config.window_s,
            stability_pct=config.stability_pct, request_timeout_s=config.request_timeout_s,
            stop_when_stable=config.stop_when_stable, min_windows=config.min_windows, workers=config.workers,
        )


def measure_session(session: Session, conversions: list[dict], run: dict, config: RunConfig,
                    store: S3Store | None = None) -> dict:
    """Measure every cell of one server session; return {"rows": [...], "timeline": {...}} (and, with a
    configuration search, "timelines" of every configuration's session and its "tuning" record). Every row
    records the CPU/memory budget its server was given (tasks/serve/budget.py), its serving configuration and the
    host it was measured on; an artifact converted on another host is fetched from `store` (share_artifacts)."""
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus)
    run = host_run(run)
    prepared = _prepare(session, conversions, run, store)
    if isinstance(prepared, dict):  # nothing to serve: the cells' rows say why
        out = prepared
    else:
        ctx = SessionContext(session, run, config, budget, *prepared)
        options = ServingOptions(max_batch_size=config.max_batch_size, dynamic_batching=config.dynamic_batching,
                                 device=config.device, cpus=budget.cpu_count, images=config.images)
        speeds = _engine_speeds(ctx, options) if any(not c.skip for c in session.cells) else {}
        knobs = get_server(session.server).knobs
        if config.tune == "off" or not knobs or session.role == "control":  # the control is never tuned
            out = _serve(ctx, options, DEFAULT_CONFIG_ID, knob_values(options, knobs))
            if config.tune != "off":
                out["tuning"] = {"session_id": session.session_id, "server": session.server,
                                 "method": config.tune, "note": "this server declares no knobs: defaults only"}
        else:
            out = _tune(ctx, options, knobs)
        for row in out["rows"]:
            speed = speeds.get(row.get("batch_size"))
            row["engine_inprocess_rps"] = speed["rps"] if speed else None
    prices = config.prices()
    for row in out["rows"]:
        row.update(budget.row_fields(config.launcher), role=session.role)
        row.update(cost_fields(row, prices))
    return out


def _engine_speeds(ctx: SessionContext, options: ServingOptions) -> dict[int, dict]:
    """batch size -> the engine's own speed in process (tasks/measure/engine_speed.py), on the server's CPUs with
    its default threads, while this host runs no server (the session lock is held)."""
    session = ctx.session
    if session.role == "control":
        return {}
    speeds = {}
    with host_lock(ctx.run["run_id"], f"{session.session_id}#engine"):
        for batch_size in sorted({c.batch_size for c in session.cells}):
            speed = engine_speed(ctx.artifact, ctx.spec, batch_size, options.threads_per_instance, ctx.budget.cpus,
                                 Path(ctx.run["run_dir"]))
            if speed:
                speeds[batch_size] = speed
    return speeds


def host_run(run: dict) -> dict:
    """The run as this measuring host sees it: its own host metadata (the rows' host columns) and, in a multi-host
    deployment (tasks/plan/hosts.py), its own work folder (the plan step's is on another machine)."""
    directory = Path(run["run_dir"])
    if is_distributed():
        directory = run_dir(run["run_id"])
        (directory / "logs").mkdir(parents=True, exist_ok=True)
    return {**run, "run_dir": str(directory), "host": collect_host_metadata(), "measuring_host": host_name()}


def _prepare(session: Session, conversions: list[dict], run: dict,
             store: S3Store | None = None) -> tuple[Artifact, ModelSpec] | dict:
    """(artifact, spec) of a session that can be served, or its rows and timeline when it cannot."""
    cells = session.cells
    timeline: dict = {"session_id": session.session_id, "server": session.server,
                      "host": run.get("measuring_host"), "cells": {}}
    conv = next((c for c in conversions if c and (c["model"], c["format"]) == (session.model, session.format)), None)
    if conv and conv.get("skipped"):
        return {"rows": [not_measured(run, c, "skipped", conv["skipped"]) for c in cells], "timeline": timeline}
    if conv is None or conv.get("error"):
        reason = f"conversion to {session.format} failed: {conv['error'] if conv else 'no conversion result'}"
        return {"rows": [not_measured(run, c, "failed", reason) for c in cells], "timeline": timeline}
    artifact = Artifact.from_dict(conv["artifact"])
    try:
        artifact = local_artifact(artifact, store)
    except ServingEvalError as exc:
        reason = f"the artifact could not be had on host {run['measuring_host']}: {exc}"
        return {"rows": [not_measured(run, c, "failed", reason) for c in cells], "timeline": timeline}
    if not artifact.parity_passed:
        p = conv["parity"]
        ratio = (f"worst |a-b|/(atol+rtol*|b|) {p['max_err_ratio']:.3g} > 1, " if p.get("max_err_ratio") is not None
                 else "")
        reason = (f"artifact failed parity against {p.get('reference') or 'its source'}: {ratio}"
                  f"max_abs_err={p['max_abs_err']:.3g} (atol={p['atol']}, rtol={p['rtol']}); not served")
        return {"rows": [not_measured(run, c, "failed", reason, model_sha256=artifact.sha256) for c in cells],
                "timeline": timeline}
    return artifact, load_spec(session.model)


def _tune(ctx: SessionContext, base: ServingOptions, knobs: tuple) -> dict:
    """The configuration search of one server session (tasks/plan/tune.py): one whole session per configuration,
    every configuration's rows kept (its `config_id` and `config` columns), the best marked `best_config`."""
    config, session = ctx.config, ctx.session
    defaults = knob_values(base, knobs)
    outs: list[dict] = []

    def measure(values: dict, cid: str) -> Trial:
        started = time.monotonic()
        try:
            options = apply_config(base, values, knobs)
        except ConfigError as exc:  # a combination the server refuses (e.g. a preferred batch > max batch)
            return Trial(dict(values), cid, None, None, 0.0, note=f"not a valid configuration: {exc}")
        out = _serve(ctx, options, cid, values)
        outs.append(out)
        score, p99 = config_score(out["rows"], config.p99_bound_ms)
        note = "" if score is not None else f"no ok point with p99 <= {config.p99_bound_ms:g} ms"
        return Trial(dict(values), cid, score, p99, time.monotonic() - started, note=note)

    result = search(config.tune, measure, knobs, defaults, budget_s=config.tune_budget_s,
                    estimate_s=estimate_config_s(session.cells, config.warmup_s, config.duration_s, config.workers))
    rows = [row for out in outs for row in out["rows"]]
    best = result.best.config_id if result.best else None
    for row in rows:
        row["best_config"] = best is not None and row["config_id"] == best
    tuning = {"session_id": session.session_id, "server": session.server, "model": session.model,
              "format": session.format, "p99_bound_ms": config.p99_bound_ms,
              "knobs": [k.to_dict() for k in knobs], **result.to_dict()}
    return {"rows": rows, "timeline": outs[0]["timeline"] if outs else {}, "timelines": [o["timeline"] for o in outs],
            "tuning": tuning}


def config_score(rows: list[dict], p99_bound_ms: float | None) -> tuple[float | None, float | None]:
    """(best throughput, its p99) among a configuration's ok points with p99 within the bound."""
    within = [r for r in rows if r["status"] == "ok" and r.get("throughput_rps") is not None
              and r.get("latency_ms_p99") is not None
              and (p99_bound_ms is None or r["latency_ms_p99"] <= p99_bound_ms)]
    if not within:
        return None, None
    top = max(within, key=lambda r: r["throughput_rps"])
    return float(top["throughput_rps"]), float(top["latency_ms_p99"])


@dataclass
class ServerLife:
    """One server life being measured: the live server, what its rows say was served, its session's timeline."""

    live: LiveServer
    served: dict
    timeline: dict
    inputs: dict = field(default_factory=dict)  # what this life serves with (tasks/measure/inputs.py), per protocol
    profile: ServerLifeProfile | None = None  # how the current server life lives (tasks/measure/lifecycle.py)


def stack_inputs(ctx: SessionContext, server, options: ServingOptions, live: LiveServer) -> dict:
    """The inputs of this server life's rows, before the protocol of each cell is added."""
    runtime = runtime_fingerprint(server.runtime, ctx.config.launcher, options, live.runtime_image)
    return cell_inputs(ctx.artifact, ctx.spec, runtime, live.server_version, serving_fingerprint(options, None))


def _serve(ctx: SessionContext, options: ServingOptions, cid: str, values: dict) -> dict:
    """One server life with `options` (configuration `cid`): start, check what it serves, every load point, stop."""
    session, run, config = ctx.session, ctx.run, ctx.config
    session_id = session.session_id if cid == DEFAULT_CONFIG_ID else f"{session.session_id}@{cid}"
    timeline: dict = {"session_id": session_id, "server": session.server, "config_id": cid,
                      "host": run.get("measuring_host"), "cells": {}}
    tag = {"config_id": cid, "config": json.dumps(values, sort_keys=True)}
    server = get_server(session.server, options)
    unspoken = [not_measured(run, c, "skipped", c.skip, model_sha256=ctx.artifact.sha256, **tag)
                for c in session.cells if c.skip]  # the server lacks the cell's wire: never another wire
    cells = tuple(c for c in session.cells if not c.skip)
    skip = server.skip_reason(config.launcher, fmt=session.format, spec=ctx.spec)
    if skip or not cells:
        rows = unspoken + [not_measured(run, c, "skipped", skip, model_sha256=ctx.artifact.sha256, **tag)
                           for c in cells]
        why = f"not probed: the server did not run ({skip or 'no cell to measure'})"
        declared = feature_fields(declared_only(server, why[:300]), None)
        for row in rows:
            row.update(declared)
        return {"rows": rows, "timeline": timeline}
    rows: list[dict] = unspoken
    measured: set[str] = set()  # cell ids whose rows are in `rows` (a sweep cell has one row per point)
    served = {"model_sha256": ctx.artifact.sha256, "engine": server.engines.get(ctx.artifact.format), **tag}
    settings = SessionSettings(run_id=run["run_id"], session_id=session_id, log_dir=Path(run["run_dir"]) / "logs",
                               ready_timeout_s=config.ready_timeout_s, cpus=ctx.budget.cpus,
                               memory=ctx.budget.memory)
    checks: dict[str | None, ServedCheck] = {}
    protocols = list(dict.fromkeys(c.protocol for c in cells))
    profiles: list[ServerLifeProfile] = []
    try:
        launcher = get_launcher(config.launcher)
        with host_lock(run["run_id"], session_id), \
                server_session(server, ctx.artifact, ctx.spec, launcher, settings, timeline=timeline) as live:
            checks = _check_served(ctx, live, timeline, protocols)  # first: the time to the first correct answer
            life = ServerLife(live, served, timeline, stack_inputs(ctx, server, options, live))
            life.profile = _profile(ctx, live, checks)
            profiles.append(life.profile)
            for cell in cells:
                check = checks[cell.protocol]
                if not check.passed:  # what this wire serves is wrong: its cells fail, the other wires go on
                    rows.append(not_measured(run, cell, "failed", served_reason(server.name, check), **served,
                                             served_err_ratio=check.err_ratio, restarts=live.restarts))
                    life.profile.rows.append(rows[-1])
                    measured.add(cell.cell_id)
                    continue
                if cell.is_sweep:
                    new_rows = _measure_sweep(ctx, life, cell)
                elif cell.mode == OVERLOAD_MODE:  # planned last: the points before it measured the capacity
                    new_rows = [_measure_overload(ctx, life, cell, rows)]
                else:
                    new_rows = [_measure_point(ctx, life, cell)[0]]
                failure = next((r.pop(SERVER_FAILED) for r in new_rows if r.get(SERVER_FAILED)), None)
                for r in new_rows:
                    r.pop(SERVER_FAILED, None)
                    r.update(served_err_ratio=check.err_ratio, restarts=r.get("restarts", live.restarts))
                rows += new_rows
                measured.add(cell.cell_id)
                if failure and cell is not cells[-1]:
                    if live.restarts >= MAX_RESTARTS:
                        raise ServerFailedTwice(f"server {server.name} failed again after its restart, the "
                                                f"remaining points are not measured: {failure}")
                    live.restart(failure)
                    checks = _check_served(ctx, live, timeline, protocols)
                    life.profile = _profile(ctx, live, checks)
                    profiles.append(life.profile)
    except Exception as exc:  # noqa: BLE001 - any failure becomes the reason of the cells not yet measured
        reason = str(exc) if isinstance(exc, SessionEnded) else f"{type(exc).__name__}: {exc}"
        for c in cells:
            if c.cell_id not in measured:
                extra = {"served_err_ratio": checks[c.protocol].err_ratio} if c.protocol in checks else {}
                rows.append(not_measured(run, c, "failed", reason, **served, **extra))
    for profile in profiles:
        profile.apply()
    if profiles:
        timeline["lifecycle"] = [p.record() for p in profiles]
    features = feature_fields(profiles[0].capabilities, profiles[0].lines) if profiles else feature_fields(
        declared_only(server, "not probed: the server did not start"), None)
    for row in unspoken:  # cells of a wire the stack lacks: what the stack offers, as its live server showed it
        row.update(features)
    return {"rows": rows, "timeline": timeline}


def _profile(ctx: SessionContext, live: LiveServer, checks: dict[str | None, ServedCheck]) -> ServerLifeProfile:
    """A server life, right after its served-output checks and before its first load point: the time to its first
    correct answer, its idle size, what it runs from, and its capabilities probed (a probe that cannot run is
    recorded as such; nothing here fails the session)."""
    firsts = [c.first_correct_at for c in checks.values() if c.first_correct_at is not None]
    first_correct_s = min(firsts) - live.started_monotonic if firsts and live.started_monotonic else None
    idle = read_footprint(live.handle)
    launcher = live.launcher
    runtime = launcher.runtime_size(live.run_spec) if launcher is not None and live.run_spec is not None else None
    profile = ServerLifeProfile(live.startup_s, first_correct_s, idle,
                                runtime or RuntimeSize(None, "the session recorded no run spec"), live.serving_lines)
    try:
        profile.capabilities = probe_capabilities(live.server, live.endpoint,
                                                  wire_check=lambda kind: _wire_check(ctx, live, checks, kind))
    except Exception as exc:  # noqa: BLE001 - the probes are evidence about the stack, never the session's end
        profile.capabilities = declared_only(live.server, f"not probed: the probes did not run "
                                                          f"({type(exc).__name__}: {exc})"[:300])
    return profile


def _wire_check(ctx: SessionContext, live: LiveServer, checks: dict[str | None, ServedCheck],
                kind: str) -> tuple[bool, str]:
    """The served-output check over the server's `kind` wire: the session's own where a cell used that wire, else
    one made now for the capability probe (its result is only evidence, never a cell's outcome)."""
    server = live.server
    if kind not in server.wires:
        return False, f"server {server.name} declares no {kind} wire"
    codec = server.wires[kind].codec
    check = checks.get(codec) or (checks.get(None) if codec == server.protocol else None)
    if check is None:
        try:
            endpoint = load_endpoint(live, codec)
        except ConfigError as exc:
            return False, f"over {codec}: {exc}"
        check = check_served_outputs(codec, endpoint, ctx.spec, ctx.artifact, ctx.config.max_batch_size)
    return check.passed, f"over {codec}: {check.detail}"


class SessionEnded(Exception):
    """The session stopped measuring; its message is the reason of every cell not yet measured."""


class ServerFailedTwice(SessionEnded):
    pass


class ServedOutputsWrong(SessionEnded):
    pass


def served_reason(server: str, check: ServedCheck) -> str:
    over = f" over {check.protocol}" if check.protocol else ""
    return (f"server {server} served outputs{over} that differ from the reference ({check.reference}): "
            f"{check.detail}; worst |a-b|/(atol+rtol*|b|) {check.err_ratio:.3g} > 1; no load was sent")


def _check_served(ctx: SessionContext, live: LiveServer, timeline: dict,
                  protocols: list[str | None]) -> dict[str | None, ServedCheck]:
    """The served-output check of the live server over every wire its cells use (each its own codec and port),
    recorded in the timeline."""
    checks = {}
    for protocol in protocols:
        try:
            endpoint = load_endpoint(live, protocol)
        except ConfigError as exc:
            checks[protocol] = ServedCheck(float("inf"), False, (), "the source model", str(exc), protocol or "")
            continue
        checks[protocol] = check_served_outputs(endpoint.protocol, endpoint, ctx.spec, ctx.artifact,
                                                ctx.config.max_batch_size)
        timeline.setdefault("served_checks", []).append(checks[protocol].to_dict())
    return checks


def observe_health(live: LiveServer) -> ServerHealth:
    """Is the server still running and ready? Read after every load point, before its row is accepted."""
    launcher = live.launcher
    code = launcher.exit_code(live.handle)
    ready = False
    deadline = time.monotonic() + READY_AFTER_POINT_S
    while code is None and not ready:
        ready = live.server.is_ready(live.endpoint)
        if ready or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
        code = launcher.exit_code(live.handle)
    health = ServerHealth(code, ready and code is None)
    if not health.alive:
        health = ServerHealth(code, False, launcher.log_tail(live.handle))
    return health


def load_endpoint(live: LiveServer, protocol: str | None) -> Endpoint:
    """Where the cell's protocol is spoken: the server's REST endpoint, or the port of the wire it names."""
    return live.server.wire_endpoint(live.endpoint, protocol)


def server_counter(live: LiveServer):
    """The server's cumulative successful-request counter, where it exposes one (Triton), else None."""
    counts = getattr(live.server, "server_side_counts", None)
    if counts is None:
        return None
    return lambda: counts(live.endpoint)["nv_inference_request_success"]


def server_timings(live: LiveServer):
    """The server's own cumulative timings (`Server.server_timings`), where the stack reports them, else None."""
    if not live.server.timing_source:
        return None
    return lambda: live.server.server_timings(live.endpoint)


def breakdown_source(server, measurement: Measurement | None) -> str:
    """What a row's breakdown was read from, or why it has none."""
    if measurement is not None and measurement.server_timed_requests:
        return server.timing_source
    if not server.timing_source:
        return f"{NONE_REPORTED}: {server.name} reports no timing of its requests"
    return f"{NONE_REPORTED}: {server.name}'s timing answered nothing for this point ({server.timing_source})"


class _SweepStopped(Exception):
    """A sweep's point failed (its row says why): the sweep ends there."""


def _measure_sweep(ctx: SessionContext, life: ServerLife, cell: Cell) -> list[dict]:
    """A sweep cell: one row per load point it ran (mode and load of the point), the stop rule in the timeline.

    A point that failed only because its load was more than the server sustains (errors or timeouts, the server
    alive and ready after it, a lower load of the same sweep ok) is the sweep's answer, not a fault: its row stays
    `failed` with its reason and is marked `beyond_capacity`, and the sweep goes on (a rate search bisects
    below it). A point whose server died or hung, or that could not run, ends the sweep."""
    config = ctx.config
    rows: list[dict] = []

    def run_point(settings: LoadSettings) -> Measurement:
        load = float(settings.load)
        row, measurement = _measure_point(ctx, life, cell.point(settings.mode, load))
        lower_ok = any(r["status"] in MEASURED_STATUSES and r["load"] < load for r in rows)
        rows.append(row)
        if measurement is None or row.get(SERVER_FAILED):
            raise _SweepStopped(row["reason"])
        if row["status"] not in MEASURED_STATUSES:  # a contended point goes on: its row says what its figures are
            if not lower_ok:
                raise _SweepStopped(row["reason"])
            row["beyond_capacity"] = True
        return measurement

    first_load = config.workers if cell.mode == "concurrency-sweep" else cell.load
    base = ctx.load_settings(cell, mode=SWEEP_MODES[cell.mode], load=first_load)
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    try:
        if cell.mode == "concurrency-sweep":
            result = concurrency_sweep(run_point, base, start=config.workers, max_concurrency=int(cell.load),
                                       p99_bound_ms=config.p99_bound_ms)
        else:
            result = rate_sweep(run_point, base, start_rps=cell.load, p99_bound_ms=config.p99_bound_ms,
                                max_error_rate=config.max_error_rate)
        events["sweep"] = {"stop_reason": result.stop_reason, "best_load": result.best_load, "points": len(rows)}
    except _SweepStopped as exc:
        events["sweep"] = {"stop_reason": f"a point failed: {exc}"[:500], "best_load": None, "points": len(rows)}
    except Exception as exc:  # noqa: BLE001 - e.g. bad sweep bounds: the sweep cell fails, the session goes on
        reason = f"{type(exc).__name__}: {exc}"
        events["sweep"] = {"stop_reason": reason[:500], "best_load": None, "points": len(rows)}
        if not rows:
            return [not_measured(ctx.run, cell, "failed", reason, **life.served)]
    return rows


@dataclass
class PointRun:
    """One run of a load point: the row's measured fields, the measurement (None when it did not run) and why not,
    the host's state while it ran, and the server's health after it."""

    fields: dict
    measurement: Measurement | None
    load_error: str | None
    host: HostState | None
    health: ServerHealth
    footprint_after: Footprint | None = None  # the server's size read after the point (tasks/measure/lifecycle.py)
    overload: OverloadFigures | None = None  # an overload phase's figures (tasks/loadgen/overload.py)


def _run_point(ctx: SessionContext, life: ServerLife, cell: Cell, settings: LoadSettings | None = None,
               phases: OverloadPhases | None = None) -> PointRun:
    """Drive one load point once (`settings`, default the cell's; `phases`: an overload phase's schedule), with the
    server's resources and the host's state read around it."""
    live, config, run = life.live, ctx.config, ctx.run
    fields: dict = {}
    measurement, load_error, host, overload = None, None, None, None
    workdir = Path(tempfile.mkdtemp(prefix="load-", dir=run["run_dir"]))  # removed with the run's folder too
    try:
        settings = settings or ctx.load_settings(cell)
        counters = server_counter(live)
        probe = HostStateProbe(live.handle, ctx.budget.cpus, ctx.budget.generator_cpus)
        with sampler_for(live.handle) as sampler, probe:
            endpoint = load_endpoint(live, cell.protocol)
            measurement, recording = run_load_point(endpoint, ctx.spec, settings, workdir, arrival=config.arrival,
                                                    cpus=ctx.budget.generator_cpus, counters=counters,
                                                    timings=server_timings(live),
                                                    server_cpu_s=probe.server.cpu_s, phases=phases,
                                                    progress=lambda line: print(f"{cell.cell_id}: {line}", flush=True))
        host = probe.result
        if phases is not None:
            overload = summarize_overload(Recording.load(str(recording)), phases, settings.request_timeout_s)
        data = measurement.to_dict()
        fields.update({k: data[k] for k in MEASUREMENT_COLUMNS})
        fields["breakdown_source"] = breakdown_source(live.server, measurement)
        fields["errors_by_kind"] = json.dumps(measurement.errors_by_kind, sort_keys=True)
        fields.update(sampler.summary().to_dict())
        cpu_pct, per_request = server_cpu(measurement, fields["server_cpu_pct"])
        fields["server_cpu_pct"] = cpu_pct
        if per_request is not None:
            fields["server_cpu_us_per_request"] = per_request
        fields.update(host.row_fields(), host_state=host.to_json())
    except Exception as exc:  # noqa: BLE001 - this cell fails; the session goes on
        load_error = f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    health = observe_health(live)
    after = read_footprint(live.handle) if health.alive else None
    return PointRun(fields, measurement, load_error, host, health, after, overload)


def wait_for_quiet(probe: HostStateProbe, max_neighbour_pct: float, quiet_wait_s: float,
                   sample_s: float = QUIET_SAMPLE_S) -> tuple[float, bool, HostState | None]:
    """Sample the host (the server idle) until a sample is quiet (`host_quiet`) or `quiet_wait_s` has passed:
    (seconds waited, whether it quieted, the last sample)."""
    started = time.monotonic()
    last = None
    while time.monotonic() - started + sample_s <= quiet_wait_s + 1e-9:
        interrupts.check()
        last = probe.sample(sample_s)
        if host_quiet(last.to_dict(), max_neighbour_pct):
            return time.monotonic() - started, True, last
    return time.monotonic() - started, False, last


def _measure_point(ctx: SessionContext, life: ServerLife, cell: Cell) -> tuple[dict, Measurement | None]:
    """One load point: its row (judged by `tasks.validate.outcome` once the server's health after the point is
    known), and its measurement when the load point ran.

    A point that passed the outcome rules but was contended (`judge_host`: other work took the host's CPU, or
    starved the server on its own CPUs) is measured once more after the host quiets (at most `quiet_wait_s`); the
    row has the second measurement's figures (`remeasured`), `contended` with both readings in its reason when the
    host was contended again, and its first reading in `host_state`."""
    live, config, run = life.live, ctx.config, ctx.run
    row = base_row(run, cell)
    row.update(life.served, server_version=live.server_version, startup_s=live.startup_s,
               runtime_image=live.runtime_image, runtime_image_kind=live.runtime_image_kind, restarts=live.restarts)
    if life.inputs:
        inputs = {**life.inputs, "serving": {**life.inputs["serving"], "protocol": cell.protocol}}
        row.update(inputs=json.dumps(inputs, sort_keys=True), inputs_sha=inputs_sha(inputs))
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    events["load_begin"] = time.time()
    row["remeasured"] = False
    point = _run_point(ctx, life, cell)
    outcome = _judge(live, point, config)
    contention = _contention(point, outcome, config)
    if contention is not None:
        first, first_contention = point, contention
        events["contended"] = first_contention.reason[:500]
        probe = HostStateProbe(live.handle, ctx.budget.cpus, ctx.budget.generator_cpus)
        waited_s, quieted, _ = wait_for_quiet(probe, config.max_neighbour_pct, config.quiet_wait_s)
        events["quiet_wait"] = {"waited_s": round(waited_s, 2), "quieted": quieted}
        events["remeasure_begin"] = time.time()
        point = _run_point(ctx, life, cell)
        outcome = _judge(live, point, config)
        contention = _contention(point, outcome, config)
        first_reading = {"host": first.host.to_dict(), "reason": first_contention.reason,
                         "throughput_rps": first.fields.get("throughput_rps"),
                         "latency_ms_p99": first.fields.get("latency_ms_p99")}
        wait = {"waited_s": round(waited_s, 2), "quieted": quieted}
        if point.host is not None:
            point.fields["host_state"] = point.host.to_json(first=first_reading, quiet_wait=wait,
                                                            contended=contention.reason if contention else None)
        else:  # the re-measurement did not run: the first reading stays on record
            point.fields["host_state"] = json.dumps({"first": first_reading, "quiet_wait": wait}, sort_keys=True)
        row["remeasured"] = True
        if contention is not None:
            outcome = PointOutcome("contended", contended_reason(first_contention, waited_s, quieted, contention),
                                   False)
        elif outcome.status != "ok":
            outcome = replace(outcome, reason=f"{outcome.reason} (the re-measurement of a contended point: "
                                              f"{first_contention.reason})")
    row.update(point.fields)
    events["load_end"] = time.time()
    row.update(status=outcome.status, reason=outcome.reason[:4000] if outcome.reason else None)
    if life.profile is not None:
        life.profile.after_point(row, point.footprint_after)
    if outcome.server_failed:
        row[SERVER_FAILED] = describe_health(live.server.name, point.health)[:4000]
        events["server_failed"] = row[SERVER_FAILED][:500]
    return row, point.measurement


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


def _measure_overload(ctx: SessionContext, life: ServerLife, cell: Cell, rows: list[dict]) -> dict:
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
    row = base_row(run, cell)
    row.update(life.served, server_version=live.server_version, startup_s=live.startup_s,
               runtime_image=live.runtime_image, runtime_image_kind=live.runtime_image_kind, restarts=live.restarts,
               remeasured=False, overload_factor=cell.load, capacity_rps=capacity)
    if life.inputs:
        inputs = {**life.inputs, "serving": {**life.inputs["serving"], "protocol": cell.protocol}}
        row.update(inputs=json.dumps(inputs, sort_keys=True), inputs_sha=inputs_sha(inputs))
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    events["load_begin"] = time.time()
    point = _run_point(ctx, life, cell, settings, phases)
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
    return row


def _judge(live: LiveServer, point: PointRun, config: RunConfig) -> PointOutcome:
    return judge_point(live.server.name, point.measurement.to_dict() if point.measurement else None,
                       point.load_error, point.health, config.max_error_rate)


def _contention(point: PointRun, outcome: PointOutcome, config: RunConfig) -> Contention | None:
    """Why an otherwise ok point was contended (None: not contended, or not ok for another reason)."""
    if outcome.status != "ok" or point.host is None:
        return None
    return judge_host(point.host.to_dict(), config.max_neighbour_pct)
