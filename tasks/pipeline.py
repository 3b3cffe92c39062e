"""The pipeline's steps as plain functions: what the DAG's tasks and the CLI call, in this order.

    start_run -> convert_step (per conversion) -> measure_session (per server session, one at a time)
    -> collect_results -> validate_step -> regress_step -> confirm_step (re-measures suspects, one server at a
    time) -> publish_step -> check_outcome

Inputs and outputs are JSON-ready dicts, so they travel through XCom unchanged.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from tasks.config import RunConfig
from tasks.convert import ConversionSkipped, convert
from tasks.errors import ServingEvalError
from tasks.measure import not_measured
from tasks.metadata import collect_code_metadata, collect_host_metadata
from tasks.plan import expected_rows, make_plan, rows_of
from tasks.publish import publish_run, safe_run_id
from tasks.report import render_report
from tasks.results import SCHEMA_VERSION, to_csv_bytes, to_frame, to_parquet_bytes
from tasks.runtimes import cache_root
from tasks.serve.launchers import LAUNCHERS
from tasks.spec import load_spec
from tasks.store import ConnectionFields, S3Store


class RunFailed(ServingEvalError):
    """The run was published, but it failed validation or has failed cells (raised by `check_outcome`)."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def run_dir(run_id: str) -> Path:
    return cache_root() / "runs" / safe_run_id(run_id)


def result_store(config: RunConfig, conn: ConnectionFields) -> S3Store:
    return S3Store(config.s3_bucket, config.s3_prefix, conn, sse=config.s3_sse, kms_key_id=config.s3_kms_key_id)


def start_run(params: dict, *, run_id: str, logical_date: str, conn: ConnectionFields) -> dict:
    """Check the inputs and the store, expand the plan; nothing is converted or started yet."""
    config = RunConfig.from_params(params)
    plan = make_plan(config)
    result_store(config, conn).check()
    directory = run_dir(run_id)
    shutil.rmtree(directory, ignore_errors=True)  # a retry of this run id starts its folder afresh
    (directory / "logs").mkdir(parents=True)
    run = {
        "run_id": run_id, "logical_date": logical_date, "started_at": now_iso(), "schema_version": SCHEMA_VERSION,
        "run_dir": str(directory), "host": collect_host_metadata(), "code": collect_code_metadata(),
    }
    return {"run": run, **plan.to_dict()}


def convert_step(conversion: dict, log=print, conn: ConnectionFields | None = None,
                 store: S3Store | None = None) -> dict:
    """Convert one (model, format); a failure is returned as data (`error`), a host that cannot make the format
    as `skipped` (its reason, e.g. TensorRT without a GPU), never raised. `conn` fetches s3:// sources;
    `store` shares artifacts under its `artifacts/` prefix."""
    model, fmt = conversion["model"], conversion["format"]
    try:
        spec = load_spec(model)
        artifact = convert(spec, fmt, log=log, conn=conn, store=store)
        return {"model": model, "format": fmt, "artifact": artifact.to_dict(), "parity": artifact.parity_record(spec),
                "cache_hit": artifact.cache_hit, "error": None, "skipped": None}
    except ConversionSkipped as exc:  # the cells of this artifact are skipped with this reason
        return {"model": model, "format": fmt, "artifact": None, "parity": None, "cache_hit": False,
                "error": None, "skipped": exc.reason}
    except Exception as exc:  # noqa: BLE001 - the cells of this artifact fail with this reason
        return {"model": model, "format": fmt, "artifact": None, "parity": None, "cache_hit": False,
                "error": f"{type(exc).__name__}: {exc}"[:4000], "skipped": None}


def convert_in_run(conversion: dict, started: dict, conn: ConnectionFields, log=print) -> dict:
    """`convert_step` with the run's connection (s3:// sources) and, with share_artifacts, its store."""
    config = RunConfig.from_params(started["config"])
    store = result_store(config, conn) if config.share_artifacts else None
    return convert_step(conversion, log=log, conn=conn, store=store)


def collect_results(started: dict, session_outputs: list[dict | None]) -> dict:
    """One row per planned cell: rows the sessions returned, and `failed` rows for any session that died."""
    run = started["run"]
    rows, timelines = [], []
    for out in session_outputs:
        if out:
            rows += out["rows"]
            timelines.append(out["timeline"])
    for session in started["sessions"]:
        for cell in session["cells"]:
            if not rows_of(cell, rows):
                reason = "the server session task failed before returning results"
                rows.append(not_measured(run, cell, "failed", reason))
    finished = now_iso()
    for row in rows:
        row["finished_at"] = finished
    return {"rows": rows, "timelines": timelines}


def validate_step(started: dict, collected: dict, conversions: list[dict]) -> dict:
    from tasks.validate import validate_run

    parity = [c["parity"] for c in conversions if c and c.get("parity")]
    expected = expected_rows(started["sessions"], collected["rows"])  # a sweep cell: one row per measured point
    return validate_run(to_frame(collected["rows"]), parity, expected)


def regress_step(started: dict, collected: dict, conversions: list[dict], conn: ConnectionFields) -> dict:
    """Compare tonight's figures with the history in the store (same cell key, same host, earlier logical dates,
    exclusions left out); suspected regressions still need `confirm_step`."""
    from tasks.regress_run import judge_run

    config = RunConfig.from_params(started["config"])
    parity_now = [c["parity"] for c in conversions if c and c.get("parity")]
    return judge_run(result_store(config, conn), started["run"], collected["rows"], parity_now, config)


