"""One load point of a server life: driven once with the server's resources, its own readings and the host's state
read around it (`run_point`), its row judged by `tasks.validate.outcome` once the server's health after it is known
(`measure_point`), and measured once more after the host quiets when other work contended it (`wait_for_quiet`)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tasks.core import progress
from tasks.loadgen.coordinator import PointHooks, run_load_point
from tasks.loadgen.measurement import PERCENTILES, Measurement, server_cpu
from tasks.loadgen.overload import OverloadFigures, OverloadPhases, summarize_overload
from tasks.loadgen.recording import Recording
from tasks.loadgen.resources import Footprint, read_footprint, sampler_for
from tasks.loadgen.settings import LoadSettings
from tasks.measure.bounds import bound_fields, lengthened_settings, should_lengthen
from tasks.measure.context import ServerLife, SessionContext, base_row
from tasks.measure.hoststate import HostState, HostStateProbe
from tasks.measure.inputs import inputs_sha
from tasks.measure.window_reader import LiveServerWindowReader
from tasks.plan.cells import Cell, lengthens
from tasks.plan.config import RunConfig
from tasks.runtimes import interrupts
from tasks.serve.base import Endpoint
from tasks.serve.session import LiveServer
from tasks.validate.outcome import (
    Contention,
    PointOutcome,
    ServerHealth,
    contended_reason,
    describe_health,
    host_quiet,
    judge_host,
    judge_point,
)

MEASUREMENT_COLUMNS = (
    "duration_s", "requests", "errors", "error_rate", "throughput_rps", "throughput_sps", "latency_ms_mean",
    "latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99", "latency_ms_p999", "latency_ms_max",
    "latency_from", "stable", "windows", "cv", "late_starts", "generator_late_starts", "generator_cpu_pct",
    "generator_saturated",
    "warmup_requests", "timeouts", "stopped_early", "schedule_lag_ms_p99", "generator_cpu_us_per_request", "workers",
    "latency_hdr", "server_requests", "server_throughput_rps", "throughput_rps_ci_low", "throughput_rps_ci_high",
    "request_bytes", "response_bytes", "server_ms", "queue_ms", "decode_ms", "infer_ms", "encode_ms", "outside_ms",
    "latency_samples", *(f"latency_ms_{k}_{end}" for k in PERCENTILES for end in ("ci_low", "ci_high", "at_least")),
)
NONE_REPORTED = "none reported"  # breakdown_source of a row whose stack reported no timing
READY_AFTER_POINT_S = 5.0  # after a load point the server must answer its readiness probe within this
SERVER_FAILED = "_server_failed"  # a row's private mark: its point found the server dead or hung (not published)
QUIET_SAMPLE_S = 1.0  # waiting for a quiet host: the length of each sample of it


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


def run_point(ctx: SessionContext, life: ServerLife, cell: Cell, settings: LoadSettings | None = None,
               phases: OverloadPhases | None = None) -> PointRun:
    """Drive one load point once (`settings`, default the cell's; `phases`: an overload phase's schedule; a trace
    cell's point sends its replay's), with the server's resources and the host's state read around it."""
    live, run = life.live, ctx.run
    fields: dict = {}
    measurement, load_error, host, overload = None, None, None, None
    workdir = Path(tempfile.mkdtemp(prefix="load-", dir=run["run_dir"]))  # removed with the run's folder too
    try:
        settings = settings or ctx.load_settings(cell)
        probe = HostStateProbe(live.handle, ctx.budget.cpus, ctx.budget.generator_cpus)
        with sampler_for(live.handle) as sampler, probe:
            endpoint = load_endpoint(live, cell.protocol)
            heartbeat = progress.Heartbeat(cell.cell_id, settings.warmup_s + settings.duration_s)

            def window(line: str) -> None:  # each measured window; a heartbeat every 30 s of a long look
                print(f"{cell.cell_id}: {line}", flush=True)
                heartbeat.beat(line)

            hooks = PointHooks(progress=window)
            measurement, recording = run_load_point(endpoint, ctx.spec, settings, workdir,
                                                    cpus=ctx.budget.generator_cpus,
                                                    server=LiveServerWindowReader(probe.server, live), hooks=hooks,
                                                    schedule=phases if phases is not None else ctx.trace_replay(cell))
        host = probe.result
        if phases is not None:
            overload = summarize_overload(Recording.load(str(recording)), phases, settings.request_timeout_s)
        data = measurement.to_dict()
        fields.update({k: data[k] for k in MEASUREMENT_COLUMNS})
        fields.update(bound_fields(measurement, ctx.config))
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


def life_row(run: dict, life: ServerLife, cell: Cell) -> dict:
    """The start of a measured row of `cell`: what its server life serves, the server's identity and the cell's
    inputs (its protocol added to the life's)."""
    live = life.live
    row = base_row(run, cell)
    row.update(life.served, server_version=live.server_version, startup_s=live.startup_s,
               runtime_image=live.runtime_image, runtime_image_kind=live.runtime_image_kind, restarts=live.restarts)
    if life.inputs:
        inputs = {**life.inputs, "serving": {**life.inputs["serving"], "protocol": cell.protocol}}
        row.update(inputs=json.dumps(inputs, sort_keys=True), inputs_sha=inputs_sha(inputs))
    return row


def measure_point(ctx: SessionContext, life: ServerLife, cell: Cell,
                  lengthen: bool = True) -> tuple[dict, Measurement | None]:
    """One load point: its row (judged by `tasks.validate.outcome` once the server's health after the point is
    known), and its measurement when the load point ran. With `lengthen` (a single point; a sweep chooses its own,
    `lengthen_point`), an undecided point that could be its stack's best gets its longer look
    (tasks/measure/bounds.py).

    A point that passed the outcome rules but was contended (`judge_host`: other work took the host's CPU, or
    starved the server on its own CPUs) is measured once more after the host quiets (at most `quiet_wait_s`); the
    row has the second measurement's figures (`remeasured`), `contended` with both readings in its reason when the
    host was contended again, and its first reading in `host_state`."""
    live, config = life.live, ctx.config
    row = life_row(ctx.run, life, cell)
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    events["load_begin"] = time.time()
    row["remeasured"] = False
    point = run_point(ctx, life, cell)
    outcome = _judge(live, point, config)
    contention = _contention(point, outcome, config)
    if contention is not None:
        first, first_contention = point, contention
        events["contended"] = first_contention.reason[:500]
        probe = HostStateProbe(live.handle, ctx.budget.cpus, ctx.budget.generator_cpus)
        waited_s, quieted, _ = wait_for_quiet(probe, config.max_neighbour_pct, config.quiet_wait_s)
        events["quiet_wait"] = {"waited_s": round(waited_s, 2), "quieted": quieted}
        events["remeasure_begin"] = time.time()
        point = run_point(ctx, life, cell)
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
    row["lengthened"] = False
    if (lengthen and outcome.status == "ok" and lengthens(cell, config)
            and should_lengthen(point.fields, life.best_holding_rps)):
        point, outcome, row["lengthened"] = _lengthen(ctx, life, cell, point, outcome, events)
    events["load_end"] = time.time()
    done = _finish(life, row, point, outcome, events)
    progress.emit("point", point_what(done), point_figure(done), events["load_end"] - events["load_begin"],
                  ctx.left(), ctx.night_end_s())
    return done, point.measurement


def lengthen_point(ctx: SessionContext, life: ServerLife, cell: Cell, row: dict,
                   first: Measurement) -> tuple[dict, Measurement | None]:
    """A sweep's point (`row` and its measurement `first`, from `measure_point`) looked at longer: the row to publish
    in its place (the longer look's figures, `lengthened`; or `row` itself where that look did not count, the
    timeline saying why), and the longer look's measurement (None where it did not count)."""
    events = life.timeline["cells"].setdefault(cell.cell_id, {})
    look = PointRun(row, first, None, None, ServerHealth(None, True))
    point, outcome, lengthened = _lengthen(ctx, life, cell, look, PointOutcome("ok", None, False), events)
    if not lengthened:
        return row, None
    longer = {k: v for k, v in row.items() if k not in ("status", "reason")}
    longer["lengthened"] = True
    return _finish(life, longer, point, outcome, events), point.measurement


def point_what(row: dict) -> str:
    """"resnet50/onnx/triton concurrency 4 (binary)": a row's load point, for progress lines."""
    load = row.get("load")
    load = f"{load:g}" if isinstance(load, (int, float)) else str(load)
    return f"{row.get('model')}/{row.get('format')}/{row.get('server')} {row.get('mode')} {load} ({row.get('wire')})"


def point_figure(row: dict) -> str:
    """"12.9 req/s, p99 82 ms (holds), ok": a row's key figures, for progress lines."""
    rps, p99, verdict = row.get("throughput_rps"), row.get("latency_ms_p99"), row.get("p99_bound_verdict")
    bound = f" ({verdict})" if verdict else ""
    figures = [f"{rps:.1f} req/s" if isinstance(rps, (int, float)) else "",
               f"p99 {p99:.0f} ms{bound}" if isinstance(p99, (int, float)) else (f"p99 bound{bound}" if bound else ""),
               str(row.get("status"))]
    return ", ".join(f for f in figures if f)


def _finish(life: ServerLife, row: dict, point: PointRun, outcome: PointOutcome, events: dict) -> dict:
    """The point's row once its look is chosen: its figures, status and reason; the server life's record of it."""
    row.update(point.fields)
    row.update(status=outcome.status, reason=outcome.reason[:4000] if outcome.reason else None)
    if outcome.status == "ok" and row.get("p99_bound_verdict") == "holds":
        life.best_holding_rps = max(life.best_holding_rps, row.get("throughput_rps") or 0.0)
    if life.profile is not None:
        life.profile.after_point(row, point.footprint_after)
    if outcome.server_failed:
        row[SERVER_FAILED] = describe_health(life.live.server.name, point.health)[:4000]
        events["server_failed"] = row[SERVER_FAILED][:500]
    return row


def _lengthen(ctx: SessionContext, life: ServerLife, cell: Cell, first: PointRun, first_outcome: PointOutcome,
              events: dict) -> tuple[PointRun, PointOutcome, bool]:
    """The point's longer look (tasks/measure/bounds.py): its figures replace the first look's when it ran, also when
    its requests failed or the server failed in it (findings of their own); where it could not run or was contended
    the first look stands and the timeline says why the longer one did not count."""
    config = ctx.config
    settings = lengthened_settings(ctx.load_settings(cell), config, first.measurement)
    look = {"first_verdict": first.fields.get("p99_bound_verdict"),
            "first_requests": first.fields.get("latency_samples"), "first_bounds": first.fields.get("p99_bounds"),
            "first_duration_s": first.fields.get("duration_s"), "duration_s": settings.duration_s,
            "begin": time.time()}
    events.setdefault("lengthen", []).append(look)
    late = ctx.clock.cut(settings.warmup_s + settings.duration_s) if ctx.clock is not None else None
    if late:  # the night's measuring time would end inside the look: the first look stands, undecided
        look.update(end=look["begin"], not_counted=f"not looked at: {late}"[:500])
        return first, first_outcome, False
    longer = run_point(ctx, life, cell, settings)
    outcome = _judge(life.live, longer, config)
    look["end"] = time.time()
    progress.emit("look", f"{cell.cell_id}, {settings.duration_s:.0f} s",
                  f"{longer.fields.get('latency_samples')} requests, p99 {longer.fields.get('p99_bound_verdict')} "
                  f"(first look: {look['first_verdict']}), {outcome.status}", look["end"] - look["begin"],
                  ctx.left(), ctx.night_end_s())
    clean = outcome.status == "ok" and _contention(longer, outcome, config) is None
    # a look that failed on its own requests (errors, timeouts: more than the server sustains for that long) is a
    # finding, as is a server that failed in it; only one that could not run, or was contended, does not count
    if clean or outcome.server_failed or (outcome.status == "failed" and longer.measurement is not None):
        return longer, outcome, True
    look["not_counted"] = (outcome.reason or "contended")[:500]
    return first, first_outcome, False


def _judge(live: LiveServer, point: PointRun, config: RunConfig) -> PointOutcome:
    return judge_point(live.server.name, point.measurement.to_dict() if point.measurement else None,
                       point.load_error, point.health, config.max_error_rate)


def _contention(point: PointRun, outcome: PointOutcome, config: RunConfig) -> Contention | None:
    """Why an otherwise ok point was contended (None: not contended, or not ok for another reason)."""
    if outcome.status != "ok" or point.host is None:
        return None
    return judge_host(point.host.to_dict(), config.max_neighbour_pct)


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


def breakdown_source(server, measurement: Measurement | None) -> str:
    """What a row's breakdown was read from, or why it has none."""
    if measurement is not None and measurement.server_timed_requests:
        return server.timing_source
    if not server.timing_source:
        return f"{NONE_REPORTED}: {server.name} reports no timing of its requests"
    return f"{NONE_REPORTED}: {server.name}'s timing answered nothing for this point ({server.timing_source})"
