"""Runs published in the old folder layout moved to the new one, so that readers of the files see one layout.

    runs/dt=<date>/run_id=<safe id>/  (before schema 1.4)  ->  runs/dt=<date>/run=<safe id>/

Hive-partitioned readers cannot read the two side by side (DuckDB: "Hive partition mismatch"), and in the old one
they replace the `run_id` column with the folder's made-safe id (DuckDB) or refuse the files (pyarrow.dataset:
"Unable to merge ... large_string vs string"). Every publish runs `migrate_layout` first, and
`python -m tasks.cli migrate` runs it on demand.

Per run, in an order that is safe to interrupt anywhere and to run again:
1. its objects are copied into the new folder: `results.parquet` rewritten with the contract's Arrow schema (the
   same rows and values, the columns of later schema versions empty), every other object byte for byte, each
   checked against the SHA-256 its manifest lists;
2. the new manifest is written last (keys, sizes and SHA-256 of the copies; `moved` says from where and when);
3. `latest.json` is repointed when it named the old manifest;
4. only then is the old folder deleted, its manifest last.
A run whose new folder already has a manifest (moved before an interruption, or published again by this version)
is not copied again: `latest.json` is repointed and what is left of the old folder is deleted. Readers read a
run found in both layouts from the new folder. An old folder without a manifest (a publish of an older version
still under way, or abandoned) is left alone unless its run is in the new layout.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from tasks.core.results import COLUMNS, SCHEMA_VERSION, to_parquet_bytes
from tasks.store.layout import RUN_KEY, RUNS, Folder, parse_folder
from tasks.store.publish import LATEST, MANIFEST, content_type, write_manifest
from tasks.store.s3 import S3Store

MOVED, CLEANED, LEFT = "moved", "cleaned", "left"


class NotMovable(Exception):
    """A run that stays where it is (readers still read it there); the message says why."""


@dataclass(frozen=True)
class Move:
    """What happened to one old-layout folder: `moved` (copied, then deleted), `cleaned` (its run was in the new
    layout already: the old folder deleted) or `left` (`note` says why)."""

    run_id: str | None
    old_prefix: str
    new_prefix: str
    action: str
    objects: int = 0
    note: str = ""
    dry_run: bool = False

    def describe(self) -> str:
        verb = {MOVED: "move", CLEANED: "delete", LEFT: "leave"}[self.action] if self.dry_run else self.action
        what = f"run {self.run_id}" if self.run_id else "folder"
        text = {MOVED: f"{verb} {what}: {self.old_prefix}/ -> {self.new_prefix}/ ({self.objects} objects)",
                CLEANED: f"{verb} {what}'s old folder {self.old_prefix}/ ({self.objects} objects): it is in "
                         f"{self.new_prefix}/ already",
                LEFT: f"{verb} {what} in {self.old_prefix}/"}[self.action]
        return f"{'would ' if self.dry_run else ''}{text}{f': {self.note}' if self.note else ''}"


def run_folders(store: S3Store) -> dict[Folder, list[str]]:
    """Every run folder under the store's `runs/`, in either layout, with the keys it holds."""
    runs = store.key(RUNS) + "/"
    folders: dict[Folder, list[str]] = {}
    for key in store.list_keys(runs):
        head = "/".join(key.removeprefix(runs).split("/")[:2])
        folder = parse_folder(head)
        if folder is not None and folder.name() == head and key != f"{runs}{head}":
            folders.setdefault(folder, []).append(key)
    return folders


def migrate_layout(store: S3Store, dry_run: bool = False) -> list[Move]:
    """Move every old-layout run of `store` to the new layout (see the module's docstring); with `dry_run`, only
    say what would be done. A run that cannot be moved is `left` with the reason, for the next attempt."""
    folders = run_folders(store)
    moves = []
    for folder, keys in sorted(folders.items(), key=lambda item: item[0].name()):
        if not folder.old_layout:
            continue
        old_prefix, new_prefix = store.key(RUNS, folder.name()), store.key(RUNS, folder.name(RUN_KEY))
        new_keys = folders.get(Folder(folder.dt, RUN_KEY, folder.safe_id), [])
        try:
            if f"{new_prefix}/{MANIFEST}" in new_keys:
                moves.append(_clean(store, old_prefix, new_prefix, keys, dry_run))
            elif f"{old_prefix}/{MANIFEST}" in keys:
                moves.append(_move(store, old_prefix, new_prefix, dry_run))
            else:
                moves.append(Move(None, old_prefix, new_prefix, LEFT, len(keys), "no manifest.json (a publish of an "
                                  "older version under way or abandoned): readers do not see it", dry_run))
        except Exception as exc:  # noqa: BLE001 - it stays where readers still read it; the next publish retries
            reason = str(exc) if isinstance(exc, NotMovable) else f"{type(exc).__name__}: {exc}"
            moves.append(Move(None, old_prefix, new_prefix, LEFT, len(keys), reason[:500], dry_run))
    return moves


