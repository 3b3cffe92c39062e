"""The pipeline's steps as plain functions: what the DAG's tasks and the CLI call, in this order.

    start_run -> convert_step (per conversion) -> measure_session (per server session, one at a time)
    -> collect_results -> validate_step -> regress_step -> duet_step (changed cells beside their reference, per
    host) -> publish_step -> notify_step (beside check_outcome) -> check_outcome

The watchdog's step (dags/serving_eval_watchdog.py: a night that never published) is
`tasks.report.watchdog.watch_latest`. `publish_kept` is
`python -m tasks.cli publish`'s: the results a publish that failed kept in the run's work folder, published later.

Inputs and outputs are JSON-ready dicts, so they travel through XCom unchanged. The plan step resolves the run's
configuration once (suite values included) and writes it, with the sessions and their cells, into `planned` (its
output: the run and its plan); every later step reads the plan back from there (`run_plan`) and never resolves the
Params again.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from tasks.convert import ConversionSkipped, convert
from tasks.convert.sources import resolve_source
from tasks.core.errors import ConfigError, ServingEvalError
from tasks.core.metadata import collect_code_metadata, collect_host_metadata, host_fingerprint, measuring_hosts
from tasks.core.paths import CACHE_ENV, cache_root, run_dir, runs_root
from tasks.core.progress import stage
from tasks.core.results import SCHEMA_VERSION, frame_records, to_csv_bytes, to_frame, to_parquet_bytes
from tasks.core.spec import load_spec
from tasks.core.verdicts import is_regression
from tasks.measure.context import not_measured
from tasks.measure.hostcheck import HostCheck, HostRefused, check_host, describe
from tasks.measure.session import host_run, measure_session
from tasks.plan.cells import Plan, Session, expected_rows, make_plan, rows_of
from tasks.plan.config import RunConfig
from tasks.plan.hosts import check_worker_host, is_distributed, sessions_of
from tasks.plan.night import NightClock, fit_night, night_lines, night_outcome, stage_clocks, start_clock
from tasks.plan.past_nights import past_nights
from tasks.regress.check import judge_run
from tasks.regress.night_duets import REFERENCES_FILE, merge_duets, references_json, run_duets
from tasks.regress.references import keep_runtimes
from tasks.report.coverage import carried_rows
from tasks.report.notify import Sender, notify_night
from tasks.report.page import PublishedRun, render_report
from tasks.report.progress_lines import (
    check_figure,
    collected_figure,
    conversion_figure,
    plan_figure,
    publish_figure,
    regress_figure,
    validation_figure,
)
from tasks.report.record import RecordNight, build_record
from tasks.report.trend import build_trend
from tasks.runtimes import interrupts
from tasks.serve.launchers import LAUNCHERS
from tasks.store.migrate import migrate_layout
from tasks.store.publish import publish_run
from tasks.store.s3 import ConnectionFields, S3Store
from tasks.store.wait import StoreAway
from tasks.validate.expectations import validate_run
from tasks.validate.outcome import MEASURED_STATUSES


class RunFailed(ServingEvalError):
    """The run was published, but it failed validation or has failed cells (raised by `check_outcome`)."""


# In a run's work folder: what publishing needs, written before the store is first asked and removed once the run is
# published. While it is there the teardown keeps the folder (its server logs are published with the run).
UNPUBLISHED_FILE = "unpublished.json"


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def result_store(config: RunConfig, conn: ConnectionFields) -> S3Store:
    return S3Store(config.s3_bucket, config.s3_prefix, conn, sse=config.s3_sse, kms_key_id=config.s3_kms_key_id,
                   wait_s=config.store_wait_s)


def run_plan(planned: dict) -> Plan:
    """The plan as the plan step resolved it (config, conversions, sessions), read back from its output."""
    return Plan.from_dict(planned)


@stage("plan", plan_figure)
def start_run(params: dict, *, run_id: str, logical_date: str, conn: ConnectionFields) -> dict:
    """The plan step: check every input that can be checked without converting (Params and their cross-field
    rules, model specs, bring-your-own source files: presence, shape, `sha256`), the work folder and the store,
    then expand the plan and, with Param night_budget_s, fit it into the night's budget (tasks/plan/night.py: the
    suite's last nights on this host read from the store). Bad input raises here, naming the model and field;
    nothing is converted or started."""
    begin = time.time()
    plan = plan_run(params, conn)
    config = plan.config
    check = check_run_host(config)
    for line in describe(check):  # the nightly's first task logs the host it plans on
        print(f"host check: {line}", flush=True)
    directory = prepare_run_dir(run_id)
    store = result_store(config, conn)
    store.check()
    host = collect_host_metadata()
    plan = fit_plan(plan, store, host, logical_date)
    plan = replace(plan, night=start_clock(plan.night, begin))
    for line in night_lines(plan.night):
        print(f"night: {line}", flush=True)
    run = {
        "run_id": run_id, "logical_date": logical_date, "started_at": now_iso(), "schema_version": SCHEMA_VERSION,
        "run_dir": str(directory), "host": host, "code": collect_code_metadata(),
        "host_check": check.to_dict()["findings"], "plan_clock": {"begin": begin, "end": time.time()},
        "session_ids": [s.session_id for s in plan.sessions],  # a session's place in the plan, for progress lines
    }
    return {"run": run, **plan.to_dict()}


def fit_plan(plan: Plan, store: S3Store | None, host: dict, logical_date: str | None) -> Plan:
    """The plan fitted into Param night_budget_s from the suite's last nights on this host (unchanged without it;
    without a store, on a first night's defaults)."""
    if plan.config.night_budget_s is None:
        return plan
    nights = past_nights(store, plan.config.suite, host, before=logical_date) if store is not None else []
    return fit_night(plan, nights)


