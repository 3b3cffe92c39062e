"""The inputs of a cell: everything that decides how a stack serves, fingerprinted so two nights can be told apart.

What changes from one night to the next is an input: the model file, a runtime's packages or its entry scripts,
the server's version or image, the serving configuration. When none changed, a stack cannot have regressed; only
the host can have. Every row carries its inputs as JSON (`inputs`) and their hash (`inputs_sha`, the load
generator left out: a change of the generator alone is reported, not judged as the stack's):

    model     the artifact's SHA-256 and record (what `convert.local_artifact` needs to have it again) and the spec
    runtime   process launcher: the venv's requirements file, its resolved packages and the runtime folder's files
              (docker/<runtime>/: entry scripts); Docker launcher: the image's reference and id
    server    the server's own version string
    serving   the serving options (batching, instances, threads, the CPU and memory budget, device), the protocol
    loadgen   the pipeline version and the load generator's code

A reference night's inputs are enough to serve that night's cell again beside tonight's (tasks/measure/duet.py):
the artifact from the cache or the store, the runtime folder and its requirements from the store
(`runtime_snapshot`), the options as they were.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from tasks.convert.artifact import Artifact
from tasks.core.metadata import PIPELINE_VERSION
from tasks.core.paths import REPO_ROOT, runtime_home
from tasks.core.spec import ModelSpec
from tasks.runtimes.venvs import (
    BUILDER,
    canonical_name,
    ensure_runtime,
    files_sha256,
    runtime_builder,
    runtime_packages,
    venv_builder,
)
from tasks.serve.options import ServingOptions

INPUTS_SCHEMA = 1


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=1)
def loadgen_fingerprint() -> dict:
    """The load generator's identity: the pipeline version and a hash of its code (tasks/loadgen/)."""
    return {"version": PIPELINE_VERSION, "sha256": files_sha256(REPO_ROOT / "tasks" / "loadgen", (".py",))}


def runtime_folder(runtime: str, options: ServingOptions) -> Path:
    """Where the runtime's files are: a reference's snapshot (`options.runtime_dir`) or this checkout's."""
    return Path(options.runtime_dir) if options.runtime_dir else runtime_home(runtime)


def runtime_fingerprint(runtime: str, launcher: str, options: ServingOptions, image_label: str = "") -> dict:
    """What runs the server. Process launcher: the venv (requirements hash, resolved packages, the builder that made
    it) and the runtime folder's files; Docker launcher: the image (reference and id; the packages are inside it)."""
    folder = runtime_folder(runtime, options)
    if launcher == "docker":
        return {"name": runtime, "launcher": launcher, "image": image_label, "files_sha256": files_sha256(folder)}
    env = ensure_runtime(runtime, log=lambda _: None, requirements=folder / "requirements.txt",
                         builder=options.runtime_builder or BUILDER)
    return {"name": runtime, "launcher": launcher, "requirements_sha256": env.requirements_sha256,
            "packages": runtime_packages(env), "files_sha256": files_sha256(folder), "builder": runtime_builder(env)}


def cell_inputs(artifact: Artifact, spec: ModelSpec, runtime: dict, server_version: str, serving: dict) -> dict:
    """The inputs record of one server life's rows."""
    return {"schema": INPUTS_SCHEMA,
            "model": {"sha256": artifact.sha256, "artifact": artifact.to_dict(), "spec": json.loads(spec.to_json())},
            "runtime": runtime, "server": {"version": server_version}, "serving": serving,
            "loadgen": loadgen_fingerprint()}


def stack_identity(inputs: dict) -> dict:
    """What of the inputs decides how the stack serves: the model file (not where it lies), the runtime, the
    server's version, the serving options."""
    model = inputs.get("model") or {}
    return {"model": model.get("sha256"), "runtime": _runtime_identity(inputs.get("runtime") or {}),
            "server": inputs.get("server"), "serving": inputs.get("serving")}


def _runtime_identity(runtime: dict) -> dict:
    if runtime.get("launcher") == "docker":
        image = str(runtime.get("image") or "")
        return {"image_id": image.rpartition("@")[2] or image, "files_sha256": runtime.get("files_sha256")}
    return {"packages": runtime.get("packages"), "files_sha256": runtime.get("files_sha256")}


def inputs_sha(inputs: dict) -> str:
    """The hash of a cell's stack inputs (equal hashes: nothing a stack depends on changed)."""
    return _sha(json.dumps(stack_identity(inputs), sort_keys=True, default=str).encode())


def _short(value: object) -> str:
    text = str(value)
    return f"{text[:8]}…" if len(text) > 12 and all(c in "0123456789abcdef" for c in text) else text


def _canonical(packages: dict) -> dict:
    return {canonical_name(name): version for name, version in packages.items()}


def input_changes(reference: dict, current: dict) -> list[str]:
    """What changed from `reference` to `current`, for people: "model sha256 9f2c… → 41ab…", "custom: onnxruntime
    1.20.1 → 1.21.0", "serving instances 1 → 2", "load generator changed" (empty: nothing did)."""
    changes = []
    ref_model, cur_model = reference.get("model") or {}, current.get("model") or {}
    if ref_model.get("sha256") != cur_model.get("sha256"):
        changes.append(f"{cur_model.get('artifact', {}).get('model', 'model')}: model sha256 "
                       f"{_short(ref_model.get('sha256'))} → {_short(cur_model.get('sha256'))}")
    ref_rt, cur_rt = reference.get("runtime") or {}, current.get("runtime") or {}
    name = cur_rt.get("name", "runtime")
    ref_pk, cur_pk = (_canonical(rt.get("packages") or {}) for rt in (ref_rt, cur_rt))
    for package in sorted(set(ref_pk) | set(cur_pk)):
        if ref_pk.get(package) != cur_pk.get(package):
            changes.append(f"{name}: {package} {ref_pk.get(package, '(none)')} → {cur_pk.get(package, '(none)')}")
    if _runtime_identity(ref_rt).get("image_id") != _runtime_identity(cur_rt).get("image_id"):
        changes.append(f"{name}: image {_short(_runtime_identity(ref_rt).get('image_id'))} → "
                       f"{_short(_runtime_identity(cur_rt).get('image_id'))}")
    if venv_builder(ref_rt) and venv_builder(cur_rt) and venv_builder(ref_rt) != venv_builder(cur_rt):
        changes.append(f"{name}: venv built by {ref_rt.get('builder') or 'pip'} → {cur_rt.get('builder') or 'pip'}")
    if ref_rt.get("files_sha256") != cur_rt.get("files_sha256"):
        changes.append(f"{name}: files of docker/{name}/ {_short(ref_rt.get('files_sha256'))} → "
                       f"{_short(cur_rt.get('files_sha256'))}")
    if (reference.get("server") or {}).get("version") != (current.get("server") or {}).get("version"):
        changes.append(f"server version {(reference.get('server') or {}).get('version')} → "
                       f"{(current.get('server') or {}).get('version')}")
    ref_sv, cur_sv = reference.get("serving") or {}, current.get("serving") or {}
    for key in sorted(set(ref_sv) | set(cur_sv)):
        if ref_sv.get(key) != cur_sv.get(key):
            changes.append(f"serving {key} {ref_sv.get(key)} → {cur_sv.get(key)}")
    if (reference.get("loadgen") or {}) != (current.get("loadgen") or {}):
        changes.append("load generator changed")
    return changes


def stack_changed(reference: dict, current: dict) -> bool:
    """Whether anything the stack depends on differs (a changed load generator alone does not count)."""
    return inputs_sha(reference) != inputs_sha(current)
