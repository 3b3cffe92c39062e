"""Runtime environments: one per `docker/<runtime>/` folder, built as a venv for local runs.

In production a runtime is the container image built from `docker/<runtime>/Dockerfile`; locally the same
`requirements.txt` is installed into a venv cached outside the repository, keyed by the file's SHA-256, so an
unchanged runtime is never reinstalled. Builders on one host take a file lock, so two tasks that need the
same runtime at once build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import ConfigError, RuntimeBuildError
from tasks.core.paths import DOCKER_DIR, REPO_ROOT, cache_root, runtime_home

COMPLETE_MARKER = ".serving-eval-complete.json"
PIP_INSTALL_TIMEOUT_S = 1800
CREDENTIAL_PREFIXES = ("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AWS_", "AIRFLOW__DATABASE__", "AIRFLOW__CELERY__")


SKIP_FILES = ("README.md", ".complete")  # not a runtime's files: its readme, a stored snapshot's marker


def folder_files(folder: Path) -> dict[str, Path]:
    """Relative name -> file of a runtime folder (docker/<runtime>/ or a snapshot of it), __pycache__ and the
    names in SKIP_FILES left out: what a runtime's files hash counts."""
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.name not in SKIP_FILES}


def files_sha256(folder: Path, suffixes: tuple[str, ...] = ()) -> str:
    """One hash of a folder's files (relative names and bytes); with `suffixes`, only files ending so."""
    digest = hashlib.sha256()
    for name, path in folder_files(folder).items():
        if not suffixes or path.suffix in suffixes:
            digest.update(f"{name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def available_runtimes() -> list[str]:
    return sorted(p.name for p in DOCKER_DIR.iterdir() if (p / "requirements.txt").is_file())


@dataclass(frozen=True)
class RuntimeEnv:
    """A built runtime: its venv, and whether this call built it or found it in the cache."""

    name: str
    venv_dir: Path
    requirements_sha256: str
    built_now: bool
    build_s: float

    @property
    def python(self) -> Path:
        return self.venv_dir / "bin" / "python"

    @property
    def bin_dir(self) -> Path:
        return self.venv_dir / "bin"


def requirements_path(name: str) -> Path:
    path = runtime_home(name) / "requirements.txt"
    if not path.is_file():
        raise ConfigError("runtime", name, f"must be one of {available_runtimes()}")
    return path


def requirements_sha256(name: str) -> str:
    return hashlib.sha256(requirements_path(name).read_bytes()).hexdigest()


def runtime_built(name: str) -> bool:
    """Whether the cache holds a complete venv of the runtime's requirements (a run would not build it)."""
    sha = requirements_sha256(name)
    return (cache_root() / "venvs" / f"{name}-{sha[:16]}" / COMPLETE_MARKER).is_file()


def ensure_runtime(name: str, log=print, requirements: Path | None = None) -> RuntimeEnv:
    """Return the runtime's venv, building it first if the cache has no complete build of this file.

    `requirements`: another requirements file of this runtime (a regression reference's, kept in the store) to
    build from instead of docker/<name>/requirements.txt; its venv is cached by its own hash the same way."""
    req = requirements or requirements_path(name)
    sha = hashlib.sha256(req.read_bytes()).hexdigest()
    venvs = cache_root() / "venvs"
    venvs.mkdir(parents=True, exist_ok=True)
    venv_dir = venvs / f"{name}-{sha[:16]}"
    marker = venv_dir / COMPLETE_MARKER
    if marker.is_file():
        return RuntimeEnv(name, venv_dir, sha, built_now=False, build_s=0.0)
    with open(venvs / f"{name}-{sha[:16]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another task may be building the same runtime right now
        if marker.is_file():
            return RuntimeEnv(name, venv_dir, sha, built_now=False, build_s=0.0)
        started = time.monotonic()
        shown = req.relative_to(REPO_ROOT) if req.is_relative_to(REPO_ROOT) else req
        log(f"runtime {name}: building venv {venv_dir} from {shown}")
        shutil.rmtree(venv_dir, ignore_errors=True)  # a half-built venv from a crashed build
        _build_venv(venv_dir, req)
        build_s = time.monotonic() - started
        marker.write_text(json.dumps({"runtime": name, "requirements_sha256": sha, "build_s": build_s,
                                      "packages": _installed_packages(venv_dir)}))
        log(f"runtime {name}: built in {build_s:.1f} s")
        return RuntimeEnv(name, venv_dir, sha, built_now=True, build_s=build_s)


def runtime_packages(env: RuntimeEnv) -> dict[str, str]:
    """name -> version of every package installed in the runtime's venv (what `pip list` reports), remembered in
    the venv's marker: the runtime's resolved identity, which a requirements file alone does not pin."""
    marker = env.venv_dir / COMPLETE_MARKER
    record = json.loads(marker.read_text()) if marker.is_file() else {}
    if "packages" not in record:
        record["packages"] = _installed_packages(env.venv_dir)
        if marker.is_file():
            marker.write_text(json.dumps(record))
    return dict(record["packages"])


def _installed_packages(venv_dir: Path) -> dict[str, str]:
    proc = subprocess.run([str(venv_dir / "bin" / "python"), "-m", "pip", "list", "--format=json",
                           "--disable-pip-version-check"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeBuildError(f"pip list in {venv_dir.name} failed: {proc.stderr[-1000:]}")
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(proc.stdout)}


def _base_python() -> str:
    # A venv made from inside another venv must start from the real interpreter, so runtimes do not
    # depend on the orchestrator's venv.
    return getattr(sys, "_base_executable", None) or sys.executable


def _build_venv(venv_dir: Path, req: Path) -> None:
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = venv_dir.parent / f"{venv_dir.name}.build.log"
    steps = [
        [_base_python(), "-m", "venv", str(venv_dir)],
        [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(req)],
    ]
    with open(log_path, "w") as log_file:
        for argv in steps:
            log_file.write(f"$ {' '.join(argv)}\n")
            log_file.flush()
            proc = subprocess.run(argv, stdout=log_file, stderr=subprocess.STDOUT, timeout=PIP_INSTALL_TIMEOUT_S)
            if proc.returncode != 0:
                shutil.rmtree(venv_dir, ignore_errors=True)
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeBuildError(f"building runtime venv {venv_dir.name} failed at {argv[2:]}:\n{tail}")


def runtime_env_vars(env: RuntimeEnv, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a process in this runtime: its venv first on PATH, the repository importable, and none of
    the orchestrator's credentials (Airflow connections and variables, AWS keys): servers and converters never
    need them, and a server that prints its environment must not publish a secret in its log."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "VIRTUAL_ENV", *CREDENTIAL_PREFIXES)) and "SECRET" not in k.upper()}
    base["PATH"] = f"{env.bin_dir}{os.pathsep}{base.get('PATH', '')}"
    base["VIRTUAL_ENV"] = str(env.venv_dir)
    base["PYTHONPATH"] = str(REPO_ROOT)
    base["PYTHONUNBUFFERED"] = "1"
    base.update(extra or {})
    return base