def confirm_step(started: dict, conversions: list[dict], regressions: dict) -> dict:
    """Re-measure every suspected regression (fresh sessions, with the control cell) before it is published."""
    from tasks.confirm import confirm_run

    return confirm_run(started, conversions, regressions)


def run_status(collected: dict, validation: dict) -> str:
    if not validation["success"]:
        return "failed"
    return "partial" if any(r["status"] == "failed" for r in collected["rows"]) else "complete"


def publish_step(started: dict, collected: dict, conversions: list[dict], validation: dict,
                 conn: ConnectionFields, regressions: dict | None = None) -> dict:
    """Write the run folder to the store (manifest last, latest after) and return a short summary."""
    config = RunConfig.from_params(started["config"])
    run = started["run"]
    frame = to_frame(collected["rows"])
    parity = [c["parity"] for c in conversions if c and c.get("parity")]
    regressions = regressions or {"schema_version": SCHEMA_VERSION, "regressions": 0, "records": []}
    status = run_status(collected, validation)
    report = render_report(collected["rows"], parity, validation, regressions,
                           {"run_id": run["run_id"], "logical_date": run["logical_date"], "status": status})
    files = {
        "results.parquet": to_parquet_bytes(frame),
        "results.csv": to_csv_bytes(frame),
        "parity.json": _json(parity),
        "validation.json": _json(validation),
        "regressions.json": _json(regressions),
        "report.html": report.encode(),
        "logs/sessions.json": _json(collected["timelines"]),
        "logs/conversions.json": _json(conversions),
        "plan.json": _json({k: started[k] for k in ("config", "conversions", "sessions")}),
    }
    for log in sorted((Path(run["run_dir"]) / "logs").glob("*.log")):
        files[f"logs/{log.name}"] = log.read_bytes()
    store = result_store(config, conn)
    manifest = publish_run(store, run_id=run["run_id"], logical_date=run["logical_date"], files=files, status=status,
                           provenance={**run["code"], "host": run["host"], "config": config.to_dict()})
    rows = collected["rows"]
    return {
        "status": status, "bucket": config.s3_bucket, "prefix": manifest["prefix"],
        "manifest": f"s3://{config.s3_bucket}/{manifest['prefix']}/manifest.json",
        "cells": len(rows), "failed": sum(r["status"] == "failed" for r in rows),
        "skipped": sum(r["status"] == "skipped" for r in rows),
        "validation_success": validation["success"], "failed_expectations": validation["failed_expectations"],
        "fail_on_cell_failure": config.fail_on_cell_failure, "fail_on_regression": config.fail_on_regression,
        "regressions": [{k: r[k] for k in ("model", "format", "server", "load", "metric", "change_pct") if k in r}
                        for r in regressions["records"] if r["verdict"] == "regression"],
        "aws_conn_id": config.aws_conn_id, "s3_prefix": config.s3_prefix, "run_id": run["run_id"],
        "logical_date": run["logical_date"],
    }


def check_outcome(summary: dict) -> dict:
    """Raise after publishing when the run failed validation or (unless turned off) has failed cells."""
    if not summary["validation_success"]:
        raise RunFailed(f"run published to {summary['manifest']} failed validation: {summary['failed_expectations']}")
    if summary["failed"] and summary["fail_on_cell_failure"]:
        raise RunFailed(f"{summary['failed']} of {summary['cells']} cells failed (published as partial to "
                        f"{summary['manifest']}); see the `reason` column. "
                        "Param fail_on_cell_failure=false turns this off.")
    if summary.get("regressions") and summary.get("fail_on_regression"):
        raise RunFailed(f"{len(summary['regressions'])} regressions against the history (see regressions.json next to "
                        f"{summary['manifest']}): {summary['regressions'][:5]}")
    return summary


def sweep_leftovers(run_id: str | None = None) -> int:
    """Stop servers that a crashed run left behind (all runs when `run_id` is None)."""
    count = 0
    for launcher_cls in LAUNCHERS.values():
        count += len(launcher_cls().sweep(run_id))
    return count


def cleanup_run_dir(run_id: str) -> None:
    shutil.rmtree(run_dir(run_id), ignore_errors=True)


def _json(value: object) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True, default=str).encode()


def run_pipeline(params: dict, *, run_id: str, logical_date: str, conn: ConnectionFields) -> tuple[dict, list[dict]]:
    """Every step in order in this process, as the DAG runs them: (publish summary, result rows).

    Server sessions run one after another; leftovers of crashed runs are swept before, this run's after.
    """
    from tasks.measure import measure_session

    sweep_leftovers()
    try:
        started = start_run(params, run_id=run_id, logical_date=logical_date, conn=conn)
        config = RunConfig.from_params(started["config"])
        converted = [convert_in_run(c, started, conn) for c in started["conversions"]]
        measured = [measure_session(s, converted, started["run"], config) for s in started["sessions"]]
        collected = collect_results(started, measured)
        validation = validate_step(started, collected, converted)
        regressions = confirm_step(started, converted, regress_step(started, collected, converted, conn))
        return publish_step(started, collected, converted, validation, conn, regressions), collected["rows"]
    finally:
        sweep_leftovers(run_id)
        cleanup_run_dir(run_id)
