"""Publishing a run folder to the store: objects first, `manifest.json` last, then `latest.json`.

A retry of the same run id rewrites the same keys and removes objects an earlier attempt left that the new
manifest does not list. `latest.json` only moves forward: a backfill never replaces a newer run.
"""

from __future__ import annotations

import json
import mimetypes
from datetime import UTC, datetime

from tasks.core.results import SCHEMA_VERSION
from tasks.store.layout import run_prefix
from tasks.store.s3 import S3Store

RUN_STATUSES = ("complete", "partial", "failed")
PUBLISHED_RUNS_ASSET = "serving_eval_published_runs"  # the Airflow Asset whose events carry each run's location
MANIFEST = "manifest.json"
LATEST = "latest.json"


def publish_run(store: S3Store, *, run_id: str, logical_date: str, files: dict[str, bytes], status: str,
                provenance: dict) -> dict:
    """Upload `files` (name -> bytes) under the run's folder (`runs/dt=<date>/run=<safe id>/`, tasks/store/layout.py)
    and return the manifest written."""
    if status not in RUN_STATUSES:
        raise ValueError(f"status={status!r}: must be one of {list(RUN_STATUSES)}")
    prefix = run_prefix(store, logical_date, run_id)
    objects = []
    for name, data in sorted(files.items()):
        sha256 = store.put_bytes(f"{prefix}/{name}", data, content_type(name))
        objects.append({"key": f"{prefix}/{name}", "name": name, "size_bytes": len(data), "sha256": sha256})
    manifest = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "logical_date": logical_date, "status": status,
        "published_at": datetime.now(UTC).isoformat(), "prefix": prefix, "objects": objects,
        "provenance": provenance,
    }
    listed = {o["key"] for o in objects} | {f"{prefix}/{MANIFEST}"}
    stale = [k for k in store.list_keys(prefix + "/") if k not in listed]
    store.delete(stale)  # left by an earlier attempt of this run id
    write_manifest(store, manifest)
    _advance_latest(store, manifest)
    return manifest


def write_manifest(store: S3Store, manifest: dict) -> None:
    """`manifest.json` into the manifest's folder: what makes the run visible to readers, so it is written last."""
    body = json.dumps(manifest, indent=2, sort_keys=True).encode()
    store.put_bytes(f"{manifest['prefix']}/{MANIFEST}", body, "application/json")


def content_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _advance_latest(store: S3Store, manifest: dict) -> None:
    key = store.key(LATEST)
    pointer = {"run_id": manifest["run_id"], "logical_date": manifest["logical_date"], "status": manifest["status"],
               "manifest": f"{manifest['prefix']}/{MANIFEST}", "schema_version": SCHEMA_VERSION}
    if store.exists(key):
        current = store.get_json(key)
        if (current.get("logical_date", ""), current.get("run_id", "")) > (pointer["logical_date"], pointer["run_id"]):
            return  # a backfill of an older date never replaces a newer latest
    store.put_bytes(key, json.dumps(pointer, indent=2).encode(), "application/json")
