"""Container images: the project's Debian base and one image per runtime, tagged by what went into them, reused.

    serving-eval/base:<hash>       docker/base/build-base.sh: debootstrap --variant=minbase + Python 3.11, imported
    serving-eval/<runtime>:<hash>  docker/<runtime>/Dockerfile FROM that base (build argument BASE_IMAGE)

A runtime image builds from a context assembled here, never from the repository as a whole:

    Dockerfile, requirements.txt    the same requirements file the process launcher's venv is built from
    <the runtime's other files>     entry scripts (docker/<runtime>/*.py ...)
    tasks/, models/                 only for the converters, whose entry points import them
    wheels/                         the host's wheels of HOST_WHEELS (torch's CPU build: inside a build, pip sees
                                    only the public index, whose torch is a multi-GB CUDA build)
    ca/                             extra CA certificates (the CA build option, `SERVING_EVAL_CA_CERTS`)

The tag is the SHA-256 of every file of that context (names and bytes), the base image's id and the build
arguments, so an unchanged runtime is never rebuilt: like the runtime venvs, a second run builds nothing. Builds
of one runtime take a file lock, so two processes that need the same image build it once.

Official images (NVIDIA's Triton, TorchServe's, TensorFlow Serving's) are not built: they are used as the
registry serves them, when one does (`official_image`).

The deployment's images (docker/compose.yaml) build the same way: `airflow` (docker/airflow/: Airflow with this
project, from the repository's requirements.txt and code), `postgres` and `redis` (Debian's packages on the base).
`python -m tasks.cli images compose-env` builds or reuses them and writes their tags into docker/compose.env.

The CA option (`SERVING_EVAL_CA_CERTS`): `host` (the default) copies the host's extra CA certificates, those
installed with update-ca-certificates under /usr/local/share/ca-certificates, into the build (a TLS-inspecting
proxy, as in many companies: without them pip fails with CERTIFICATE_VERIFY_FAILED); a path names a `.crt`
file or a folder of them; `none` adds nothing. They are used by the build stage only (pip); the runtime image
does not carry them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tasks.core.errors import ConfigError, RuntimeBuildError, ServerStartError
from tasks.core.paths import DOCKER_DIR, REPO_ROOT, cache_root
from tasks.runtimes.docker_engine import docker_client as engine_client
from tasks.runtimes.venvs import available_runtimes, requirements_path

PROJECT_REPO = "serving-eval"
BASE_SCRIPT = DOCKER_DIR / "base" / "build-base.sh"
BASE_ENV = ("DEBIAN_SUITE", "DEBIAN_MIRROR")  # build-base.sh settings: part of the base image's hash
CA_ENV = "SERVING_EVAL_CA_CERTS"
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
# requirement name -> text its wheel's file name must hold: these wheels come from the host's pip into wheels/
HOST_WHEELS = {"torch": "+cpu"}
# The runtimes that serve (their images are what `make images` builds); TF Serving has only its official image.
SERVING_RUNTIMES = ("triton", "torchserve", "bentoml", "kserve", "custom")
SKIP_CONTEXT = ("README.md", "__pycache__")
# Repository folders a runtime's entry point imports (the converters run tasks.* and models.* builders): part of
# its context, so of its hash.
EXTRA_CONTEXT = {runtime: ("tasks", "models") for runtime in ("convert-torch", "convert-tf", "convert-tensorrt")}
EXTRA_SUFFIXES = (".py", ".yaml")
# The deployment's images (docker/compose.yaml): Airflow with the project (its context: the repository's
# requirements.txt, code, DAGs, plugins, catalogue, suites and every runtime's folder), PostgreSQL and Redis from
# Debian's packages. They are not runtimes: no docker/<name>/requirements.txt, no host wheels.
DEPLOYMENT_IMAGES = ("airflow", "postgres", "redis")
EXTRA_CONTEXT["airflow"] = ("tasks", "models", "dags", "plugins", "suites")
EXTRA_WHOLE = {"airflow": ("docker",)}  # every file of these folders (entry scripts, configs), not only .py/.yaml
ROOT_FILES = {"airflow": ("requirements.txt",)}
# Images whose workers build the runtimes' venvs at run time (converters, launcher=process servers): they carry the
# host wheels every runtime pins (torch's CPU build), found by pip through PIP_FIND_LINKS.
RUNTIME_WHEELS = ("airflow",)
# The variables of docker/compose.yaml that name the deployment's images (python -m tasks.cli images compose-env)
COMPOSE_VARS = {"airflow": "SERVING_EVAL_AIRFLOW_IMAGE", "postgres": "SERVING_EVAL_POSTGRES_IMAGE",
                "redis": "SERVING_EVAL_REDIS_IMAGE"}
LABEL_INPUTS = "serving-eval.inputs-sha256"
LABEL_RUNTIME = "serving-eval.runtime"
BUILD_TIMEOUT_S = 3600
PULL_TIMEOUT_S = 120
KINDS = ("project", "official")
_REQ_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)")


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


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """A file's SHA-256, remembered beside large files (wheels) keyed by size and mtime."""
    stat = path.stat()
    if stat.st_size < 1 << 24:
        return _sha256_file(path)
    sidecar = path.with_name(path.name + ".sha256.json")
    key = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if sidecar.is_file():
        saved = json.loads(sidecar.read_text())
        if {k: saved.get(k) for k in key} == key:
            return saved["sha256"]
    sha = _sha256_file(path)
    sidecar.write_text(json.dumps({**key, "sha256": sha}))
    return sha


