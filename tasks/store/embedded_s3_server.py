"""The embedded S3's server process: moto's S3 whose buckets and objects can be kept on disk.

    python -m tasks.store.embedded_s3_server --port 9000 --state-dir .serving-eval/s3

moto's server holds everything in memory and forgets it when it stops. Its one built-in way to keep state,
the recorder (`/moto-api/recorder/...`), appends every request (reads too) to a file and replays them all
into a fresh server: the file and the replay grow with every request ever made, a request that failed is
replayed as well, and a body sent without a Content-Length is recorded empty. So with `--state-dir` this
process keeps the state itself, as files:

    <state-dir>/state.json                                  {"format": 1}
    <state-dir>/blobs/<sha256>                              object bytes, content-addressed, written once
    <state-dir>/buckets/<bucket>/bucket.json                account, partition, region
    <state-dir>/buckets/<bucket>/objects/<sha256(key)>.json key, blob, size, metadata, last modified, ...

At start the state is read back into moto before the port opens. After every request that may have changed
something (any method but GET/HEAD/OPTIONS) the changed objects and buckets are written (blob first, then
its record, each by an atomic rename after fsync) before the answer is sent: an acknowledged write survives
a restart and a crash of this process, and a crash mid-write leaves the previous version of that object.
Only the latest version of an object is kept, with its content, content type, user metadata, ETag,
encryption, checksum and object lock; bucket settings (policy, versioning, tags) and other AWS services are
not kept. One process at a time may use a state folder (an exclusive lock on `<state-dir>/lock`).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("serving_eval.embedded_s3")

STATE_FORMAT = 1
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
STATE_IN_USE_EXIT_CODE = 3
# What an object keeps across a restart besides its bytes, metadata (content type, x-amz-meta-*), storage
# class, ETag and last-modified time: moto's FakeKey attributes of encryption, checksum (a multipart upload's
# composite checksum needs its type and part count) and object lock.
KEPT_ATTRIBUTES = ("encryption", "kms_key_id", "bucket_key_enabled", "checksum_algorithm", "checksum_value",
                   "checksum_type", "checksum_parts", "website_redirect_location", "lock_mode", "lock_legal_status",
                   "lock_until")


class StateInUse(RuntimeError):
    """Another embedded S3 process holds the state folder's lock."""


@dataclass(frozen=True)
class LiveObject:
    """One object as moto holds it (the latest version of a key)."""

    bucket: str
    key: str
    fingerprint: tuple
    fake_key: Any  # moto.s3.models.FakeKey


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)


