"""The model's source: built from a builder and seed, or a file (local path or s3:// URI) with its SHA-256.

Checks made here, in the orchestrator and before any runtime or server starts: the file exists, has the shape
of its format (a TorchScript archive or state dict is a zip file, a SavedModel a folder with saved_model.pb,
an ONNX file a non-empty protobuf) and, when the spec pins `source.sha256`, has that hash. The runtime then
loads it and rejects what does not load, naming the same field.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tasks.convert.parity import file_sha256
from tasks.core.errors import ConfigError
from tasks.core.paths import REPO_ROOT, artifacts_root
from tasks.core.spec import ModelSpec
from tasks.store.s3 import ConnectionFields, S3Store


@dataclass(frozen=True)
class Source:
    """A resolved source: what identifies its content, and the local file or folder when there is one."""

    identity: str  # SHA-256 over the source's content: file bytes, or builder file + spec fingerprint
    local_path: str  # "" for a built source
    sha256: str  # the source file's SHA-256 ("" for a built source)
    uri: str  # the spec's source.file as given (path or s3:// URI)


def builder_file(spec: ModelSpec) -> Path:
    module = spec.builder.split(":")[0]
    path = REPO_ROOT / (module.replace(".", "/") + ".py")
    if not path.is_file():
        raise ConfigError(f"model {spec.name}: source.builder", spec.builder, f"module file {path} must exist")
    return path


def resolve_source(spec: ModelSpec, conn: ConnectionFields | None = None) -> Source:
    """Identify the source; fetch an s3:// file through `conn` (boto3's default chain when None)."""
    built = ""
    if spec.builder:
        built = hashlib.sha256(builder_file(spec).read_bytes()).hexdigest()
    if not spec.source_file:
        return Source(hashlib.sha256(f"{spec.fingerprint()}\n{built}".encode()).hexdigest(), "", "", "")
    if spec.source_file.startswith("s3://"):
        local = _fetch_s3(spec, conn or ConnectionFields("aws_default"))
    else:
        local = Path(spec.source_file)
        if not local.exists():
            raise ConfigError(f"model {spec.name}: source.file", spec.source_file, "must exist (no such file)")
    _check_shape(spec, local)
    sha = file_sha256(local)
    if spec.source_sha256 and sha != spec.source_sha256:
        raise ConfigError(f"model {spec.name}: source.sha256", spec.source_sha256,
                          f"must match the file {spec.source_file}, whose SHA-256 is {sha} (changed or corrupt)")
    identity = hashlib.sha256(f"{spec.fingerprint()}\n{built}\n{sha}".encode()).hexdigest()
    return Source(identity, str(local), sha, spec.source_file)


def _check_shape(spec: ModelSpec, local: Path) -> None:
    field, fmt = f"model {spec.name}: source.file", spec.source_format
    if fmt == "savedmodel":
        if not (local / "saved_model.pb").is_file():
            raise ConfigError(field, spec.source_file, "must be a SavedModel folder holding saved_model.pb")
        return
    if not local.is_file() or local.stat().st_size == 0:
        raise ConfigError(field, spec.source_file, f"must be a non-empty {fmt} file")
    if fmt in ("torchscript", "state_dict") and not zipfile.is_zipfile(local):
        raise ConfigError(field, spec.source_file, f"must be a {fmt} file as torch saves it (a zip archive); it is not")
    if fmt == "onnx" and local.read_bytes()[:1] != b"\x08":  # ModelProto starts with field 1, ir_version
        raise ConfigError(field, spec.source_file, "must be an ONNX model (a ModelProto); it does not start like one")


def _fetch_s3(spec: ModelSpec, conn: ConnectionFields) -> Path:
    """Download an s3:// file or folder (a key prefix) into the source cache; return its local path."""
    from botocore.exceptions import BotoCoreError, ClientError

    uri = urllib.parse.urlsplit(spec.source_file)
    bucket, key = uri.netloc, uri.path.lstrip("/")
    field = f"model {spec.name}: source.file"
    if not bucket or not key:
        raise ConfigError(field, spec.source_file, "must be s3://bucket/key")
    store = S3Store(bucket, "", conn)
    cache = artifacts_root() / "_sources"
    if spec.source_sha256:
        pinned = cache / spec.source_sha256[:20] / Path(key.rstrip("/")).name
        if pinned.exists():
            return pinned
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=cache))
    try:
        target = work / Path(key.rstrip("/")).name
        try:
            if spec.source_format == "savedmodel":
                prefix = key.rstrip("/") + "/"
                keys = store.list_keys(prefix)
                if not keys:
                    raise ConfigError(field, spec.source_file, f"must name a SavedModel folder; no objects under it "
                                      f"(via connection {conn.conn_id!r})")
                for k in keys:
                    dest = target / k[len(prefix):]
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    store.client.download_file(bucket, k, str(dest))
            else:
                store.client.download_file(bucket, key, str(target))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            raise ConfigError(field, spec.source_file, f"must be readable through connection {conn.conn_id!r}: "
                              f"S3 answered {code or exc}") from exc
        except BotoCoreError as exc:
            raise ConfigError(field, spec.source_file, f"must be reachable through connection {conn.conn_id!r}: "
                              f"{exc}") from exc
        final = cache / file_sha256(target)[:20]
        if not final.exists():
            work.rename(final)
            work = None
        return final / target.name
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
