"""`trend.json`: what changed since the previous comparable run, and each model's best figures over the last
nights. Computed at publish time from the store's history and published beside the results, so the report
shows only what the run's own folder holds (and rebuilds from it byte for byte).

Comparable runs: earlier published runs (complete or partial) of the same suite on the same host fingerprint
(CPU model, CPU count, GPU; `tasks.core.metadata.host_fingerprint`). The trend covers the last TREND_NIGHTS of them
with tonight. The previous comparable run is the newest of those with the same versions: the same
`pipeline_version` and, for every server both runs ran, the same `server_version`; newer runs skipped because
a version differs are named in `previous_note`. Cells are compared by `tasks.regress.compare.compare_rows`.
"""

from __future__ import annotations

from tasks.core.metadata import host_fingerprint
from tasks.core.metrics import number
from tasks.core.results import frame_records
from tasks.regress.compare import compare_rows
from tasks.report.recommend import ok_rows, stack_of
from tasks.store.history import list_manifests, read_results
from tasks.store.s3 import S3Store

TREND_SCHEMA_VERSION = "1.0"
TREND_NIGHTS = 14  # nights in the trend plot, tonight included


def run_suite(provenance: dict, rows: list[dict]) -> str | None:
    """The suite a run came from: its provenance (or its config's `suite`), else its rows' `suite` column."""
    suite = provenance.get("suite") or (provenance.get("config") or {}).get("suite")
    if not suite:
        suite = next((r.get("suite") for r in rows if r.get("suite")), None)
    return str(suite) if suite else None


def versions_of(provenance: dict, rows: list[dict]) -> dict:
    """The versions that make two runs comparable: the pipeline's, and each server's."""
    servers: dict[str, set[str]] = {}
    for row in rows:
        if row.get("server_version"):
            servers.setdefault(str(row["server"]), set()).add(str(row["server_version"]))
    pipeline = provenance.get("pipeline_version") or next(
        (r.get("pipeline_version") for r in rows if r.get("pipeline_version")), None)
    return {"pipeline_version": pipeline, "servers": {s: ", ".join(sorted(v)) for s, v in sorted(servers.items())}}


def version_differences(old: dict, new: dict) -> list[str]:
    """What differs between two runs' versions (servers only where both ran them); empty when comparable."""
    diffs = []
    if old.get("pipeline_version") != new.get("pipeline_version"):
        diffs.append(f"pipeline {old.get('pipeline_version')} → {new.get('pipeline_version')}")
    for server in sorted(set(old["servers"]) & set(new["servers"])):
        if old["servers"][server] != new["servers"][server]:
            diffs.append(f"{server} {old['servers'][server]} → {new['servers'][server]}")
    return diffs


def differences(provenance_a: dict, rows_a: list[dict], provenance_b: dict, rows_b: list[dict]) -> list[str]:
    """Why two runs are not comparable (suite, host fingerprint, versions); empty when they are."""
    diffs = []
    suite_a, suite_b = run_suite(provenance_a, rows_a), run_suite(provenance_b, rows_b)
    if suite_a != suite_b:
        diffs.append(f"suite {suite_a} → {suite_b}")
    host_a = host_fingerprint(provenance_a.get("host") or (rows_a[0] if rows_a else {}))
    host_b = host_fingerprint(provenance_b.get("host") or (rows_b[0] if rows_b else {}))
    if host_a != host_b:
        diffs.append(f"host {host_a} → {host_b}")
    return diffs + version_differences(versions_of(provenance_a, rows_a), versions_of(provenance_b, rows_b))


def night_summary(rows: list[dict]) -> dict:
    """Per model: the highest throughput of any stack and the lowest p99 of any stack, with which stack."""
    models: dict[str, dict] = {}
    for model in sorted({str(r.get("model")) for r in ok_rows(rows)}):
        ok = [r for r in ok_rows(rows) if str(r.get("model")) == model]
        top = max(ok, key=lambda r: (number(r["throughput_rps"]), stack_of(r)))
        with_p99 = [r for r in ok if number(r.get("latency_ms_p99")) is not None]
        fast = min(with_p99, key=lambda r: (number(r["latency_ms_p99"]), stack_of(r))) if with_p99 else None
        models[model] = {"best_throughput_rps": number(top["throughput_rps"]), "best_throughput_stack": stack_of(top),
                         "best_p99_ms": number(fast["latency_ms_p99"]) if fast else None,
                         "best_p99_stack": stack_of(fast) if fast else None}
    return models


def _night(manifest: dict, rows: list[dict], current: bool = False) -> dict:
    return {"run_id": manifest["run_id"], "logical_date": manifest["logical_date"], "status": manifest.get("status"),
            "git_sha": (manifest.get("provenance") or {}).get("git_sha"), "current": current,
            "models": night_summary(rows)}


def build_trend(store: S3Store, *, run_id: str, logical_date: str, status: str, rows: list[dict],
                provenance: dict, nights: int = TREND_NIGHTS) -> dict:
    """The trend object of tonight's run (`rows`, `provenance` as published) against the store's history."""
    suite = run_suite(provenance, rows)
    fingerprint = host_fingerprint(provenance.get("host") or {})
    versions = versions_of(provenance, rows)
    earlier = [m for m in list_manifests(store)
               if m["run_id"] != run_id and (m["logical_date"], m["run_id"]) < (logical_date, run_id)
               and host_fingerprint((m.get("provenance") or {}).get("host") or {}) == fingerprint]
    history = []  # (manifest, rows), oldest first, same suite and host
    for manifest in reversed(earlier):  # newest first, until enough nights
        if len(history) >= nights - 1:
            break
        declared = run_suite(manifest.get("provenance") or {}, [])
        if declared is not None and declared != suite:
            continue  # another suite, known without reading its results
        past_rows = frame_records(read_results(store, manifest))
        if run_suite(manifest.get("provenance") or {}, past_rows) == suite:
            history.insert(0, (manifest, past_rows))
    previous, skipped = None, []
    for manifest, past_rows in reversed(history):
        diffs = version_differences(versions_of(manifest.get("provenance") or {}, past_rows), versions)
        if not diffs:
            previous = (manifest, past_rows)
            break
        skipped.append(f"{manifest['run_id']} ({'; '.join(diffs)})")
    if previous:
        note = f"newer runs on this host and suite with other versions: {', '.join(skipped)}" if skipped else None
    elif history:
        note = f"no earlier run with the same versions among the last {len(history)}: {', '.join(skipped)}"
    else:
        note = "no earlier published run of this suite on this host"
    current = {"run_id": run_id, "logical_date": logical_date, "status": status, "provenance": provenance}
    return {
        "schema_version": TREND_SCHEMA_VERSION, "run_id": run_id, "logical_date": logical_date,
        "comparable_on": {"suite": suite, "host": fingerprint, "versions": versions},
        "previous": None if previous is None else {
            "run_id": previous[0]["run_id"], "logical_date": previous[0]["logical_date"],
            "status": previous[0].get("status"), "git_sha": (previous[0].get("provenance") or {}).get("git_sha")},
        "previous_note": note,
        "changes": compare_rows(previous[1], rows) if previous else [],
        "nights": [*(_night(m, r) for m, r in history), _night(current, rows, current=True)],
    }