def _key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class DiskState:
    """The buckets and objects of moto's S3 backends mirrored in a folder (see the module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.blobs = self.root / "blobs"
        self.buckets_dir = self.root / "buckets"
        self._lock_file = None
        self.buckets: dict[str, dict] = {}  # bucket -> bucket.json
        self.objects: dict[tuple[str, str], dict] = {}  # (bucket, key) -> object record
        self.fingerprints: dict[tuple[str, str], tuple] = {}  # what moto held when the record was written

    # -- the folder ---------------------------------------------------------------------------------------
    def open(self) -> None:
        """Create the folder if needed, take its lock and check its format."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.root / "lock", "a+")  # noqa: SIM115 - held for the process's life
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise StateInUse(f"state folder {self.root} is in use by another embedded S3 process "
                             f"(lock {self.root / 'lock'})") from exc
        marker = self.root / "state.json"
        if marker.exists():
            found = json.loads(marker.read_text()).get("format")
            if found != STATE_FORMAT:
                raise RuntimeError(f"state folder {self.root}: format={found!r}, this server reads format "
                                   f"{STATE_FORMAT} only")
        else:
            _atomic_write(marker, json.dumps({"format": STATE_FORMAT}).encode())
        self.blobs.mkdir(exist_ok=True)
        self.buckets_dir.mkdir(exist_ok=True)

    def load(self) -> None:
        """Read the records; skip one whose blob is missing or of the wrong size; drop unreferenced blobs."""
        for bucket_file in sorted(self.buckets_dir.glob("*/bucket.json")):
            bucket = json.loads(bucket_file.read_text())
            self.buckets[bucket["name"]] = bucket
            for record_file in sorted((bucket_file.parent / "objects").glob("*.json")):
                record = json.loads(record_file.read_text())
                blob = self.blobs / record["blob"]
                if not blob.is_file() or blob.stat().st_size != record["size"]:
                    log.warning("skipping s3://%s/%s: blob %s missing or truncated", bucket["name"], record["key"],
                                record["blob"])
                    continue
                self.objects[(bucket["name"], record["key"])] = record
        referenced = {r["blob"] for r in self.objects.values()}
        for blob in self.blobs.iterdir():
            if blob.name not in referenced:  # left by a crash between a blob and its record, or a temp file
                blob.unlink(missing_ok=True)
        for tmp in self.buckets_dir.glob("*/objects/.*.tmp"):
            tmp.unlink(missing_ok=True)

    # -- writing ------------------------------------------------------------------------------------------
    def _bucket_dir(self, bucket: str) -> Path:
        return self.buckets_dir / bucket

    def write_bucket(self, record: dict) -> None:
        folder = self._bucket_dir(record["name"])
        (folder / "objects").mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / "bucket.json", json.dumps(record, sort_keys=True).encode())
        self.buckets[record["name"]] = record

    def remove_bucket(self, bucket: str) -> None:
        for key in [k for b, k in self.objects if b == bucket]:
            self.remove_object(bucket, key)
        shutil.rmtree(self._bucket_dir(bucket), ignore_errors=True)
        self.buckets.pop(bucket, None)

    def write_object(self, bucket: str, key: str, value: bytes, record: dict) -> None:
        digest = hashlib.sha256(value).hexdigest()
        blob = self.blobs / digest
        if not blob.exists():
            _atomic_write(blob, value)
        record = {**record, "key": key, "blob": digest, "size": len(value)}
        old = self.objects.get((bucket, key))
        _atomic_write(self._bucket_dir(bucket) / "objects" / f"{_key_id(key)}.json",
                      json.dumps(record, sort_keys=True, default=str).encode())
        self.objects[(bucket, key)] = record
        if old and old["blob"] != digest:
            self._drop_blob_if_unused(old["blob"])

    def remove_object(self, bucket: str, key: str) -> None:
        old = self.objects.pop((bucket, key), None)
        self.fingerprints.pop((bucket, key), None)
        (self._bucket_dir(bucket) / "objects" / f"{_key_id(key)}.json").unlink(missing_ok=True)
        if old:
            self._drop_blob_if_unused(old["blob"])

    def _drop_blob_if_unused(self, digest: str) -> None:
        if not any(r["blob"] == digest for r in self.objects.values()):
            (self.blobs / digest).unlink(missing_ok=True)

    # -- moto <-> disk ------------------------------------------------------------------------------------
    def restore(self) -> int:
        """Put the loaded buckets and objects into moto's backends; return the number of objects."""
        from moto.s3.models import s3_backends

        for name, bucket in self.buckets.items():
            s3_backends[bucket["account_id"]][bucket["partition"]].create_bucket(name, bucket["region"])
        for (bucket_name, key), record in self.objects.items():
            bucket = self.buckets[bucket_name]
            backend = s3_backends[bucket["account_id"]][bucket["partition"]]
            fake_key = backend.put_object(
                bucket_name, key, (self.blobs / record["blob"]).read_bytes(), storage=record.get("storage_class"),
                etag=(record.get("etag") or "").strip('"') or None,  # a multipart upload's "<md5>-<parts>" too
                disable_notification=True)
            fake_key.set_metadata(dict(record.get("metadata") or {}), replace=True)
            for name in KEPT_ATTRIBUTES:
                setattr(fake_key, name, record.get(name))
            if record.get("last_modified"):
                fake_key.last_modified = datetime.fromisoformat(record["last_modified"])
            self.fingerprints[(bucket_name, key)] = _fingerprint(fake_key)
        return len(self.objects)

    def sync(self) -> None:
        """Write what changed in moto since the last sync: new or replaced objects, removed ones, buckets."""
        live_buckets = dict(_live_buckets())
        for name in [b for b in self.buckets if b not in live_buckets]:
            self.remove_bucket(name)
        for name, record in live_buckets.items():
            if self.buckets.get(name) != record:
                self.write_bucket(record)
        live = {(o.bucket, o.key): o for o in _live_objects(live_buckets)}
        for gone in [k for k in self.objects if k not in live]:
            self.remove_object(*gone)
        for ident, obj in live.items():
            if self.fingerprints.get(ident) == obj.fingerprint and ident in self.objects:
                continue
            fake_key = obj.fake_key
            self.write_object(obj.bucket, obj.key, fake_key.value, {
                "metadata": dict(fake_key.metadata), "last_modified": fake_key.last_modified.isoformat(),
                "etag": fake_key.etag, "storage_class": fake_key.storage_class,
                **{name: getattr(fake_key, name, None) for name in KEPT_ATTRIBUTES}})
            self.fingerprints[ident] = obj.fingerprint