# --- the CA build option ------------------------------------------------------------------------------------

def ca_files(option: str | None = None) -> list[Path]:
    """The extra CA certificates a build adds, by the CA option (`$SERVING_EVAL_CA_CERTS`, default `host`)."""
    option = option if option is not None else os.environ.get(CA_ENV, "host")
    if option == "none":
        return []
    if option == "host":
        return sorted(p for p in HOST_CA_DIR.rglob("*.crt") if p.is_file()) if HOST_CA_DIR.is_dir() else []
    path = Path(option)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.rglob("*.crt") if p.is_file())
        if found:
            return found
    raise ConfigError(CA_ENV, option, "must be 'host', 'none', a .crt file, or a folder holding .crt files")


# --- host wheels ----------------------------------------------------------------------------------------------

def pinned_requirements(runtime: str) -> dict[str, str]:
    """name -> pinned version of each `name==version` line of the runtime's requirements file."""
    pins = {}
    for line in requirements_path(runtime).read_text().splitlines():
        match = _REQ_LINE.match(line)
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def host_wheels(runtime: str, log=print) -> list[Path]:
    """The host's wheels of the runtime's HOST_WHEELS requirements, fetched once by the host's pip (its own
    settings: a local wheel folder, a mirror) into <cache>/wheels/ and reused."""
    wheels = []
    if runtime in DEPLOYMENT_IMAGES and runtime not in RUNTIME_WHEELS:
        return wheels
    pins = pinned_requirements(runtime) if runtime not in RUNTIME_WHEELS else {
        name: version for r in available_runtimes() for name, version in pinned_requirements(r).items()}
    for name, version in sorted(pins.items()):
        if name not in HOST_WHEELS:
            continue
        folder = cache_root() / "wheels" / f"{name}-{version}"
        found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        if not found:
            folder.mkdir(parents=True, exist_ok=True)
            log(f"images: fetching the host's wheel of {name}=={version} with the host's pip")
            proc = subprocess.run([sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps",
                                   "--only-binary=:all:", "--quiet", "-d", str(folder)],
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            found = sorted(folder.glob("*.whl"))
            if proc.returncode != 0 or not found:
                raise RuntimeBuildError(f"images: pip download {name}=={version} failed (rc {proc.returncode}):\n"
                                        f"{(proc.stdout + proc.stderr)[-2000:]}")
        wheel = found[-1]
        if HOST_WHEELS[name] not in wheel.name:
            raise ConfigError(f"host wheel of {name}=={version}", wheel.name,
                              f"must be the build marked {HOST_WHEELS[name]!r} (the CPU build): point the host's pip "
                              "at a source of it (PIP_FIND_LINKS or PIP_EXTRA_INDEX_URL), then delete "
                              f"{folder} and build again")
        wheels.append(wheel)
    return wheels


# --- build contexts and tags ------------------------------------------------------------------------------------

def context_files(runtime: str, log=print) -> dict[str, Path]:
    """Name inside the build context -> file on the host, for the runtime's image."""
    folder = DOCKER_DIR / runtime
    if not (folder / "Dockerfile").is_file():
        raise ConfigError("runtime", runtime, f"has no Dockerfile under {folder}; images exist for "
                                              f"{sorted(p.parent.name for p in DOCKER_DIR.glob('*/Dockerfile'))}")
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
             if p.is_file() and not any(part in SKIP_CONTEXT for part in p.relative_to(folder).parts)}
    for name in (*EXTRA_CONTEXT.get(runtime, ()), *EXTRA_WHOLE.get(runtime, ())):
        root = REPO_ROOT / name
        whole = name in EXTRA_WHOLE.get(runtime, ())
        files.update({p.relative_to(REPO_ROOT).as_posix(): p for p in sorted(root.rglob("*"))
                      if p.is_file() and (whole or p.suffix in EXTRA_SUFFIXES) and "__pycache__" not in p.parts
                      and not p.name.startswith("compose")})  # the deployment's files are not the image's
    files.update({name: REPO_ROOT / name for name in ROOT_FILES.get(runtime, ())})
    files.update({f"wheels/{w.name}": w for w in host_wheels(runtime, log)})
    files.update({f"ca/{i:02d}-{p.name}": p for i, p in enumerate(ca_files())})
    return files


def inputs_sha256(files: dict[str, Path], base_id: str, buildargs: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{file_sha256(files[name])}\n".encode())
    digest.update(f"base\0{base_id}\n".encode())
    digest.update(json.dumps(buildargs, sort_keys=True).encode())
    return digest.hexdigest()


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
    """(tag, context files, base, build args) of the runtime's image as the repository and host are now."""
    base = ensure_base(client, log)
    files = context_files(runtime, log)
    args = {"BASE_IMAGE": base.ref, **build_args()}
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
        for folder in ("wheels", "ca"):  # COPY needs the folders even when empty
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


def remove_stale(client=None, keep: set[str] | None = None, log=print) -> list[str]:
    """Remove project images (serving-eval/*) whose tag is not current (`keep`: the current tags)."""
    client = client or docker_client()
    removed = []
    for image in client.images.list(filters={"label": LABEL_RUNTIME}):
        if any(t in (keep or set()) for t in image.tags):
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