def plan_run(params: dict, conn: ConnectionFields) -> Plan:
    """Every check of the run's inputs that needs no work folder and no store (the Params and their cross-field
    rules, model specs, bring-your-own source files: presence, shape, `sha256`), then the plan. `tasks.cli plan`
    calls this too, so a dry run refuses exactly what a run refuses."""
    plan = make_plan(RunConfig.from_params(params))
    check_sources(plan.config, conn)
    check_run_host(plan.config)
    return plan


def check_run_host(config: RunConfig) -> HostCheck:
    """The pre-flight check of this host (`tasks.measure.hostcheck`, what `tasks.cli doctor` prints): its findings
    and, where this host measures (one host), the run's hard limits, refused here before any work (HostRefused). In
    a multi-host deployment the plan step runs elsewhere: each measuring host checks itself (`measure_in_run`)."""
    if is_distributed():
        return check_host(None, refuse=False)
    return check_host(config)


def check_sources(config: RunConfig, conn: ConnectionFields) -> None:
    """Every bring-your-own source file is there, has its format's shape and, when pinned, its `sha256`
    (an s3:// file is fetched through the run's connection into the source cache the conversion then uses)."""
    for model in config.models:
        spec = load_spec(model)
        if spec.source_file:
            resolve_source(spec, conn)


def prepare_run_dir(run_id: str) -> Path:
    """The run's private work folder, empty (a retry of this run id starts afresh), or a ConfigError naming it."""
    directory = run_dir(run_id)
    try:
        shutil.rmtree(directory, ignore_errors=True)
        (directory / "logs").mkdir(parents=True)
        probe = directory / ".writable"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(CACHE_ENV, str(directory), f"the run's work folder must be a writable folder ({exc}); "
                                                      f"point {CACHE_ENV} at one") from exc
    return directory


@stage("conversion", conversion_figure)
def convert_step(conversion: dict, log=print, conn: ConnectionFields | None = None,
                 store: S3Store | None = None) -> dict:
    """Convert one (model, format); a failure is returned as data (`error`), a host that cannot make the format
    as `skipped` (its reason, e.g. TensorRT without a GPU), never raised. `conn` fetches s3:// sources;
    `store` shares artifacts under its `artifacts/` prefix. Its `seconds` and `clock` say how long it took (the
    night's estimates read them: tasks/plan/estimates.py)."""
    begin = time.time()
    out = _convert(conversion, log, conn, store)
    end = time.time()
    return {**out, "seconds": round(end - begin, 2), "clock": {"begin": begin, "end": end}}


