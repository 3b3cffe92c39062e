"""Publishing a run folder to the store: objects first, `manifest.json` last, then `latest.json`.

A retry of the same run id rewrites the same keys and removes objects an earlier attempt left that the new
manifest does not list. `latest.json` only moves forward: a backfill never replaces a newer run.
"""

from __future__ import annotations

import json
import mimetypes
from datetime import UTC, datetime

from tasks.core.names import safe_component
from tasks.core.results import SCHEMA_VERSION
from tasks.store.s3 import S3Store

RUN_STATUSES = ("complete", "partial", "failed")
PUBLISHED_RUNS_ASSET = "serving_eval_published_runs"  # the Airflow Asset whose events carry each run's location
MANIFEST = "manifest.json"
LATEST = "latest.json"


def run_prefix(store: S3Store, logical_date: str, run_id: str) -> str:
    return store.key("runs", f"dt={logical_date[:10]}", f"run_id={safe_run_id(run_id)}")


def safe_run_id(run_id: str) -> str:
    """The run id as a folder name and key part (see `tasks.core.names.safe_component`)."""
    return safe_component(run_id)


def publish_run(store: S3Store, *, run_id: str, logical_date: str, files: dict[str, bytes], status: str,
                provenance: dict) -> dict:
    """Upload `files` (name -> bytes) under the run's prefix and return the manifest written."""
    if status not in RUN_STATUSES:
        raise ValueError(f"status={status!r}: must be one of {list(RUN_STATUSES)}")
    prefix = run_prefix(store, logical_date, run_id)
    objects = []
    for name, data in sorted(files.items()):
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        sha256 = store.put_bytes(f"{prefix}/{name}", data, content_type)
        objects.append({"key": f"{prefix}/{name}", "name": name, "size_bytes": len(data), "sha256": sha256})
    manifest = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "logical_date": logical_date, "status": status,
        "published_at": datetime.now(UTC).isoformat(), "prefix": prefix, "objects": objects,
        "provenance": provenance,
    }
    listed = {o["key"] for o in objects} | {f"{prefix}/{MANIFEST}"}
    stale = [k for k in store.list_keys(prefix + "/") if k not in listed]
    store.delete(stale)  # left by an earlier attempt of this run id
    store.put_bytes(f"{prefix}/{MANIFEST}", json.dumps(manifest, indent=2, sort_keys=True).encode(), "application/json")
    _advance_latest(store, manifest)
    return manifest


def _advance_latest(store: S3Store, manifest: dict) -> None:
    key = store.key(LATEST)
    pointer = {"run_id": manifest["run_id"], "logical_date": manifest["logical_date"], "status": manifest["status"],
               "manifest": f"{manifest['prefix']}/{MANIFEST}", "schema_version": SCHEMA_VERSION}
    if store.exists(key):
        current = store.get_json(key)
        if (current.get("logical_date", ""), current.get("run_id", "")) > (pointer["logical_date"], pointer["run_id"]):
            return  # a backfill of an older date never replaces a newer latest
    store.put_bytes(key, json.dumps(pointer, indent=2).encode(), "application/json")
