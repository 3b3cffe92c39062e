"""Each stack's record over the nights (`record.json`, docs/results.md#recordjson): per model and stack (server/format),
the share of its planned cells that were `ok` over the last nights of the suite on this host, tonight included.

    record = build_record(store, tonight, nights=14)    # at publish time, from the store's history and tonight
    section = record_section(record)                    # the report's section (None: a run without record.json)

A cell counts once a night: `ok`, `failed` (a fault: a sweep's probes beyond capacity are its answer) or `missing`
(ok before, gone tonight: tasks/regress/missing.py; or deferred by the night's budget past its coverage K, `overdue`)
count in the share; `contended` cells (the host's fault) are shown apart and do not count; skipped cells do not count
(the host cannot run them, or they are skipped by design), nor do cells the night's budget deferred within their K.
`coverage` lists every cell of tonight's plan with the night its figure is from (tasks/plan/night.py).
Every failure keeps its night and reason, one click away in the report (a `<details>`, no script). A night that never
published is not in it (the watchdog reports those: docs/notifications.md#missing-nights).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from markupsafe import Markup

from tasks.core.metadata import host_fingerprint
from tasks.core.results import frame_records
from tasks.regress.missing import DEFERRED, MISSING, MISSING_KIND, OVERDUE, cell_outcomes
from tasks.report.formatting import REASON_CHARS
from tasks.report.templating import render
from tasks.store.history import list_manifests, read_results
from tasks.store.publish import RUN_STATUSES
from tasks.store.s3 import S3Store

RECORD_SCHEMA_VERSION = "1.0"
COUNTED = ("ok", "failed", "missing")  # the share's cells; contended ones are shown apart


@dataclass(frozen=True)
class RecordNight:
    """One night of the record: identity, its plan's sessions, its rows, its regressions.json records."""

    run_id: str
    logical_date: str
    status: str
    sessions: list
    rows: list[dict]
    records: list[dict]
    night: dict = field(default_factory=dict)  # night.json: the cells its budget deferred (none without a budget)


def _tally(stacks: dict, night: RecordNight) -> None:
    def entry(model: str, server: str, fmt: str) -> dict:
        return stacks.setdefault((model, server, fmt), {
            "model": model, "stack": f"{server}/{fmt}", "ok": 0, "failed": 0, "missing": 0, "contended": 0,
            "skipped": 0, "deferred": 0, "failures": [], "contended_cells": []})

    when = {"run_id": night.run_id, "logical_date": night.logical_date}
    for outcome in cell_outcomes(night.sessions, night.rows, night.night.get("deferred") or []).values():
        mine = entry(outcome.model, outcome.server, outcome.format)
        if outcome.status == DEFERRED:  # within its K not counted; past it, the overdue record counts it
            mine["deferred"] += 1
            continue
        status = outcome.status if outcome.status in ("ok", "failed", "contended") else "skipped"
        mine[status] += 1
        if status in ("failed", "contended"):
            listed = mine["failures"] if status == "failed" else mine["contended_cells"]
            listed.append({**when, "cell_id": outcome.cell_id, "status": status,
                           "reason": (outcome.reason or "")[:REASON_CHARS]})
    for record in night.records:
        if record.get("kind") == MISSING_KIND and record.get("verdict") in (MISSING, OVERDUE):
            mine = entry(record["model"], record["server"], record["format"])
            mine["missing"] += 1
            mine["failures"].append({**when, "cell_id": record["cell_id"], "status": record["verdict"],
                                     "reason": str(record.get("reason") or "")[:REASON_CHARS]})


def stack_record(nights: list[RecordNight]) -> dict:
    """The record over `nights` (oldest first): per model and stack, its counts, share ok and failures."""
    stacks: dict = {}
    for night in nights:
        _tally(stacks, night)
    listed = []
    for key in sorted(stacks):
        entry = stacks[key]
        counted = sum(entry[k] for k in COUNTED)
        entry["counted"] = counted
        entry["ok_pct"] = round(100.0 * entry["ok"] / counted, 1) if counted else None
        entry["failures"].sort(key=lambda f: (f["logical_date"], f["cell_id"]), reverse=True)
        entry["contended_cells"].sort(key=lambda f: (f["logical_date"], f["cell_id"]), reverse=True)
        listed.append(entry)
    return {"schema_version": RECORD_SCHEMA_VERSION,
            "nights": [{"run_id": n.run_id, "logical_date": n.logical_date, "status": n.status} for n in nights],
            "stacks": listed}