def _convert(conversion: dict, log, conn: ConnectionFields | None, store: S3Store | None) -> dict:
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


def convert_in_run(conversion: dict, planned: dict, conn: ConnectionFields, log=print) -> dict:
    """`convert_step` with the run's connection (s3:// sources) and, with share_artifacts, its store."""
    config = run_plan(planned).config
    store = result_store(config, conn) if config.share_artifacts else None
    return convert_step(conversion, log=log, conn=conn, store=store)


def measure_in_run(session: dict, conversions: list[dict], planned: dict, conn: ConnectionFields | None) -> dict:
    """One server session (as planned, a dict) as a measuring task runs it: on the host it was planned on (checked
    in a multi-host deployment), fetching artifacts converted elsewhere through the store (share_artifacts)."""
    ours = Session.from_dict(session)
    if ours.host:
        check_worker_host(ours.host)
    config = run_plan(planned).config
    if is_distributed():  # the plan step checked another machine: this one checks itself
        try:
            check_host(config)
        except HostRefused as exc:
            run = host_run(planned["run"])
            return {"rows": [not_measured(run, c, "failed", str(exc)) for c in ours.cells],
                    "timeline": {"session_id": ours.session_id, "server": ours.server,
                                 "host": run["measuring_host"], "cells": {}, "refused": str(exc)[:1000]}}
    store = result_store(config, conn) if config.share_artifacts and conn is not None else None
    return measure_session(ours, conversions, planned["run"], config, store=store,
                           clock=NightClock.of(planned.get("night") or {}))


def host_sessions(planned: dict, host: str) -> list[dict]:
    """The sessions planned on `host`: what its measuring task is mapped over (empty: it is skipped)."""
    return sessions_of(planned["sessions"], host)


@stage("measuring collected", collected_figure)
def collect_results(planned: dict, session_outputs: list[dict | None]) -> dict:
    """One row per planned cell: rows the sessions returned, and `failed` rows for any session that died; the cells
    the night's clock deferred (no row) in `deferred`."""
    run = planned["run"]
    rows, timelines, tuning, deferred = [], [], [], []
    for out in session_outputs:
        if out:
            rows += out["rows"]
            timelines += out.get("timelines") or [out["timeline"]]
            deferred += out.get("deferred") or []
            if out.get("tuning"):
                tuning.append(out["tuning"])
    later = {d["cell_id"] for d in deferred}
    for cell in run_plan(planned).cells:
        if cell.cell_id not in later and not rows_of(cell, rows):
            reason = "the server session task failed before returning results"
            rows.append(not_measured(run, cell, "failed", reason))
    finished = now_iso()
    for row in rows:
        row["finished_at"] = finished
    return {"rows": rows, "timelines": timelines, "tuning": tuning, "deferred": deferred}


def measured_sessions(planned: dict, collected: dict) -> list[Session]:
    """The planned sessions less the cells the night's clock deferred (they owe no row)."""
    later = {d["cell_id"] for d in collected.get("deferred") or []}
    sessions = [replace(s, cells=tuple(c for c in s.cells if c.cell_id not in later))
                for s in run_plan(planned).sessions]
    return [s for s in sessions if s.cells]


@stage("validation", validation_figure)
def validate_step(planned: dict, collected: dict, conversions: list[dict]) -> dict:
    begin = time.time()
    parity = [c["parity"] for c in conversions if c and c.get("parity")]
    expected = expected_rows(measured_sessions(planned, collected), collected["rows"])  # a sweep: a row a point
    validation = validate_run(to_frame(collected["rows"]), parity, expected)
    return {**validation, "clock": {"begin": begin, "end": time.time()}}


@stage("regression check", check_figure)
def regress_step(planned: dict, collected: dict, conversions: list[dict], conn: ConnectionFields) -> dict:
    """Each cell's inputs against its reference night's (same cell key, same host, earlier logical dates, exclusions
    left out) and the control's history; the changed cells' duets still need `duet_step`."""
    begin = time.time()
    plan = run_plan(planned)
    # tonight's deferred cells, planned and cut by the clock, are neither missing nor judged
    plan = replace(plan, night={**plan.night, "deferred": [*(plan.night.get("deferred") or []),
                                                           *(collected.get("deferred") or [])]})
    parity_now = [c["parity"] for c in conversions if c and c.get("parity")]
    regressions = judge_run(result_store(plan.config, conn), planned["run"], collected["rows"], parity_now, plan)
    keep_references(regressions)
    return {**regressions, "clock": {"begin": begin, "end": time.time()}}


