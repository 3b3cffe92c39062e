"""`convert()`: the path of hops from the spec's source to the requested format, each run in its runtime.

Every hop's artifact is content-addressed: its key hashes the source (file bytes, or builder file + spec),
the hop's converter (runtime requirements, entry script, shared runtime code), its options and the previous
hop's key. Artifacts live under `artifacts_root()/<model>/<format>/<key[:20]>/` and, when a store is given,
under `<prefix>/artifacts/<model>/<format>/<key[:20]>/` in S3 (conversion.json written last), so several
workers share them. A conversion whose key is found converts nothing and returns `cache_hit=True`.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks.convert.artifact import Artifact
from tasks.convert.graph import HOPS, Hop, check_dtypes, find_path
from tasks.convert.parity import EXIT_REJECTED, EXIT_SKIPPED, file_sha256
from tasks.convert.sources import Source, resolve_source
from tasks.convert.tensorrt import gpu_skip_reason
from tasks.core.errors import ConfigError, ConversionError, ServingEvalError
from tasks.core.paths import REPO_ROOT, artifacts_root
from tasks.core.spec import ModelSpec
from tasks.runtimes.venvs import ensure_runtime, runtime_env_vars
from tasks.store.s3 import ConnectionFields, S3Store

CONVERT_TIMEOUT_S = 1800
RECORD_FILE = "conversion.json"
ARTIFACTS_PREFIX = "artifacts"


class ConversionSkipped(ServingEvalError):
    """This host cannot make the artifact (e.g. TensorRT without a GPU); cells that need it are skipped."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def check_conversion(spec: ModelSpec, fmt: str, options: dict[str, Any] | None = None) -> list[tuple[Hop, dict]]:
    """The hops from the spec's source to `fmt` with each hop's options; bad requests raise ConfigError.

    Checks the format, that a path exists, that every format on it can carry the spec's dtypes and the
    options. Needs no runtime and no source file, so the run can call it before anything starts.
    """
    path = find_path(spec, fmt)
    check_dtypes(spec, path)
    return [(hop, spec.options_for(hop.target, options if hop is path[-1] else None)) for hop in path]


def hop_key(hop: Hop, options: dict, source: Source, upstream_key: str) -> str:
    parts = [source.identity, hop.name, hop.fingerprint(), json.dumps(options, sort_keys=True), upstream_key]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def artifact_key(spec: ModelSpec, fmt: str, options: dict[str, Any] | None = None, *,
                 conn: ConnectionFields | None = None) -> str:
    """The cache key of `spec` in `fmt` (resolves the source, fetching an s3:// file)."""
    key = ""
    source = resolve_source(spec, conn)
    for hop, hop_options in check_conversion(spec, fmt, options):
        key = hop_key(hop, hop_options, source, key)
    return key


def convert(spec: ModelSpec, fmt: str, log: Callable[[str], object] = print, *, options: dict[str, Any] | None = None,
            conn: ConnectionFields | None = None, store: S3Store | None = None) -> Artifact:
    """Return the artifact of `spec` in `fmt`, converting each hop in its runtime unless the cache has it.

    `options` apply to the last hop (e.g. {"precision": "fp16"} for tensorrt, {"method": "script"} for
    torchscript); `conn` is the connection an s3:// source is fetched through; `store` shares artifacts in S3.
    Raises ConfigError for bad input, ConversionSkipped when this host cannot make the format, and
    ConversionError when a converter fails.
    """
    steps = check_conversion(spec, fmt, options)
    if any(hop.needs_gpu for hop, _ in steps):
        reason = gpu_skip_reason()
        if reason:
            raise ConversionSkipped(reason)
    source = resolve_source(spec, conn)
    artifact: Artifact | None = None
    for hop, hop_options in steps:
        artifact = _convert_hop(spec, hop, hop_options, source, artifact, store, log)
    assert artifact is not None  # a path has at least one hop
    if store is not None and artifact.cache_hit:
        _share(store, artifact, log)
    return artifact


def _share(store: S3Store, artifact: Artifact, log: Callable[[str], object]) -> None:
    """Make sure the artifact a run serves is in the store's artifact cache, where measuring hosts fetch it: a local
    cache hit may come from a run that did not share it."""
    prefix = _store_prefix(store, artifact.model, artifact.format, artifact.key)
    if not store.exists(f"{prefix}/{RECORD_FILE}"):
        log(f"convert {artifact.model}: sharing the cached {artifact.format} artifact in {store.describe()}")
        directory = artifacts_root() / artifact.model / artifact.format / artifact.key[:20]
        _put_to_store(store, artifact.model, artifact.format, artifact.key, directory)


