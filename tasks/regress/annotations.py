"""Annotations in the store: runs (or some of their cells) excluded from regression baselines, or a regressed night
accepted as the new level, each with a reason.

One small JSON object per annotation, so two people annotating at the same time never overwrite each other:

    <prefix>/annotations/exclusions/run_id=<run id>/<exclusion id>.json
    <prefix>/annotations/acceptances/run_id=<run id>/<acceptance id>.json
    {"schema_version": "1", "id": ..., "run_id": ..., "cells": null | [cell ids], "reason": ...,
     "created_at": ..., "created_by": ...}

`cells: null` excludes the whole run. Cell ids are the plan's (`tasks.plan.cells.cell_id`, e.g.
`mlp.onnx.custom.process.cpu.b1.concurrency4`). The run stays published and readable: only the regression
check leaves it out of baselines. Set from the command line:

    python -m tasks.cli exclude RUN_ID [--cell CELL_ID ...] --reason TEXT [--conf '{"s3_bucket": ...}']
    python -m tasks.cli exclusions [--conf ...]          # list them
    python -m tasks.cli include EXCLUSION_ID [--conf ...]  # remove one

An acceptance has the same fields: a night judged a regression for its cells (or all of them) becomes their reference
after all (`tasks.regress.references`), so the regression stops being reported as open
(`tasks.report.findings`), the slower level accepted as the stack's from then on:

    python -m tasks.cli accept RUN_ID [--cell CELL_ID ...] --reason TEXT
    python -m tasks.cli acceptances
"""

from __future__ import annotations

import getpass
import hashlib
import json
from datetime import UTC, datetime

from tasks.core.errors import ConfigError
from tasks.plan.cells import cell_id
from tasks.store.history import list_manifests, read_results
from tasks.store.layout import safe_run_id
from tasks.store.publish import RUN_STATUSES
from tasks.store.s3 import S3Store

ANNOTATIONS_SCHEMA_VERSION = "1"
EXCLUSIONS_PREFIX = "annotations/exclusions"
ACCEPTANCES_PREFIX = "annotations/acceptances"
MAX_REASON_CHARS = 2000


def exclusion_key(store: S3Store, run_id: str, exclusion_id: str, prefix: str = EXCLUSIONS_PREFIX) -> str:
    return store.key(prefix, f"run_id={safe_run_id(run_id)}", f"{exclusion_id}.json")


def list_exclusions(store: S3Store, prefix: str = EXCLUSIONS_PREFIX) -> list[dict]:
    """Every exclusion (with `prefix=ACCEPTANCES_PREFIX`: every acceptance) in the store, oldest first."""
    found = [store.get_json(k) for k in store.list_keys(store.key(prefix) + "/") if k.endswith(".json")]
    return sorted(found, key=lambda e: (e.get("created_at", ""), e.get("id", "")))


def list_acceptances(store: S3Store) -> list[dict]:
    """Every acceptance in the store, oldest first."""
    return list_exclusions(store, ACCEPTANCES_PREFIX)


def add_acceptance(store: S3Store, run_id: str, cells: list[str] | None, reason: str,
                   created_by: str | None = None) -> dict:
    """Accept a published night's level for its cells (or some of them): a night judged a regression there becomes
    their reference; return the acceptance written (the same checks and fields as an exclusion's)."""
    return add_exclusion(store, run_id, cells, reason, created_by, prefix=ACCEPTANCES_PREFIX)


def add_exclusion(store: S3Store, run_id: str, cells: list[str] | None, reason: str,
                  created_by: str | None = None, prefix: str = EXCLUSIONS_PREFIX) -> dict:
    """Exclude a published run (or some of its cells) from baselines (with `prefix=ACCEPTANCES_PREFIX`: accept
    it); return the annotation written.

    The run must be published in this store and every cell must be one of its cells."""
    reason = (reason or "").strip()
    if not reason:
        what = "accepted" if prefix == ACCEPTANCES_PREFIX else "excluded"
        raise ConfigError("--reason", reason, f"must say why the run is {what} (it is shown next to the baseline)")
    if len(reason) > MAX_REASON_CHARS:
        raise ConfigError("--reason", reason[:40] + "...", f"must be at most {MAX_REASON_CHARS} characters")
    manifests = [m for m in list_manifests(store, RUN_STATUSES) if m["run_id"] == run_id]
    if not manifests:
        raise ConfigError("run", run_id, f"must be the run id of a run published in {store.describe()}")
    if cells:
        frame = read_results(store, manifests[-1])
        known = sorted({cell_id(row) for row in frame.astype(object).to_dict("records")})
        for cell in cells:
            if cell not in known:
                raise ConfigError("--cell", cell, f"must be a cell of run {run_id}: one of {known}")
    cells = sorted(set(cells)) if cells else None
    digest = hashlib.sha256(json.dumps([run_id, cells, reason]).encode()).hexdigest()[:12]
    exclusion = {"schema_version": ANNOTATIONS_SCHEMA_VERSION, "id": digest, "run_id": run_id, "cells": cells,
                 "reason": reason, "created_at": datetime.now(UTC).isoformat(),
                 "created_by": created_by or _user()}
    store.put_bytes(exclusion_key(store, run_id, digest, prefix), json.dumps(exclusion, indent=2).encode(),
                    "application/json")
    return exclusion


def remove_exclusion(store: S3Store, exclusion_id: str) -> dict:
    """Remove the exclusion with this id; return it."""
    for exclusion in list_exclusions(store):
        if exclusion.get("id") == exclusion_id:
            store.delete([exclusion_key(store, exclusion["run_id"], exclusion_id)])
            return exclusion
    raise ConfigError("exclusion", exclusion_id, f"must be the id of an exclusion in {store.describe()}")


def is_excluded(row: dict, exclusions: list[dict]) -> dict | None:
    """The exclusion that covers this row (its run, or its run and cell), or None."""
    for exclusion in exclusions:
        if exclusion["run_id"] != row.get("run_id"):
            continue
        if exclusion["cells"] is None or cell_id(row) in exclusion["cells"]:
            return exclusion
    return None


def apply_exclusions(rows: list[dict], exclusions: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the rows no exclusion covers, the exclusions that removed at least one row)."""
    kept, used = [], {}
    for row in rows:
        exclusion = is_excluded(row, exclusions)
        if exclusion is None:
            kept.append(row)
        else:
            used[exclusion["id"]] = exclusion
    return kept, list(used.values())


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in a container: say so
        return "unknown"
