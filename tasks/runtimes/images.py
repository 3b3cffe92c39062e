"""Container images: the project's Debian base, one builder, and one image per runtime, each tagged by what went
into it, and reused.

    serving-eval/base:<hash>       docker/base/build-base.sh: debootstrap --variant=minbase + Python 3.11, imported
    serving-eval/builder:<hash>    docker/builder/Dockerfile FROM the base: the one build stage of every image with a
                                   venv (the CA option trusted, pip, and ONBUILD steps that install the context's
                                   requirements.txt and wheels/ into /opt/venv)
    serving-eval/<runtime>:<hash>  docker/<runtime>/Dockerfile: `FROM <builder> AS build`, then FROM the base with
                                   the venv copied over (build arguments BASE_IMAGE, BUILDER_IMAGE)

Each image builds from a context assembled by tasks/runtimes/build_context.py; the tag is the SHA-256 of that
context, the base image's id and the build arguments, so an unchanged runtime is never rebuilt: like the runtime
venvs, a second run builds nothing. Builds of one image take a file lock, so two processes that need the same
image build it once.

Official images (NVIDIA's Triton, TorchServe's, TensorFlow Serving's) are not built: they are used as the
registry serves them, when one does (`official_image`).

The deployment's images (docker/compose.yaml) build the same way: `airflow` (docker/airflow/: Airflow with this
project, from the repository's requirements.txt and code), `postgres` and `redis` (Debian's packages on the base).
`python -m tasks.cli images compose-env` builds or reuses them and writes their tags into docker/compose.env.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tasks.core.errors import RuntimeBuildError, ServerStartError
from tasks.core.paths import DOCKER_DIR, cache_root
from tasks.runtimes.build_context import NO_VENV, context_files, inputs_sha256
from tasks.runtimes.docker_engine import docker_client as engine_client

PROJECT_REPO = "serving-eval"
BASE_SCRIPT = DOCKER_DIR / "base" / "build-base.sh"
BASE_ENV = ("DEBIAN_SUITE", "DEBIAN_MIRROR")  # build-base.sh settings: part of the base image's hash
BUILDER = "builder"  # docker/builder/: the build stage every image with a venv starts from
# The runtimes that serve (their images are what `make images` builds); TF Serving has only its official image.
SERVING_RUNTIMES = ("triton", "torchserve", "bentoml", "kserve", "custom")
# The deployment's images (docker/compose.yaml): Airflow with the project, PostgreSQL and Redis from Debian's
# packages. They are not runtimes: no docker/<name>/requirements.txt.
DEPLOYMENT_IMAGES = ("airflow", "postgres", "redis")
# The variables of docker/compose.yaml that name the deployment's images (python -m tasks.cli images compose-env)
COMPOSE_VARS = {"airflow": "SERVING_EVAL_AIRFLOW_IMAGE", "postgres": "SERVING_EVAL_POSTGRES_IMAGE",
                "redis": "SERVING_EVAL_REDIS_IMAGE"}
LABEL_INPUTS = "serving-eval.inputs-sha256"
LABEL_RUNTIME = "serving-eval.runtime"
BUILD_TIMEOUT_S = 3600
PULL_TIMEOUT_S = 120
KINDS = ("project", "official")


class ImageUnavailable(ServerStartError):
    """An official image is neither on this engine nor pullable from a registry (the message says why)."""


@dataclass(frozen=True)
class ImageRef:
    """An image ready on the engine: its reference, its id, and whether it is official or project-built."""

    ref: str
    image_id: str
    kind: str  # official | project
    built_now: bool = False
    build_s: float = 0.0

    @property
    def label(self) -> str:
        """What the results' `runtime_image` column records: the reference and the engine's image id."""
        return f"{self.ref}@{self.image_id}"


def project_image(runtime: str) -> str:
    """The repository of a runtime's project-built image (its tag is the hash of its inputs)."""
    return f"{PROJECT_REPO}/{runtime}"


def is_project_image(ref: str) -> bool:
    return ref.startswith(f"{PROJECT_REPO}/")