def _move(store: S3Store, old_prefix: str, new_prefix: str, dry_run: bool) -> Move:
    manifest = store.get_json(f"{old_prefix}/{MANIFEST}")
    objects = manifest.get("objects", [])
    # results.parquet first: a file that cannot be rewritten leaves the run where it is before anything is written
    ordered = sorted(objects, key=lambda o: o["name"] != "results.parquet")
    if dry_run:
        for obj in ordered[:1]:
            if obj["name"] == "results.parquet":
                _contract_parquet(_checked(store, obj), obj)
        return Move(manifest["run_id"], old_prefix, new_prefix, MOVED, len(objects), dry_run=True)
    copies = {}
    for obj in ordered:
        data = _checked(store, obj)
        if obj["name"] == "results.parquet":
            data = _contract_parquet(data, obj)
        key = f"{new_prefix}/{obj['name']}"
        copies[obj["name"]] = {"key": key, "name": obj["name"], "size_bytes": len(data),
                               "sha256": store.put_bytes(key, data, content_type(obj["name"]))}
    listed = [copies[o["name"]] for o in objects]  # the manifest's own order
    moved = {**manifest, "prefix": new_prefix, "objects": listed,
             "moved": {"from": old_prefix, "at": datetime.now(UTC).isoformat(), "schema_version": SCHEMA_VERSION}}
    keep = {o["key"] for o in listed} | {f"{new_prefix}/{MANIFEST}"}
    store.delete([k for k in store.list_keys(new_prefix + "/") if k not in keep])  # an earlier attempt's extras
    write_manifest(store, moved)
    _repoint_latest(store, old_prefix, moved)
    _delete_folder(store, old_prefix, store.list_keys(old_prefix + "/"))
    return Move(manifest["run_id"], old_prefix, new_prefix, MOVED, len(listed))


def _clean(store: S3Store, old_prefix: str, new_prefix: str, keys: list[str], dry_run: bool) -> Move:
    manifest = store.get_json(f"{new_prefix}/{MANIFEST}")
    if not dry_run:
        _repoint_latest(store, old_prefix, manifest)
        _delete_folder(store, old_prefix, keys)
    return Move(manifest["run_id"], old_prefix, new_prefix, CLEANED, len(keys), dry_run=dry_run)


def _checked(store: S3Store, obj: dict) -> bytes:
    """An object's bytes, refused when they are not what its manifest lists (never copy a different file)."""
    data = store.get(obj["key"])
    sha256 = hashlib.sha256(data).hexdigest()
    if obj.get("sha256") not in (None, sha256):
        raise NotMovable(f"{obj['key']} does not match its manifest (SHA-256 {sha256[:12]}..., listed "
                         f"{str(obj['sha256'])[:12]}...): left for a person to look at")
    return data


def _contract_parquet(data: bytes, obj: dict) -> bytes:
    """results.parquet rewritten with the contract's Arrow schema: same rows, same values, types from the contract."""
    import io

    import pandas as pd

    frame = pd.read_parquet(io.BytesIO(data))
    unknown = [c for c in frame.columns if c not in COLUMNS]
    if unknown:
        raise NotMovable(f"{obj['key']} has columns outside the results contract ({', '.join(map(str, unknown))}); "
                         "rewriting it with the contract's schema would drop them")
    return to_parquet_bytes(frame)


def _repoint_latest(store: S3Store, old_prefix: str, manifest: dict) -> None:
    key = store.key(LATEST)
    if not store.exists(key):
        return
    pointer = store.get_json(key)
    if pointer.get("manifest") == f"{old_prefix}/{MANIFEST}":
        pointer.update(manifest=f"{manifest['prefix']}/{MANIFEST}", status=manifest["status"])
        store.put_bytes(key, json.dumps(pointer, indent=2).encode(), "application/json")


def _delete_folder(store: S3Store, prefix: str, keys: list[str]) -> None:
    """The folder's objects, its manifest last: until then a reader that finds it reads the new folder instead."""
    manifest = f"{prefix}/{MANIFEST}"
    store.delete([k for k in keys if k != manifest])
    store.delete([k for k in keys if k == manifest])