def keep_references(regressions: dict) -> None:
    """Record on this host what tonight's references need kept (images, artifacts, runtime snapshots), so that a
    prune of the cache never removes a live reference (`python -m tasks.cli images prune` reads it)."""
    path = cache_root() / REFERENCES_FILE
    try:
        path.write_text(references_json(regressions))
    except OSError:
        pass  # the cache is checked writable at the plan step; a reference kept nowhere is still in the store


@stage("regression work", regress_figure)
def duet_step(planned: dict, conversions: list[dict], regressions: dict, host: str | None = None,
              conn: ConnectionFields | None = None) -> dict:
    """Measure every changed cell beside its reference (a duet), after tonight's A/A duet of the control cell; with
    `host`, the cells measured on that host, on it. References are fetched through the store."""
    plan = run_plan(planned)
    if host is not None:
        check_worker_host(host)
    store = result_store(plan.config, conn) if conn is not None else None
    begin = time.time()
    out = run_duets(planned, conversions, regressions, host=host, store=store)
    return {**out, "duet_clock": {"begin": begin, "end": time.time()}}


def merge_duet_parts(regressions: dict, parts: list[dict | None]) -> dict:
    """The regression record as published: the per-host duets put together (tasks/regress/night_duets.py), and when
    their work began and ended (`duet_clock`, the night's stage `regress`)."""
    merged = merge_duets(regressions, list(parts))
    clocks = [p["duet_clock"] for p in parts if p and p.get("duet_clock")]
    if clocks:
        merged["duet_clock"] = {"begin": min(c["begin"] for c in clocks), "end": max(c["end"] for c in clocks)}
    return merged


def run_status(collected: dict, validation: dict) -> str:
    """complete: validated, every cell ok or skipped; partial: some cells failed or were contended (measured while
    other work took the host, docs/measuring.md), some were measured; failed: validation failed, or no cell could be
    measured at all (a run that measured nothing is no partial result)."""
    rows = collected["rows"]
    compared = [r for r in rows if r.get("role") != "control"]  # the control cell alone measures no comparison
    if not validation["success"] or not any(r["status"] in MEASURED_STATUSES for r in compared):
        return "failed"
    return "partial" if failed_rows(rows) or contended_rows(rows) else "complete"


def contended_rows(rows: list[dict]) -> list[dict]:
    """Rows measured while other work took the host's CPU, twice: their figures are not the stack's."""
    return [r for r in rows if r["status"] == "contended"]


def failed_rows(rows: list[dict]) -> list[dict]:
    """Rows that failed as faults: not a sweep's probe beyond the server's capacity (see
    `tasks.measure.sweep.measure_sweep`)."""
    return [r for r in rows if r["status"] == "failed" and not r.get("beyond_capacity")]


@stage("publishing", publish_figure)
def publish_step(planned: dict, collected: dict, conversions: list[dict], validation: dict,
                 conn: ConnectionFields, regressions: dict | None = None) -> dict:
    """Write the run folder to the store (manifest last, latest after) and return a short summary.

    What publishing needs is first kept in the run's work folder (`keep_unpublished`); each request waits for a
    store that does not answer (Param store_wait_s). Past the wait this raises StoreAway naming the store, and the
    kept results (the teardown keeps the folder) are published later by `python -m tasks.cli publish <run id>`, or
    by clearing this task. Published, the kept file goes, and the teardown removes the folder."""
    begin = time.time()
    regressions = regressions or {"schema_version": SCHEMA_VERSION, "regressions": 0, "records": []}
    run_id = planned["run"]["run_id"]
    kept = keep_unpublished(planned, collected, conversions, validation, regressions)
    advice = (f"the run's results are kept in {kept.parent}: once the store answers, `python -m tasks.cli publish "
              f"{shlex.quote(run_id)}` publishes them (or clear the `publish` task and its downstream tasks in the "
              "Airflow UI)")
    try:
        summary = write_run(planned, collected, conversions, validation, conn, regressions, begin)
    except StoreAway as exc:
        raise StoreAway(f"{exc}; {advice}") from exc
    except BaseException:
        print(f"publish: failed; {advice}", flush=True)
        raise
    kept.unlink(missing_ok=True)
    return summary