def images_dir() -> Path:
    path = cache_root() / "images"
    path.mkdir(parents=True, exist_ok=True)
    return path


def base_tag() -> str:
    digest = hashlib.sha256(BASE_SCRIPT.read_bytes())
    digest.update(json.dumps({k: os.environ.get(k, "") for k in BASE_ENV}, sort_keys=True).encode())
    return f"{project_image('base')}:{digest.hexdigest()[:16]}"


def build_args() -> dict[str, str]:
    """Build arguments passed through from the environment (a company's package index for pip)."""
    index = os.environ.get("SERVING_EVAL_PIP_INDEX_URL")
    return {"PIP_INDEX_URL": index} if index else {}


def docker_client(timeout_s: int = BUILD_TIMEOUT_S):
    """A client with a long read timeout (a build step may print nothing for minutes)."""
    return engine_client(timeout_s=timeout_s)


def _image_id(client, ref: str) -> str | None:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(ref).id
    except ImageNotFound:
        return None


def _locked(name: str):
    lock = open(images_dir() / f"{name}.lock", "w")  # noqa: SIM115 - closed by the caller's `with`
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def ensure_base(client=None, log=print) -> ImageRef:
    """The project's Debian base image, made with debootstrap when this engine lacks it."""
    client = client or docker_client()
    tag = base_tag()
    image_id = _image_id(client, tag)
    if image_id:
        return ImageRef(tag, image_id, "project")
    with _locked("base"):
        image_id = _image_id(client, tag)
        if image_id:
            return ImageRef(tag, image_id, "project")
        for tool in ("debootstrap", "docker"):
            if shutil.which(tool) is None:
                raise RuntimeBuildError(f"images: building the base {tag} needs `{tool}` (Debian: apt-get install "
                                        "debootstrap docker.io; `make engine` installs both)")
        log(f"images: building the base image {tag} with debootstrap (about a minute)")
        started = time.monotonic()
        proc = subprocess.run([str(BASE_SCRIPT), tag], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeBuildError(f"images: {BASE_SCRIPT.name} {tag} failed (rc {proc.returncode}):\n"
                                    f"{(proc.stdout + proc.stderr)[-3000:]}")
        build_s = time.monotonic() - started
        log(f"images: base {tag} built in {build_s:.0f} s")
        return ImageRef(tag, _image_id(client, tag) or "", "project", built_now=True, build_s=build_s)


def image_tag(runtime: str, client=None, log=print) -> tuple[str, dict[str, Path], ImageRef, dict[str, str]]:
    """(tag, context files, base, build args) of the runtime's image as the repository and host are now. An image
    with a venv builds on the builder (built first when missing); the builder takes the pip index option."""
    base = ensure_base(client, log)
    files = context_files(runtime, log)
    args = {"BASE_IMAGE": base.ref}
    if runtime == BUILDER:
        args.update(build_args())
    elif runtime not in NO_VENV:
        args["BUILDER_IMAGE"] = ensure_image(BUILDER, client, log).ref
    return f"{project_image(runtime)}:{inputs_sha256(files, base.image_id, args)[:16]}", files, base, args


def ensure_image(runtime: str, client=None, log=print) -> ImageRef:
    """The runtime's project image, built first when no image of these exact inputs exists on the engine."""
    client = client or docker_client()
    tag, files, base, args = image_tag(runtime, client, log)
    image_id = _image_id(client, tag)
    if image_id:
        return ImageRef(tag, image_id, "project")
    with _locked(runtime):
        image_id = _image_id(client, tag)
        if image_id:
            return ImageRef(tag, image_id, "project")
        started = time.monotonic()
        log(f"images: building {tag} from docker/{runtime}/ on {base.ref}")
        _build(runtime, tag, files, args)
        build_s = time.monotonic() - started
        log(f"images: {tag} built in {build_s:.0f} s")
        return ImageRef(tag, _image_id(client, tag) or "", "project", built_now=True, build_s=build_s)


def _build(runtime: str, tag: str, files: dict[str, Path], args: dict[str, str]) -> None:
    client = docker_client(BUILD_TIMEOUT_S)  # its own client: a build step may print nothing for minutes
    log_path = images_dir() / f"{tag.replace('/', '_').replace(':', '-')}.build.log"
    with tempfile.TemporaryDirectory(prefix=f"serving-eval-image-{runtime}-") as context:
        for name, source in files.items():
            target = Path(context) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)  # no copy of a large wheel where a hard link works
            except OSError:
                shutil.copy2(source, target)
        for folder in ("wheels", "ca", "app", "runtime-wheels"):  # COPY needs the folders even when empty
            (Path(context) / folder).mkdir(exist_ok=True)
            (Path(context) / folder / ".keep").touch()
        error = None
        with open(log_path, "w") as log_file:
            stream = client.api.build(path=context, tag=tag, buildargs=args, rm=True, forcerm=True, pull=False,
                                      decode=True, labels={LABEL_RUNTIME: runtime, LABEL_INPUTS: tag.split(":")[-1]})
            for chunk in stream:
                if "stream" in chunk:
                    log_file.write(chunk["stream"])
                if "error" in chunk:
                    error = chunk["error"]
                    log_file.write(f"ERROR: {error}\n")
    if error:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeBuildError(f"images: building {tag} failed: {error.strip()}\nbuild log {log_path}, tail:\n{tail}")