def earlier_nights(store: S3Store, tonight: RecordNight, suite: str | None, host: dict, nights: int
                   ) -> list[RecordNight]:
    """The newest `nights` - 1 published runs before tonight of the same suite on the same host fingerprint, oldest
    first (any status: a night that measured nothing is a night of failures; one without plan.json is left out)."""
    fingerprint = host_fingerprint(host)
    found: list[RecordNight] = []
    for manifest in reversed(list_manifests(store, statuses=RUN_STATUSES, before=tonight.logical_date)):
        if len(found) >= nights - 1:
            break
        provenance = manifest.get("provenance") or {}
        names = {o["name"]: o["key"] for o in manifest.get("objects", [])}
        if manifest["run_id"] == tonight.run_id or "plan.json" not in names:
            continue
        if (provenance.get("config") or {}).get("suite") != suite or \
                host_fingerprint(provenance.get("host") or {}) != fingerprint:
            continue
        records = store.get_json(names["regressions.json"]).get("records", []) if "regressions.json" in names else []
        plan = store.get_json(names["plan.json"])
        found.insert(0, RecordNight(manifest["run_id"], manifest["logical_date"], manifest["status"],
                                    plan.get("sessions") or [], frame_records(read_results(store, manifest)), records,
                                    plan.get("night") or {}))
    return found


def build_record(store: S3Store, tonight: RecordNight, suite: str | None, host: dict, nights: int) -> dict:
    """record.json of tonight's run: the last `nights` nights of its suite on its host, tonight included."""
    record = stack_record([*earlier_nights(store, tonight, suite, host, nights), tonight])
    return {**record, "suite": suite, "nights_asked": nights, "coverage": cell_coverage(tonight)}


def cell_coverage(tonight: RecordNight) -> list[dict]:
    """Every cell of tonight's plan with the night its figure is from: tonight, or the night a deferred cell was last
    measured (`nights_ago`; None: never), and whether it is past its coverage K."""
    later = {d["cell_id"]: d for d in tonight.night.get("deferred") or []}
    out = []
    for cid, outcome in sorted(cell_outcomes(tonight.sessions, tonight.rows, list(later.values())).items()):
        item = later.get(cid)
        if item is None:
            out.append({"cell_id": cid, "stack": outcome.stack, "model": outcome.model, "status": outcome.status,
                        "measured_run_id": tonight.run_id, "measured_logical_date": tonight.logical_date,
                        "nights_ago": 0, "overdue": False})
        else:
            out.append({"cell_id": cid, "stack": outcome.stack, "model": outcome.model, "status": DEFERRED,
                        "measured_run_id": item.get("last_run_id"),
                        "measured_logical_date": item.get("last_logical_date"),
                        "nights_ago": item.get("age") if item.get("last_run_id") else None,
                        "overdue": bool(item.get("overdue"))})
    return out


def _share(entry: dict) -> str:
    if entry["ok_pct"] is None:
        return "–"
    return f"{entry['ok']} of {entry['counted']} ({entry['ok_pct']:g} %)"


def record_rows(record: dict) -> list[dict]:
    """The record's stacks as table rows (the report, the reports page, `tasks.cli runs`)."""
    return [{"model": e["model"], "stack": e["stack"], "share": _share(e), "ok_pct": e["ok_pct"],
             "failed": e["failed"], "missing": e["missing"], "contended": e["contended"], "skipped": e["skipped"],
             "failures": e["failures"], "contended_cells": e["contended_cells"]} for e in record.get("stacks", [])]


def record_section(record: dict | None) -> Markup:
    """The report's section: each stack's record over the nights; empty for a run published without one."""
    if not record:
        return Markup("")
    nights = record.get("nights") or []
    return render("record.html", rows=record_rows(record), nights=len(nights), asked=record.get("nights_asked"),
                  first=str(nights[0]["logical_date"])[:10] if nights else "–",
                  last=str(nights[-1]["logical_date"])[:10] if nights else "–", suite=record.get("suite") or "–")
