"""Runtime folders kept in the store, so a regression reference stays runnable after the repository moved on.

    <prefix>/runtimes/<runtime>/<files sha256>/<file>...      docker/<runtime>/ as a run served with it
    <prefix>/runtimes/<runtime>/<files sha256>/.complete       written last: the snapshot is whole

Content-addressed (the hash of the folder's files, tasks/measure/inputs.py `files_sha256`), written once by the
first run that served with it and never overwritten, read back into this host's cache when a duet serves a
reference whose runtime files differ from the checkout's. Its requirements.txt builds the reference's venv.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
from pathlib import Path

from tasks.core.errors import StoreError
from tasks.core.paths import cache_root
from tasks.runtimes.venvs import files_sha256, folder_files
from tasks.store.s3 import S3Store

COMPLETE = ".complete"  # one of venvs.SKIP_FILES: not counted in the folder's hash


def snapshot_prefix(store: S3Store, runtime: str, files_sha: str) -> str:
    return store.key("runtimes", runtime, files_sha)


def publish_runtime(store: S3Store, runtime: str, folder: Path, files_sha: str) -> bool:
    """Keep `folder` (docker/<runtime>/ as served) in the store under its hash; True when it was written now."""
    prefix = snapshot_prefix(store, runtime, files_sha)
    if store.exists(f"{prefix}/{COMPLETE}"):
        return False
    files = folder_files(folder)
    for name, path in files.items():
        store.put_bytes(f"{prefix}/{name}", path.read_bytes())
    store.put_bytes(f"{prefix}/{COMPLETE}", json.dumps(sorted(files)).encode(), "application/json")
    return True


def snapshot_dir(runtime: str, files_sha: str) -> Path:
    return cache_root() / "runtime-snapshots" / f"{runtime}-{files_sha[:16]}"


def fetch_runtime(store: S3Store | None, runtime: str, files_sha: str) -> Path:
    """The runtime folder of hash `files_sha` on this host (cached; fetched from the store when missing), its
    hash checked. StoreError naming the snapshot when it cannot be had."""
    target = snapshot_dir(runtime, files_sha)
    if (target / COMPLETE).is_file():
        return target
    if store is None:
        raise StoreError(f"the runtime folder docker/{runtime}/ of hash {files_sha[:12]} is not on this host, and "
                         "no store to fetch it from (share_artifacts off)")
    prefix = snapshot_prefix(store, runtime, files_sha)
    if not store.exists(f"{prefix}/{COMPLETE}"):
        raise StoreError(f"the runtime folder docker/{runtime}/ of hash {files_sha[:12]} is not in "
                         f"{store.describe()} ({prefix}/): the reference cannot be rebuilt")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / COMPLETE).is_file():
            return target
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        names = json.loads(store.get(f"{prefix}/{COMPLETE}"))
        for name in names:
            path = partial / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(store.get(f"{prefix}/{name}"))
        got = files_sha256(partial)
        if got != files_sha:
            shutil.rmtree(partial, ignore_errors=True)
            raise StoreError(f"the runtime folder {prefix}/ in the store hashes to {got[:12]}, not {files_sha[:12]}")
        (partial / COMPLETE).write_text(hashlib.sha256("\n".join(names).encode()).hexdigest())
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target