def local_artifact(artifact: Artifact, store: S3Store | None, log: Callable[[str], object] = print) -> Artifact:
    """The artifact on this host's disk: as converted when its path is in this host's artifact cache, else from
    that cache by its key, fetched first from the store's artifact cache (`share_artifacts`), its SHA-256 checked.
    A measuring host never relies on a disk it shares with the converting worker (a path outside its own cache is
    another host's, even where the file happens to be visible)."""
    if Path(artifact.path).exists() and artifacts_root().resolve() in Path(artifact.path).resolve().parents:
        return artifact
    name = f"{artifact.model}/{artifact.format} artifact {artifact.key[:20]}"
    directory = artifacts_root() / artifact.model / artifact.format / artifact.key[:20]
    if not (directory / RECORD_FILE).is_file():
        if store is None:
            raise ConfigError("share_artifacts", False, f"the {name} was converted on another host ({artifact.path} "
                                                        "is not here): measuring hosts fetch artifacts from the "
                                                        "store, so turn share_artifacts on")
        directory.parent.mkdir(parents=True, exist_ok=True)
        with open(directory.parent / f"{artifact.key[:20]}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (directory / RECORD_FILE).is_file():
                if not _fetch_from_store(store, artifact.model, artifact.format, artifact.key, directory):
                    raise ConversionError(f"the {name} is neither on this host nor in {store.describe()} "
                                          f"({_store_prefix(store, artifact.model, artifact.format, artifact.key)})")
                log(f"fetched the {name} from {store.describe()}")
    local = _load_record(artifact, directory)
    if local.sha256 != artifact.sha256 or file_sha256(Path(local.path)) != artifact.sha256:
        raise ConversionError(f"the {name} on this host ({local.path}) does not have the SHA-256 the run converted "
                              f"({artifact.sha256}): delete {directory} so it is fetched again")
    return local


def _load_record(artifact: Artifact, directory: Path) -> Artifact:
    record = json.loads((directory / RECORD_FILE).read_text())
    return Artifact(artifact.model, artifact.format, str(directory / record["file"]), record["sha256"],
                    artifact.key, True, record)


def recheck_parity(spec: ModelSpec, artifact_dir: Path | str, log: Callable[[str], object] = print) -> list[dict]:
    """Measure an existing artifact folder's parity again, against the source reference it carries.

    Runs the format's import hop on the folder (onnx, torchscript, savedmodel): the file is loaded and run at
    every parity batch size and compared with its `reference.npz`. Catches an artifact changed after conversion.
    """
    directory = Path(artifact_dir)
    record = json.loads((directory / RECORD_FILE).read_text())
    hop = next((h for h in HOPS if h.source == h.target == record["format"]), None)
    if hop is None:
        raise ConfigError(f"model {spec.name}: format", record["format"], "has no import hop to re-check parity with")
    env = ensure_runtime(hop.runtime, log=log)
    with tempfile.TemporaryDirectory(prefix="serving-eval-recheck-") as tmp:
        work = Path(tmp)
        (work / "spec.json").write_text(spec.to_json())
        argv = [str(env.python), str(REPO_ROOT / hop.entry), "--spec", str(work / "spec.json"), "--hop", hop.name,
                "--upstream", str(directory), "--out", str(work / "out"), "--status", str(work / "status.json")]
        proc = subprocess.run(argv, capture_output=True, text=True, env=runtime_env_vars(env), cwd=work,
                              timeout=CONVERT_TIMEOUT_S)
        _raise_for_exit(spec, hop, proc, work / "status.json")
        return json.loads((work / "out" / RECORD_FILE).read_text())["parity"]


def _convert_hop(spec: ModelSpec, hop: Hop, options: dict, source: Source, upstream: Artifact | None,
                 store: S3Store | None, log: Callable[[str], object]) -> Artifact:
    key = hop_key(hop, options, source, upstream.key if upstream else "")
    final_dir = artifacts_root() / spec.name / hop.target / key[:20]
    if (final_dir / RECORD_FILE).is_file():
        return _load(spec, hop.target, key, final_dir, cache_hit=True)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(final_dir.parent / f"{key[:20]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another task may be converting the same artifact right now
        if (final_dir / RECORD_FILE).is_file():
            return _load(spec, hop.target, key, final_dir, cache_hit=True)
        if store is not None and _fetch_from_store(store, spec.name, hop.target, key, final_dir):
            log(f"convert {spec.name}: {hop.name} found in {store.describe()}")
            return _load(spec, hop.target, key, final_dir, cache_hit=True)
        env = ensure_runtime(hop.runtime, log=log)
        work = Path(tempfile.mkdtemp(prefix=f".{key[:20]}-", dir=final_dir.parent))
        try:
            (work / "spec.json").write_text(spec.to_json())
            out, status = work / "out", work / "status.json"
            argv = [str(env.python), str(REPO_ROOT / hop.entry), "--spec", str(work / "spec.json"), "--hop", hop.name,
                    "--options", json.dumps(options), "--out", str(out), "--status", str(status)]
            if upstream is not None:
                argv += ["--upstream", str(Path(upstream.path).parent)]
            elif source.local_path:
                argv += ["--source", source.local_path]
            log(f"convert {spec.name}: {hop.name} in runtime {hop.runtime}")
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, env=runtime_env_vars(env), cwd=work,
                                      timeout=CONVERT_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                raise ConversionError(f"converting model {spec.name} ({hop.name}) took over {CONVERT_TIMEOUT_S} s") \
                    from exc
            _raise_for_exit(spec, hop, proc, status)
            record = json.loads((out / RECORD_FILE).read_text())
            record.update({
                "key": key, "path": [*(upstream.record["path"] if upstream else []), hop.name],
                "upstream_key": upstream.key if upstream else None, "source": source.uri or spec.builder,
                "source_sha256": source.sha256 or None, "runtime": hop.runtime,
            })
            (out / RECORD_FILE).write_text(json.dumps(record, indent=2))
            out.rename(final_dir)  # atomic: readers see a whole artifact or none
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if store is not None:
            _put_to_store(store, spec.name, hop.target, key, final_dir)
    return _load(spec, hop.target, key, final_dir, cache_hit=False)


def _raise_for_exit(spec: ModelSpec, hop: Hop, proc: subprocess.CompletedProcess, status: Path) -> None:
    if proc.returncode == 0:
        return
    detail = json.loads(status.read_text()) if status.is_file() else {}
    if proc.returncode == EXIT_REJECTED and detail.get("status") == "rejected":
        raise ConfigError(f"model {spec.name}: {detail['field']}", detail["value"], detail["rule"])
    if proc.returncode == EXIT_SKIPPED and detail.get("status") == "skipped":
        raise ConversionSkipped(detail["reason"])
    raise ConversionError(f"converting model {spec.name} ({hop.name} in runtime {hop.runtime}) failed with exit code "
                          f"{proc.returncode}:\n{proc.stderr[-3000:]}")


def _load(spec: ModelSpec, fmt: str, key: str, directory: Path, cache_hit: bool) -> Artifact:
    record = json.loads((directory / RECORD_FILE).read_text())
    return Artifact(spec.name, fmt, str(directory / record["file"]), record["sha256"], key, cache_hit, record)


def _store_prefix(store: S3Store, model: str, fmt: str, key: str) -> str:
    return store.key(ARTIFACTS_PREFIX, model, fmt, key[:20])


def _put_to_store(store: S3Store, model: str, fmt: str, key: str, directory: Path) -> None:
    """Upload the artifact folder, conversion.json last (its presence means the artifact is whole)."""
    prefix = _store_prefix(store, model, fmt, key)
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != RECORD_FILE)
    for path in [*files, directory / RECORD_FILE]:
        data = path.read_bytes()
        digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
        store.put(f"{prefix}/{path.relative_to(directory).as_posix()}", data, digest, "application/octet-stream")


def _fetch_from_store(store: S3Store, model: str, fmt: str, key: str, final_dir: Path) -> bool:
    prefix = _store_prefix(store, model, fmt, key)
    if not store.exists(f"{prefix}/{RECORD_FILE}"):
        return False
    work = Path(tempfile.mkdtemp(prefix=f".{key[:20]}-s3-", dir=final_dir.parent))
    try:
        for k in store.list_keys(prefix + "/"):
            dest = work / k[len(prefix) + 1:]
            dest.parent.mkdir(parents=True, exist_ok=True)
            store.download(k, dest)
        work.rename(final_dir)
        return True
    finally:
        shutil.rmtree(work, ignore_errors=True)