def keep_unpublished(planned: dict, collected: dict, conversions: list[dict], validation: dict,
                     regressions: dict) -> Path:
    """`unpublished.json` in the run's work folder: the plan step's output, the rows and timelines, the conversions,
    validation and regressions, all a later `publish_kept` needs to publish the same run folder."""
    path = Path(planned["run"]["run_dir"]) / UNPUBLISHED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"schema_version": SCHEMA_VERSION, "run_id": planned["run"]["run_id"], "started": planned,
              "collected": collected, "conversions": conversions, "validation": validation, "regressions": regressions}
    partial = path.with_name(f".{UNPUBLISHED_FILE}.partial")
    partial.write_bytes(_json(record))
    partial.replace(path)  # never a half file where the results should be
    return path


def write_run(planned: dict, collected: dict, conversions: list[dict], validation: dict, conn: ConnectionFields,
              regressions: dict, begin: float | None = None) -> dict:
    """The run folder written to the store, and the summary (`begin`: when publishing began, the night's stage
    `publish`). Runs an older version published in the old folder layout are moved to the new one first
    (tasks/store/migrate.py), so that after the first night on schema 1.4 the store holds one layout."""
    begin = time.time() if begin is None else begin
    plan = run_plan(planned)
    config = plan.config
    run = planned["run"]
    frame = to_frame(collected["rows"])
    parity = [c["parity"] for c in conversions if c and c.get("parity")]
    status = run_status(collected, validation)
    store = result_store(config, conn)
    for move in migrate_layout(store):
        print(move.describe(), flush=True)
    night = night_outcome(plan.night, collected.get("deferred") or [],
                          stage_clocks(planned, collected, conversions, validation, regressions, begin), time.time())
    carried = carried_rows(store, night.get("deferred") or []) if night else []
    hosts = measuring_hosts(collected["rows"])
    # the host of the run: where it measured when that is one kind of machine (the plan's host otherwise)
    host = next(iter(hosts.values())) if len({host_fingerprint(h) for h in hosts.values()}) == 1 else run["host"]
    provenance = json.loads(json.dumps({**run["code"], "host": host, "hosts": hosts, "config": config.to_dict(),
                                        "host_check": run.get("host_check")}))
    files = {
        "results.parquet": to_parquet_bytes(frame),
        "results.csv": to_csv_bytes(frame),
        "parity.json": _json(parity),
        "validation.json": _json(validation),
        "regressions.json": _json(regressions),
        "logs/sessions.json": _json(collected["timelines"]),
        **({"tuning.json": _json({"schema_version": SCHEMA_VERSION, "searches": collected["tuning"]})}
           if collected.get("tuning") else {}),
        "logs/conversions.json": _json(conversions),
        "plan.json": _json({**{k: planned[k] for k in ("config", "conversions", "sessions")}, "night": night}),
        **({"night.json": _json(night)} if night else {}),
        **({"carried.parquet": to_parquet_bytes(to_frame(carried))} if carried else {}),
    }
    identity = {"run_id": run["run_id"], "logical_date": run["logical_date"], "status": status,
                "provenance": provenance}
    files["trend.json"] = _json(build_trend(store, rows=frame_records(frame), **identity))
    tonight = RecordNight(run["run_id"], run["logical_date"], status, planned["sessions"], frame_records(frame),
                          regressions["records"], night)
    files["record.json"] = _json(build_record(store, tonight, config.suite, host, config.record_nights))
    # The report is rendered from the published bytes alone, as `rebuild_report` does from the store.
    files["report.html"] = render_report(PublishedRun.from_files(files, identity)).encode()
    for log in sorted((Path(run["run_dir"]) / "logs").glob("*.log")):
        files[f"logs/{log.name}"] = log.read_bytes()
    keep_runtimes(store, collected["rows"])
    manifest = publish_run(store, run_id=run["run_id"], logical_date=run["logical_date"], files=files, status=status,
                           provenance=provenance)
    rows = collected["rows"]
    return {
        "status": status, "bucket": config.s3_bucket, "prefix": manifest["prefix"],
        "manifest": f"s3://{config.s3_bucket}/{manifest['prefix']}/manifest.json",
        "cells": len(rows), "failed": len(failed_rows(rows)), "contended": len(contended_rows(rows)),
        "beyond_capacity": sum(bool(r.get("beyond_capacity")) for r in rows),
        "skipped": sum(r["status"] == "skipped" for r in rows),
        "validation_success": validation["success"], "failed_expectations": validation["failed_expectations"],
        "fail_on_cell_failure": config.fail_on_cell_failure, "fail_on_regression": config.fail_on_regression,
        "regressions": [{k: r[k] for k in ("model", "format", "server", "load", "metric", "verdict", "change_pct",
                                            "change_ci", "cause") if k in r}
                        for r in regressions["records"] if is_regression(r["verdict"])],
        "aws_conn_id": config.aws_conn_id, "s3_prefix": config.s3_prefix, "run_id": run["run_id"],
        "logical_date": run["logical_date"],
    }