def _fingerprint(fake_key: Any) -> tuple:
    return (id(fake_key), fake_key.last_modified, fake_key.size, fake_key.etag)


def _live_buckets() -> Iterator[tuple[str, dict]]:
    from moto.s3.models import s3_backends

    for name, (partition, account_id) in list(s3_backends.bucket_accounts.items()):
        bucket = s3_backends[account_id][partition].buckets.get(name)
        if bucket is not None:
            yield name, {"name": name, "account_id": account_id, "partition": partition,
                         "region": bucket.region_name}


def _live_objects(buckets: dict[str, dict]) -> Iterator[LiveObject]:
    from moto.s3.models import FakeKey, s3_backends

    for name, record in buckets.items():
        bucket = s3_backends[record["account_id"]][record["partition"]].buckets.get(name)
        for key, versions in (bucket.keys.lists() if bucket is not None else []):
            latest = versions[-1] if versions else None
            if isinstance(latest, FakeKey):  # not a delete marker
                yield LiveObject(name, key, _fingerprint(latest), latest)


class PersistingApp:
    """WSGI middleware: after a request that may change the store, write the changes before answering."""

    def __init__(self, app: Callable, state: DiskState):
        self.app = app
        self.state = state
        self.lock = threading.Lock()  # one changing request at a time: its sync sees only its own change

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") in READ_METHODS:
            return self.app(environ, start_response)
        answer: list = []
        with self.lock:
            body = self.app(environ, lambda status, headers, exc_info=None: answer.extend((status, headers)))
            try:
                chunks = list(body)
            finally:
                if hasattr(body, "close"):
                    body.close()
            try:
                self.state.sync()
            except Exception:  # noqa: BLE001 - the client must not take an unsaved write as done
                log.exception("could not write the embedded S3's state to %s", self.state.root)
                start_response("500 Internal Server Error", [("Content-Type", "application/xml")])
                return [b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InternalError</Code>"
                        b"<Message>the embedded S3 could not write its state to disk</Message></Error>"]
        start_response(*answer)
        return chunks


def make_app(state: DiskState | None) -> Callable:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    return PersistingApp(app, state) if state is not None else app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.store.embedded_s3_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, help="keep buckets and objects in this folder across restarts")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    os.environ.setdefault("MOTO_PORT", str(args.port))
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import run_simple

    state = None
    if args.state_dir is not None:
        state = DiskState(args.state_dir)
        try:
            state.open()
        except StateInUse as exc:
            print(f"error: {exc}", file=sys.stderr)
            return STATE_IN_USE_EXIT_CODE
        state.load()
        count = state.restore()
        log.info("restored %d buckets and %d objects from %s", len(state.buckets), count, args.state_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run_simple(args.host, args.port, make_app(state), threaded=True, request_handler=MotoRequestHandler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
