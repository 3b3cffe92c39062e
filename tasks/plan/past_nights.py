"""The suite's last nights on this host, as the plan step reads them to size tonight: each night's plan, rows, session
timelines, conversions and budget record, newest first.

    nights = past_nights(store, suite="nightly", host=collect_host_metadata(), before=logical_date)
    nights[0].rows, nights[0].timelines, nights[0].night      # last night

Only nights of the same suite on the same host fingerprint (CPU model and count, GPU) count: another machine's
timings say nothing of this one's. Any status counts (a partial night measured what it measured); a night published
before plan.json is left out. At most MAX_NIGHTS are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tasks.core.metadata import host_fingerprint
from tasks.core.results import frame_records
from tasks.store.history import list_manifests, read_results
from tasks.store.publish import RUN_STATUSES
from tasks.store.s3 import S3Store

MAX_NIGHTS = 30  # a coverage of K nights needs K of them; 30 covers a month of nightly runs


@dataclass(frozen=True)
class PastNight:
    """One published night: its identity, its plan.json (config, sessions, night record), rows, timelines and
    conversions (logs/sessions.json, logs/conversions.json)."""

    run_id: str
    logical_date: str
    status: str
    plan: dict
    rows: list[dict]
    timelines: list[dict] = field(default_factory=list)
    conversions: list[dict] = field(default_factory=list)
    night: dict = field(default_factory=dict)  # night.json: the budget's stages planned and actual, what was deferred
    records: list[dict] = field(default_factory=list)  # regressions.json's records

    @property
    def deferred_ids(self) -> set[str]:
        """The cells this night deferred (planned, or cut by the night's clock)."""
        return {d["cell_id"] for d in self.night.get("deferred") or [] if d.get("cell_id")}


def past_nights(store: S3Store, suite: str | None, host: dict, before: str | None = None,
                limit: int = MAX_NIGHTS) -> list[PastNight]:
    """The newest `limit` nights of `suite` on `host`'s fingerprint strictly before `before`, newest first."""
    fingerprint = host_fingerprint(host)
    found: list[PastNight] = []
    for manifest in reversed(list_manifests(store, statuses=RUN_STATUSES, before=before)):
        if len(found) >= limit:
            break
        provenance = manifest.get("provenance") or {}
        names = {o["name"]: o["key"] for o in manifest.get("objects", [])}
        if "plan.json" not in names or (provenance.get("config") or {}).get("suite") != suite:
            continue
        if host_fingerprint(provenance.get("host") or {}) != fingerprint:
            continue
        found.append(PastNight(manifest["run_id"], manifest["logical_date"], manifest.get("status", ""),
                               _object(store, names, "plan.json", {}), frame_records(read_results(store, manifest)),
                               _object(store, names, "logs/sessions.json", []),
                               _object(store, names, "logs/conversions.json", []),
                               published_night(_object(store, names, "night.json", {}),
                                               manifest.get("published_at")),
                               _object(store, names, "regressions.json", {}).get("records") or []))
    return found


def published_night(night: dict, published_at: str | None) -> dict:
    """night.json with publishing's actual seconds and the night's elapsed seconds taken to the manifest's
    `published_at`: night.json itself is written before the uploads and the manifest, so its own figures stop short
    of them."""
    begin, started = night.get("publish_begin_s"), night.get("started_at_s")
    if not night or not published_at or begin is None:
        return night
    end = datetime.fromisoformat(published_at).timestamp()
    stages = dict(night.get("stages") or {})
    if "publish" in stages:
        stages["publish"] = {**stages["publish"], "actual_s": round(end - float(begin), 1)}
    elapsed = night.get("elapsed_s") if started is None else round(end - float(started), 1)
    return {**night, "stages": stages, "elapsed_s": elapsed}


def _object(store: S3Store, names: dict[str, str], name: str, default):
    return store.get_json(names[name]) if name in names else default
