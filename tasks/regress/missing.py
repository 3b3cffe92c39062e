"""Missing cells: a planned cell's outcome on a night, and the cells that were `ok` on the previous night of the suite
and are gone tonight (docs/notifications.md#missing-cells).

    outcomes = cell_outcomes(plan.sessions, rows)        # planned cell id -> Outcome (ok, failed, contended, skipped)
    records = missing_records(tonight, previous_night)   # `missing` records of regressions.json

A cell is `missing` tonight when it was `ok` on the previous night of the same suite on this host (or already missing
then) and tonight it is not in the plan, or is planned skipped for a reason that is not the host's (its stack no longer
speaks the wire). A skip the host causes (no GPU, no Docker, an image no registry serves) is the host's, and an
overload burst skipped by design (off the stack's fastest wire, no capacity measured) is neither: no record. A cell gone
because the suite or the Params that make the plan changed is `removed` (reported once: the next night has nothing to
compare it with); a `missing` cell stays missing, night after night, with the night it went missing, until it comes
back. A cell the night's budget deferred (tasks/plan/night.py) is not missing: a later night measures it. Past its
coverage K it is a finding like a missing cell: an `overdue` record, every night until it is measured again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.core.metadata import host_fingerprint
from tasks.core.results import OVERLOAD_MODE, frame_records
from tasks.plan.cells import Session, rows_of
from tasks.store.history import read_results
from tasks.store.s3 import S3Store

MISSING_KIND = "missing"
MISSING, REMOVED, OVERDUE = "missing", "removed", "overdue"
DEFERRED = "deferred"  # a planned cell the night's budget left for a later night
HOST_SKIP, UNSPOKEN, BY_DESIGN = "host", "unspoken", "by_design"  # why a planned cell was skipped
# The Params that decide which cells a night plans: another value is a change of plan made on purpose.
PLAN_FIELDS = ("suite", "models", "formats", "servers", "launcher", "device", "batch_sizes", "mode", "concurrencies",
               "rates", "concurrency_sweep", "rate_search", "protocols", "overload", "control_cell", "tune", "hosts")


@dataclass(frozen=True)
class Outcome:
    """What became of one planned cell on a night: `ok`, `failed`, `contended`, `skipped` (with whose reason)."""

    cell_id: str
    model: str
    format: str
    server: str
    status: str
    reason: str | None = None
    skip: str | None = None  # a skipped cell: HOST_SKIP, UNSPOKEN or BY_DESIGN
    overdue: bool = False  # a deferred cell past its coverage K
    last_ok: tuple[str | None, str | None] = (None, None)  # a deferred cell's last measured night (run id, date)

    @property
    def stack(self) -> str:
        return f"{self.server}/{self.format}"


@dataclass(frozen=True)
class Night:
    """One night as the missing-cell check compares it: its plan's outcomes, the Params that made the plan, and its
    own `missing` records (cell id -> record)."""

    run_id: str
    logical_date: str
    config: dict
    outcomes: dict[str, Outcome]
    missing: dict[str, dict] = field(default_factory=dict)


def _skip_kind(cell, rows: list[dict]) -> str:
    if cell.skip:
        return UNSPOKEN  # planned skipped: the stack lacks the wire, whatever the host
    if cell.mode == OVERLOAD_MODE or any(r.get("mode") == OVERLOAD_MODE for r in rows):
        return BY_DESIGN
    return HOST_SKIP  # the converter or the server cannot run on this host or launcher


def cell_outcome(cell, rows: list[dict]) -> Outcome:
    """A planned cell's outcome from its rows (a sweep's probes beyond the server's capacity are its answer)."""
    mine = rows_of(cell, rows)
    base = {"cell_id": cell.cell_id, "model": cell.model, "format": cell.format, "server": cell.server}
    failed = [r for r in mine if r.get("status") == "failed" and not r.get("beyond_capacity")]
    for status, found in (("failed", failed), ("contended", [r for r in mine if r.get("status") == "contended"])):
        if found:
            return Outcome(**base, status=status, reason=str(found[0].get("reason") or ""))
    if any(r.get("status") == "ok" for r in mine):
        return Outcome(**base, status="ok")
    if not mine:
        return Outcome(**base, status="failed", reason="no row: the cell was planned and never measured")
    if all(r.get("status") == "skipped" for r in mine):
        return Outcome(**base, status="skipped", reason=str(mine[0].get("reason") or ""), skip=_skip_kind(cell, mine))
    return Outcome(**base, status="failed", reason=str(mine[0].get("reason") or "only probes beyond capacity"))


