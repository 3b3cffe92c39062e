"""The index of published runs: what the reports page in the Airflow UI lists, read through the runs' manifests.

    from tasks.report.run_index import list_runs, render_run_list, read_report
    runs = list_runs(store)                      # newest first: status, suite, regression count, report path
    page = render_run_list(runs, store.describe())
    html = read_report(store, "dt=2026-11-28", "run=scheduled__2026-11-28T02_00_00")

A run without a manifest (still being written, or abandoned) is not listed and its report is not served. A report
is found under either folder layout (tasks/store/layout.py): a link from before schema 1.4
(`dt=.../run_id=.../report.html`) still opens the run once it is moved to `dt=.../run=.../`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from tasks.core.errors import ServingEvalError
from tasks.report.formatting import DASH
from tasks.report.record import record_section
from tasks.report.templating import render, stylesheet
from tasks.store.history import list_manifests
from tasks.store.layout import OLD_RUN_KEY, RUN_KEY, RUNS, parse_folder
from tasks.store.s3 import S3Store

LISTED_STATUSES = ("complete", "partial", "failed")
SUITE_COLUMN_SINCE = (1, 3)  # results schema that has the `suite` column
STATUS_COLOURS = {"complete": "#1a7f37", "partial": "#9a6700", "failed": "#cf222e"}


class ReportNotFound(ServingEvalError, LookupError):
    """No published run at that place, or the run has no report."""


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    logical_date: str
    status: str
    published_at: str
    suite: str | None  # the manifest's provenance `config.suite`, else the results' `suite` column
    regressions: int | None  # regressions.json `regressions`; None when the run has no regression record
    report_path: str | None  # "runs/dt=.../run=.../report.html" under the store's prefix, when published


def _schema(manifest: dict) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(manifest.get("schema_version", "0")).split("."))
    except ValueError:
        return (0,)


def stored_run_suite(store: S3Store, manifest: dict) -> str | None:
    """The evaluation suite of a run: recorded in its provenance, else in its results (schema 1.3 and later)."""
    suite = ((manifest.get("provenance") or {}).get("config") or {}).get("suite")
    if suite:
        return str(suite)
    names = {o["name"] for o in manifest.get("objects", [])}
    if _schema(manifest) < SUITE_COLUMN_SINCE or "results.parquet" not in names:
        return None
    import pandas as pd

    frame = pd.read_parquet(io.BytesIO(store.get(f"{manifest['prefix']}/results.parquet")))
    values = sorted({str(v) for v in frame.get("suite", pd.Series(dtype=object)).dropna() if str(v)})
    return ", ".join(values) or None


def run_regressions(store: S3Store, manifest: dict) -> int | None:
    keys = {o["name"]: o["key"] for o in manifest.get("objects", [])}
    if "regressions.json" not in keys:
        return None
    count = store.get_json(keys["regressions.json"]).get("regressions")
    return int(count) if count is not None else None


def summarize(store: S3Store, manifest: dict) -> RunSummary:
    names = {o["name"] for o in manifest.get("objects", [])}
    relative = manifest["prefix"].removeprefix(f"{store.key()}/")
    return RunSummary(
        run_id=manifest["run_id"], logical_date=manifest["logical_date"], status=manifest["status"],
        published_at=manifest.get("published_at", ""), suite=stored_run_suite(store, manifest),
        regressions=run_regressions(store, manifest),
        report_path=f"{relative}/report.html" if "report.html" in names else None)


def list_runs(store: S3Store) -> list[RunSummary]:
    """Every published run (complete, partial or failed), newest logical date first."""
    return [summarize(store, m) for m in reversed(list_manifests(store, statuses=LISTED_STATUSES))]


def latest_records(store: S3Store, manifests: list[dict] | None = None) -> list[dict]:
    """The record over the nights (record.json) of the newest run of each suite that has one, suites by name."""
    if manifests is None:
        manifests = list_manifests(store, statuses=LISTED_STATUSES)
    found: dict[str, dict] = {}
    for manifest in reversed(manifests):
        names = {o["name"]: o["key"] for o in manifest.get("objects", [])}
        suite = str(((manifest.get("provenance") or {}).get("config") or {}).get("suite") or "")
        if "record.json" in names and suite not in found:
            found[suite] = {**store.get_json(names["record.json"]), "run_id": manifest["run_id"]}
    return [found[s] for s in sorted(found)]


def read_report(store: S3Store, dt: str, run: str) -> bytes:
    """The `report.html` of the run published under `runs/<dt>/<run>/` (`run=<id>`, or the old `run_id=<id>`: the
    same run in the other layout when it is not there), found through its manifest."""
    folder = parse_folder(f"{dt}/{run}")
    if folder is None or folder.name() != f"{dt}/{run}":
        raise ReportNotFound(f"runs/{dt}/{run}: not a run folder (expected dt=YYYY-MM-DD/run=<id>, or "
                             f"dt=YYYY-MM-DD/{OLD_RUN_KEY}=<id> of runs published before schema 1.4)")
    for name in (folder.name(RUN_KEY), folder.name(OLD_RUN_KEY)):  # a run in both layouts: the new folder's
        prefix = store.key(RUNS, name)
        if store.exists(f"{prefix}/manifest.json"):
            break
    else:
        prefix = store.key(RUNS, folder.name())
        raise ReportNotFound(f"no published run at s3://{store.bucket}/{prefix} (no manifest.json)")
    manifest = store.get_json(f"{prefix}/manifest.json")
    keys = {o["name"]: o["key"] for o in manifest.get("objects", [])}
    if "report.html" not in keys:
        raise ReportNotFound(f"run {manifest['run_id']} at s3://{store.bucket}/{prefix} has no report.html")
    return store.get(keys["report.html"])


def render_run_list(runs: list[RunSummary], where: str, records: list[dict] = ()) -> str:
    """The runs page: one row per run with its status, suite and regression count, linking its report, then each
    suite's stacks' record over the nights (`records`, from `latest_records`).
    Links are relative to the page (`runs/dt=.../report.html`), so the page works under any mount point."""
    listed = [{"run_id": run.run_id, "report_path": run.report_path, "status": run.status,
               "logical_date": run.logical_date[:16].replace("T", " "), "suite": run.suite or DASH,
               "colour": STATUS_COLOURS.get(run.status, "#1f2328"),
               "regressions": DASH if run.regressions is None else run.regressions,
               "published_at": run.published_at[:19].replace("T", " ")} for run in runs]
    return str(render("runs.html", runs=listed, where=where, style=stylesheet("runs.css"),
                      records=[record_section(r) for r in records]))