def check_outcome(summary: dict) -> dict:
    """Raise after publishing when the run failed validation, measured nothing, or (unless turned off) has failed
    cells or regressions."""
    if not summary["validation_success"]:
        raise RunFailed(f"run published to {summary['manifest']} failed validation: {summary['failed_expectations']}")
    if summary["status"] == "failed":
        raise RunFailed(f"no cell of the run could be measured ({summary['failed']} failed, {summary['skipped']} "
                        f"skipped; published as failed to {summary['manifest']}); see the `reason` column")
    if summary["failed"] and summary["fail_on_cell_failure"]:
        raise RunFailed(f"{summary['failed']} of {summary['cells']} cells failed (published as partial to "
                        f"{summary['manifest']}); see the `reason` column. "
                        "Param fail_on_cell_failure=false turns this off.")
    if summary.get("contended") and summary["fail_on_cell_failure"]:
        raise RunFailed(f"{summary['contended']} of {summary['cells']} cells were contended: other work took the "
                        f"host's CPU while they were measured, also when measured again (published as partial to "
                        f"{summary['manifest']}); see the `reason` and `neighbour_cpu_pct` columns. Param "
                        "fail_on_cell_failure=false turns this off; max_neighbour_pct=100 stops judging the host.")
    if summary.get("regressions") and summary.get("fail_on_regression"):
        raise RunFailed(f"{len(summary['regressions'])} regressions against the history (see regressions.json next to "
                        f"{summary['manifest']}): {summary['regressions'][:5]}")
    return summary


def run_problems(summary: dict) -> list[str]:
    """Why a published run is not fully ok (empty when it is): what the CLI's non-zero exit code stands for,
    whatever the Params that let the DAG run stay green say."""
    problems = []
    if summary["status"] != "complete":
        contended = f", {summary['contended']} contended" if summary.get("contended") else ""
        problems.append(f"run status {summary['status']}: {summary['failed']} of {summary['cells']} cells failed"
                        f"{contended}")
    if not summary["validation_success"]:
        problems.append(f"validation failed: {summary['failed_expectations']}")
    return problems


def sweep_leftovers(run_id: str | None = None) -> int:
    """Stop the servers of `run_id`, or (None) the servers that crashed runs left behind, whose starting task is
    gone; a crashed run's work folder goes with its servers (`cleanup_run_dir`: unless it waits to be published)."""
    swept = []
    for launcher_cls in LAUNCHERS.values():
        swept += launcher_cls().sweep(run_id)
    if run_id is None:
        for crashed in {h.run_id for h in swept}:
            cleanup_run_dir(crashed)
    return len(swept)


def cleanup_run_dir(run_id: str) -> bool:
    """Remove the run's work folder, unless its results wait to be published (`UNPUBLISHED_FILE`, left by a publish
    that failed): that folder stays, server logs and all, until `publish_kept`. True when it was removed."""
    directory = run_dir(run_id)
    if (directory / UNPUBLISHED_FILE).is_file():
        print(f"kept {directory}: the run's results wait to be published (`python -m tasks.cli publish "
              f"{shlex.quote(run_id)}`)", flush=True)
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return True


