"""One server session measured: start the server, check what it serves over each wire its cells use, run each of
its load points, always stop it. This file prepares the session (what it serves, the engine's own speed) and runs
one server life or a configuration search (tasks/measure/tune.py); a server life is tasks/measure/life.py, a load
point tasks/measure/point.py, a sweep tasks/measure/sweep.py, an overload phase tasks/measure/overload.py.

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

import time
from pathlib import Path

from tasks.convert import Artifact, local_artifact
from tasks.core import progress
from tasks.core.cost import cost_fields
from tasks.core.errors import ServingEvalError
from tasks.core.metadata import collect_host_metadata, host_name
from tasks.core.paths import run_dir
from tasks.core.results import DEFAULT_CONFIG_ID
from tasks.core.spec import ModelSpec, load_spec
from tasks.measure.context import SessionContext, deferred_cell, not_measured
from tasks.measure.engine_speed import engine_speed
from tasks.measure.life import serve_life
from tasks.measure.tune import tune_session
from tasks.plan.cells import Session
from tasks.plan.config import RunConfig
from tasks.plan.hosts import is_distributed
from tasks.plan.night import NightClock
from tasks.serve.budget import plan_budget
from tasks.serve.hostlock import host_lock
from tasks.serve.knobs import knob_values
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.store.s3 import S3Store


def measure_session(session: Session, conversions: list[dict], run: dict, config: RunConfig,
                    store: S3Store | None = None, clock: NightClock | None = None) -> dict:
    """Measure every cell of one server session; return {"rows": [...], "timeline": {...}, "deferred": [...]} (and,
    with a configuration search, "timelines" of every configuration's session and its "tuning" record). Every row
    records the CPU/memory budget its server was given (tasks/serve/budget.py), its serving configuration and the
    host it was measured on; an artifact converted on another host is fetched from `store` (share_artifacts). With
    the night's `clock`, a cell that would end after the measuring stage's deadline is not started: it is
    `deferred` (no row), and a session none of whose cells fits starts no server."""
    begin = time.time()
    out = _measure(session, conversions, run, config, store, clock)
    for timeline in out.get("timelines") or [out["timeline"]]:
        timeline.update(task_begin=begin, task_end=time.time())
    out.setdefault("deferred", [])
    rows, ids = out["rows"], run.get("session_ids") or []
    figure = f"{sum(r.get('status') == 'ok' for r in rows)} of {len(rows)} rows ok" + (
        f", {len(out['deferred'])} cells deferred by the night's clock" if out["deferred"] else "")
    where = f"session {ids.index(session.session_id) + 1} of {len(ids)} in the plan" \
        if session.session_id in ids else ""
    progress.emit("session", session.session_id, figure, time.time() - begin, where,
                  clock.end_s if clock is not None else None)
    return out


def _measure(session: Session, conversions: list[dict], run: dict, config: RunConfig, store: S3Store | None,
             clock: NightClock | None) -> dict:
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus)
    run = host_run(run)
    measured = [c for c in session.cells if not c.skip]
    why = clock.cut(clock.session_s.get(session.session_id, 0.0) + clock.cell_s.get(measured[0].cell_id, 0.0)) \
        if clock is not None and measured and session.role != "control" else None
    if why:  # not even its first cell fits: no server is started for it
        timeline = {"session_id": session.session_id, "server": session.server,
                    "host": run.get("measuring_host"), "cells": {}, "deferred": why}
        return {"rows": [not_measured(run, c, "skipped", c.skip) for c in session.cells if c.skip],
                "timeline": timeline, "deferred": [deferred_cell(c, session.session_id, why) for c in measured]}
    prepared = _prepare(session, conversions, run, store)
    if isinstance(prepared, dict):  # nothing to serve: the cells' rows say why
        out = prepared
    else:
        ctx = SessionContext(session, run, config, budget, *prepared, clock=clock)
        options = ServingOptions(max_batch_size=config.max_batch_size, dynamic_batching=config.dynamic_batching,
                                 device=config.device, cpus=budget.cpu_count, images=config.images)
        speeds = _engine_speeds(ctx, options) if any(not c.skip for c in session.cells) else {}
        knobs = get_server(session.server).knobs
        if config.tune == "off" or not knobs or session.role == "control":  # the control is never tuned
            out = serve_life(ctx, options, DEFAULT_CONFIG_ID, knob_values(options, knobs))
            if config.tune != "off":
                out["tuning"] = {"session_id": session.session_id, "server": session.server,
                                 "method": config.tune, "note": "this server declares no knobs: defaults only"}
        else:
            out = tune_session(ctx, options, knobs)
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