# --- official images ---------------------------------------------------------------------------------------------

def official_image(ref: str, client=None, pull_timeout_s: int = PULL_TIMEOUT_S) -> ImageRef:
    """An official image on this engine, pulled first when a registry serves it; ImageUnavailable otherwise."""
    from docker.errors import DockerException

    client = client or docker_client(timeout_s=pull_timeout_s)
    image_id = _image_id(client, ref)
    if image_id:
        return ImageRef(ref, image_id, "official")
    try:
        image = client.images.pull(ref)
    except (DockerException, OSError) as exc:
        raise ImageUnavailable(f"needs the official image {ref}, which is not on this engine and could not be "
                               f"pulled (no registry serves it here: {str(exc)[:300]})") from exc
    return ImageRef(ref, image.id, "official")


@lru_cache(maxsize=32)
def official_unavailable_reason(ref: str) -> str | None:
    """Why the official image `ref` cannot be had here (no engine, or no registry), or None. Remembered for the
    life of the process: one failed pull per image, not one per cell."""
    try:
        official_image(ref)
    except ServerStartError as exc:  # ImageUnavailable, or no engine at all (LauncherUnavailable)
        return str(exc)
    return None


def resolve(ref: str, runtime: str, client=None, log=print) -> ImageRef:
    """The image a container of `ref` runs: a project image (built or reused) or an official one."""
    if is_project_image(ref):
        return ensure_image(runtime, client, log)
    return official_image(ref, client)


def remove_stale(client=None, keep: set[str] | None = None, log=print, keep_ids: set[str] | None = None) -> list[str]:
    """Remove project images (serving-eval/*) whose tag is not current (`keep`: the current tags), but never one
    whose id is in `keep_ids` (what a regression reference still runs on, tasks/regress/night_duets.py)."""
    client = client or docker_client()
    removed = []
    for image in client.images.list(filters={"label": LABEL_RUNTIME}):
        if any(t in (keep or set()) for t in image.tags) or image.id in (keep_ids or set()):
            continue
        for tag in image.tags:
            if is_project_image(tag):
                client.images.remove(tag)
                removed.append(tag)
                log(f"images: removed stale {tag}")
    return removed


def compose_env(log=print) -> dict[str, str]:
    """The deployment's images built or reused, as docker/compose.yaml's variables (name -> image tag)."""
    client = docker_client()
    env = {}
    for name, variable in COMPOSE_VARS.items():
        image = ensure_image(name, client, log=log)
        how = f"built in {image.build_s:.0f} s" if image.built_now else "reused, nothing built"
        log(f"image {name}: {image.ref}: {how}")
        env[variable] = image.ref
    return env