def unpublished_runs() -> list[str]:
    """The run ids whose results wait on this host to be published, oldest kept first."""
    kept = sorted(runs_root().glob(f"*/{UNPUBLISHED_FILE}"), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text())["run_id"] for p in kept]


def read_unpublished(run_id: str) -> dict:
    """What a publish that failed kept for `run_id` (`keep_unpublished`), or a ConfigError naming the run."""
    path = run_dir(run_id) / UNPUBLISHED_FILE
    if not path.is_file():
        waiting = ", ".join(unpublished_runs()) or "none"
        raise ConfigError("run", run_id, f"must be a run whose results wait on this host to be published ({path} is "
                                         f"not there; waiting: {waiting})")
    return json.loads(path.read_text())


def publish_kept(kept: dict, conn: ConnectionFields, bucket: str | None = None, prefix: str | None = None) -> dict:
    """Publish the results a failed publish kept (`read_unpublished`) as the step would have, to the run's store
    (or to `bucket`/`prefix` through `conn`); then the run's work folder goes. Nothing is measured again."""
    store = {"aws_conn_id": conn.conn_id, "s3_bucket": bucket, "s3_prefix": prefix}
    planned = {**kept["started"], "config": {**kept["started"]["config"],
                                             **{k: v for k, v in store.items() if v is not None}}}
    summary = publish_step(planned, kept["collected"], kept["conversions"], kept["validation"], conn,
                           kept["regressions"])
    cleanup_run_dir(kept["run_id"])
    return summary


def sweep_host(run_id: str | None = None, host: str | None = None) -> int:
    """A measuring host's sweep (setup: crashed runs' servers; teardown: this run's servers and work folder, the
    folder kept while its results wait to be published), run on that host's queue (tasks/plan/hosts.py)."""
    if host is not None:
        check_worker_host(host)
    swept = sweep_leftovers(run_id)
    if run_id is not None:
        cleanup_run_dir(run_id)
    return swept


def _json(value: object) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True, default=str).encode()


def run_pipeline(params: dict, *, run_id: str, logical_date: str, conn: ConnectionFields) -> tuple[dict, list[dict]]:
    """Every step in order in this process, as the DAG runs them: (publish summary, result rows).

    Server sessions run one after another; leftovers of crashed runs are swept before, this run's after (its work
    folder kept when publishing failed: `publish_kept`).
    """
    sweep_leftovers()
    try:
        planned = start_run(params, run_id=run_id, logical_date=logical_date, conn=conn)
        plan = run_plan(planned)
        converted = [convert_in_run(c, planned, conn) for c in plan.conversions]
        measured = []
        for session in plan.sessions:
            interrupts.check()  # a stop whose KeyboardInterrupt was lost must not reach the publish step
            measured.append(measure_session(session, converted, planned["run"], plan.config,
                                            clock=NightClock.of(plan.night)))
        collected = collect_results(planned, measured)
        validation = validate_step(planned, collected, converted)
        regressions = duet_step(planned, converted, regress_step(planned, collected, converted, conn), conn=conn)
        interrupts.check()
        return publish_step(planned, collected, converted, validation, conn, regressions), collected["rows"]
    finally:
        sweep_leftovers(run_id)
        cleanup_run_dir(run_id)


def notify_step(planned: dict, summary: dict, conn: ConnectionFields, senders: list[Sender], log=print) -> dict:
    """After publishing: the night's findings read back from its published objects, sent to every notifier when one
    is new (or always, with Param notify_quiet), and recorded in the run's own notifications.json. Never raises: a
    notifier that fails is logged and recorded, and the run stays as published (docs/notifications.md)."""
    try:
        config = run_plan(planned).config
        return notify_night(result_store(config, conn), config, summary, senders, log)
    except Exception as exc:  # noqa: BLE001 - notifying never fails the run: logged, returned
        log(f"notify: the night's message could not be decided or recorded: {type(exc).__name__}: {exc}")
        return {"decision": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
