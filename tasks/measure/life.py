"""One server life: start the server, check what it serves over each wire its cells use (the time to its first
correct answer), profile it (tasks/measure/lifecycle.py, tasks/measure/capabilities.py), measure each of its cells
(a load point, a sweep, an overload phase), restart it once when it dies or hangs, always stop it."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.results import DEFAULT_CONFIG_ID, OVERLOAD_MODE
from tasks.loadgen.resources import read_footprint
from tasks.measure.capabilities import declared_only, probe_capabilities
from tasks.measure.context import ServerLife, SessionContext, deferred_cell, not_measured
from tasks.measure.inputs import cell_inputs, runtime_fingerprint
from tasks.measure.lifecycle import ServerLifeProfile, feature_fields
from tasks.measure.overload import measure_overload
from tasks.measure.point import SERVER_FAILED, load_endpoint, measure_point
from tasks.measure.served_check import ServedCheck, check_served_outputs
from tasks.measure.sweep import measure_sweep
from tasks.serve.hostlock import host_lock
from tasks.serve.launchers import get_launcher
from tasks.serve.launchers.base import RuntimeSize
from tasks.serve.options import ServingOptions, serving_fingerprint
from tasks.serve.servers import get_server
from tasks.serve.session import LiveServer, SessionSettings, server_session
from tasks.validate.outcome import MAX_RESTARTS


def stack_inputs(ctx: SessionContext, server, options: ServingOptions, live: LiveServer) -> dict:
    """The inputs of this server life's rows, before the protocol of each cell is added."""
    runtime = runtime_fingerprint(server.runtime, ctx.config.launcher, options, live.runtime_image)
    return cell_inputs(ctx.artifact, ctx.spec, runtime, live.server_version, serving_fingerprint(options, None))


def serve_life(ctx: SessionContext, options: ServingOptions, cid: str, values: dict) -> dict:
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
    deferred: list[dict] = []  # cells the night's clock left for a later night (ctx.clock)
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
            for number, cell in enumerate(cells, 1):
                ctx.position.update(cell=number, cells=len(cells))
                late = ctx.clock.cut_cell(cell.cell_id) if ctx.clock is not None and session.role != "control" else None
                if late:  # the night's measuring time is over for this cell: no row, a deferral
                    deferred.append(deferred_cell(cell, session.session_id, late))
                    measured.add(cell.cell_id)
                    timeline["cells"].setdefault(cell.cell_id, {})["deferred"] = late
                    continue
                check = checks[cell.protocol]
                if not check.passed:  # what this wire serves is wrong: its cells fail, the other wires go on
                    rows.append(not_measured(run, cell, "failed", served_reason(server.name, check), **served,
                                             served_err_ratio=check.err_ratio, restarts=live.restarts))
                    life.profile.rows.append(rows[-1])
                    measured.add(cell.cell_id)
                    continue
                if cell.is_sweep:
                    new_rows = measure_sweep(ctx, life, cell)
                elif cell.mode == OVERLOAD_MODE:  # planned last: the points before it measured the capacity
                    new_rows = [measure_overload(ctx, life, cell, rows)]
                else:
                    new_rows = [measure_point(ctx, life, cell)[0]]
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
    return {"rows": rows, "timeline": timeline, "deferred": deferred}


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