def cell_outcomes(sessions: list, rows: list[dict], deferred: list[dict] = ()) -> dict[str, Outcome]:
    """Planned cell id -> its outcome, for sessions as planned (Session objects or plan.json's dicts); the cells of
    `deferred` (plan.json's `night.deferred`: left by the night's budget for a later night) are `deferred`."""
    later = {d["cell_id"]: d for d in deferred if d.get("cell_id")}
    found = {}
    for session in sessions:
        planned = session if isinstance(session, Session) else Session.from_dict(session)
        for cell in planned.cells:
            if cell.cell_id not in later:
                found[cell.cell_id] = cell_outcome(cell, rows)
    for cid, item in later.items():
        found[cid] = Outcome(cid, item.get("model"), item.get("format"), item.get("server"), DEFERRED,
                             str(item.get("reason") or ""), overdue=bool(item.get("overdue")),
                             last_ok=(item.get("last_run_id"), item.get("last_logical_date")))
    return found


def plan_changes(before: dict, now: dict) -> list[str]:
    """The Params that make the plan and differ between two nights' configurations."""
    return [name for name in PLAN_FIELDS if before.get(name) != now.get(name)]


def _record(outcome: Outcome, verdict: str, reason: str, since: str, last_ok: tuple[str, str]) -> dict:
    return {"kind": MISSING_KIND, "metric": "cell", "verdict": verdict, "cell_id": outcome.cell_id,
            "model": outcome.model, "format": outcome.format, "server": outcome.server, "since": since,
            "reference_run_id": last_ok[0], "reference_logical_date": last_ok[1], "reason": reason}


def missing_records(tonight: Night, previous: Night | None) -> list[dict]:
    """Tonight's `missing` records against the previous night of the suite on this host (None: its first night)."""
    if previous is None:
        return []
    candidates = {cid: (o, previous.run_id, previous.logical_date, None) for cid, o in previous.outcomes.items()
                  if o.status == "ok"}
    for cid, record in previous.missing.items():
        if record.get("verdict") == MISSING and cid not in candidates:
            outcome = Outcome(cid, record.get("model"), record.get("format"), record.get("server"), MISSING)
            candidates[cid] = (outcome, record.get("reference_run_id"), record.get("reference_logical_date"),
                               record.get("since"))
    changed = plan_changes(previous.config, tonight.config)
    records = []
    for cid, now in sorted(tonight.outcomes.items()):
        if now.status == DEFERRED and now.overdue:  # deferred past its coverage K: a finding like a missing cell
            earlier = previous.missing.get(cid) or {}
            since = earlier.get("since") if earlier.get("verdict") == OVERDUE else tonight.logical_date
            reason = f"deferred past its coverage K by the night's budget: {now.reason}"
            records.append(_record(now, OVERDUE, reason, since, now.last_ok))
    for cid, (before, ok_run, ok_date, since) in sorted(candidates.items()):
        now = tonight.outcomes.get(cid)
        if now is not None and now.status == DEFERRED:
            continue  # measured on a later night (past K: its overdue record above)
        if now is not None and (now.status != "skipped" or now.skip != UNSPOKEN):
            continue  # measured (its own finding when not ok), or skipped for the host's reason or by design
        since = since or tonight.logical_date
        if now is not None:
            reason = f"skipped tonight, not for the host's reason: {now.reason}"
            records.append(_record(before, MISSING, reason, since, (ok_run, ok_date)))
        elif changed:
            reason = f"removed from the plan: {', '.join(changed)} changed since {previous.run_id}"
            records.append(_record(before, REMOVED, reason, tonight.logical_date, (ok_run, ok_date)))
        else:
            reason = (f"not in tonight's plan, though the suite and the Params that make the plan are as on "
                      f"{previous.run_id}: the plan no longer makes this cell (a stack's wires or formats, or the "
                      "model catalogue, changed)")
            records.append(_record(before, MISSING, reason, since, (ok_run, ok_date)))
    return records


def night_of(manifest: dict, plan: dict, rows: list[dict], records: list[dict]) -> Night:
    """A published night: its manifest's identity, its plan.json and rows, its regressions.json records."""
    return Night(manifest["run_id"], manifest["logical_date"], plan.get("config") or {},
                 cell_outcomes(plan.get("sessions") or [], rows, (plan.get("night") or {}).get("deferred") or []),
                 {r["cell_id"]: r for r in records if r.get("kind") == MISSING_KIND and r.get("cell_id")})


def previous_night(store: S3Store, manifests: list[dict], suite: str | None, host: dict) -> Night | None:
    """The newest of `manifests` (oldest first) of the same suite on the same host fingerprint, as a Night (None:
    none, or it was published before plan.json was)."""
    fingerprint = host_fingerprint(host)
    for manifest in reversed(manifests):
        provenance = manifest.get("provenance") or {}
        if (provenance.get("config") or {}).get("suite") != suite:
            continue
        if host_fingerprint(provenance.get("host") or {}) != fingerprint:
            continue
        names = {o["name"]: o["key"] for o in manifest.get("objects", [])}
        if "plan.json" not in names:
            return None
        records = store.get_json(names["regressions.json"]).get("records", []) if "regressions.json" in names else []
        return night_of(manifest, store.get_json(names["plan.json"]), frame_records(read_results(store, manifest)),
                        records)
    return None
