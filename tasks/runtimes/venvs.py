"""Runtime environments: one per `docker/<runtime>/` folder, built as a venv for local runs.

In production a runtime is the container image built from `docker/<runtime>/Dockerfile`; locally the same
`requirements.txt` is installed into a venv cached outside the repository, keyed by the file's SHA-256 and the
builder (BUILDERS), so an unchanged runtime is never reinstalled. Builders on one host take a file lock, so two
tasks that need the same runtime at once build it once.

The builder is uv (the orchestrator's requirements pin it): its cache (`<cache>/uv`, on the venvs' file system)
holds each wheel unpacked once, and every venv hard-links its files from there, so six runtimes share one unpacked
torch, and a venv whose wheels are cached builds in seconds. uv reads no pip configuration, so the package sources
pip is configured with (index, extra indexes, find-links, constraints, certificate) are handed to it
(`pip_sources`), and it picks the best match across them as pip does. A uv-built venv has no pip: a runtime's
identity is read from its distributions' metadata, with the installer left out (INSTALLER_PACKAGES). pip stays as
the second builder (BUILDERS): a regression reference recorded as pip-built is rebuilt as it ran.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tasks.core.errors import ConfigError, RuntimeBuildError
from tasks.core.paths import DOCKER_DIR, REPO_ROOT, cache_root, runtime_home

COMPLETE_MARKER = ".serving-eval-complete.json"
INSTALL_TIMEOUT_S = 1800
# How a venv is built: uv (every build now) or pip (the builder before the switch, kept to rebuild a regression
# reference recorded as pip-built exactly, and to prove both give one package set: tests/integration/
# test_runtime_identity.py). A record with no builder was built by pip.
BUILDERS = ("uv", "pip")
BUILDER = "uv"
INSTALLER_PACKAGES = ("pip",)  # what installs a runtime, not part of it: left out of its identity, here only
# pip's configuration keys that say where packages come from, and uv's option for each
PIP_SOURCE_OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
                      "find-links": "--find-links", "constraint": "--constraint"}
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
    builder: str = BUILDER

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
    return (venv_path(name, requirements_sha256(name)) / COMPLETE_MARKER).is_file()


def venv_path(name: str, requirements_sha: str, builder: str = BUILDER) -> Path:
    """Where the venv of `name` built from requirements with this SHA-256 by `builder` lies in the cache (pip's
    under the name it had before the switch, so those venvs serve a pip-built reference without a rebuild)."""
    if builder not in BUILDERS:
        raise ConfigError("runtime builder", builder, f"must be one of {list(BUILDERS)}")
    return cache_root() / "venvs" / (f"{name}-{requirements_sha[:16]}" + ("" if builder == "pip" else f"-{builder}"))


def venv_builder(runtime: dict) -> str | None:
    """Which builder made the venv a runtime record (a cell's `inputs.runtime`) ran in: pip when it names none;
    None for a container's runtime (its image, whatever built the venvs) or a record that names no launcher."""
    if runtime.get("launcher") != "process":
        return None
    return str(runtime.get("builder") or "pip").split()[0]


def ensure_runtime(name: str, log=print, requirements: Path | None = None, builder: str = BUILDER) -> RuntimeEnv:
    """Return the runtime's venv, building it first if the cache has no complete build of this file.

    `requirements`: another requirements file of this runtime (a regression reference's, kept in the store) to
    build from instead of docker/<name>/requirements.txt; its venv is cached by its own hash the same way.
    `builder`: "pip" rebuilds a reference as it was built before the switch to uv."""
    req = requirements or requirements_path(name)
    sha = hashlib.sha256(req.read_bytes()).hexdigest()
    venv_dir = venv_path(name, sha, builder)
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    marker = venv_dir / COMPLETE_MARKER
    if marker.is_file():
        return RuntimeEnv(name, venv_dir, sha, built_now=False, build_s=0.0, builder=builder)
    with open(venv_dir.with_name(venv_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another task may be building the same runtime right now
        if marker.is_file():
            return RuntimeEnv(name, venv_dir, sha, built_now=False, build_s=0.0, builder=builder)
        started = time.monotonic()
        shown = req.relative_to(REPO_ROOT) if req.is_relative_to(REPO_ROOT) else req
        log(f"runtime {name}: building venv {venv_dir} from {shown} with {builder}")
        shutil.rmtree(venv_dir, ignore_errors=True)  # a half-built venv from a crashed build
        made_by = _build_venv(venv_dir, req, builder)
        build_s = time.monotonic() - started
        marker.write_text(json.dumps({"runtime": name, "requirements_sha256": sha, "build_s": build_s,
                                      "builder": made_by, "packages": installed_packages(venv_dir)}))
        log(f"runtime {name}: built in {build_s:.1f} s")
        return RuntimeEnv(name, venv_dir, sha, built_now=True, build_s=build_s, builder=builder)


def runtime_packages(env: RuntimeEnv) -> dict[str, str]:
    """name -> version of every package installed in the runtime's venv but the installer, remembered in the
    venv's marker: the runtime's resolved identity, which a requirements file alone does not pin."""
    marker = env.venv_dir / COMPLETE_MARKER
    record = json.loads(marker.read_text()) if marker.is_file() else {}
    if "packages" not in record:
        record["packages"] = installed_packages(env.venv_dir)
        if marker.is_file():
            marker.write_text(json.dumps(record))
    return {k: v for k, v in record["packages"].items() if k not in INSTALLER_PACKAGES}  # a pip-built marker has pip


def runtime_builder(env: RuntimeEnv) -> str:
    """What built the runtime's venv, with its version ("uv 0.13.10"), as its marker recorded it."""
    marker = env.venv_dir / COMPLETE_MARKER
    record = json.loads(marker.read_text()) if marker.is_file() else {}
    return record.get("builder") or (uv_version() if env.builder == "uv" else "pip")


# Run by the venv's own interpreter: every distribution on its path (the standard library reads the metadata; no
# installer needed).
_LIST_DISTRIBUTIONS = ("import importlib.metadata as m, json; "
                       "print(json.dumps([[d.metadata['Name'], d.version] for d in m.distributions()]))")


def canonical_name(name: str) -> str:
    """A distribution's name as PEP 503 compares them ("zope.event", "Zope_Event" -> "zope-event"); pip's list
    wrote dots as they were, so records of before the switch name some packages otherwise."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages(venv_dir: Path) -> dict[str, str]:
    """name -> version of every distribution installed in the venv, the installer (INSTALLER_PACKAGES) left out:
    the same set whichever installer built it."""
    proc = subprocess.run([str(venv_dir / "bin" / "python"), "-I", "-c", _LIST_DISTRIBUTIONS],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeBuildError(f"listing the packages of {venv_dir.name} failed: {proc.stderr[-1000:]}")
    found = {canonical_name(name): version for name, version in json.loads(proc.stdout)}
    return {name: found[name] for name in sorted(found) if name not in INSTALLER_PACKAGES}


def uv_bin() -> str:
    """The uv binary of the orchestrator's environment (requirements.txt pins it)."""
    try:
        from uv import find_uv_bin
        return find_uv_bin()
    except (ImportError, FileNotFoundError) as exc:
        raise RuntimeBuildError(f"uv, which builds the runtime venvs, is not installed ({exc}): run `make venv` "
                                "(requirements.txt pins it)") from exc


@lru_cache(maxsize=1)
def uv_version() -> str:
    """uv's name and version: "uv 0.13.10"."""
    proc = subprocess.run([uv_bin(), "--version"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeBuildError(f"`uv --version` failed: {proc.stderr[-500:]}")
    return " ".join(proc.stdout.split()[:2])


@lru_cache(maxsize=1)
def pip_sources() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The package sources pip is configured with (its files and PIP_* variables, as `pip config list` merges
    them), as uv's options, and the environment that carries pip's certificate and timeout to uv."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          timeout=60)
    args: list[str] = []
    env: dict[str, str] = {}
    settings: dict[str, str] = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")  # later lines (the environment) win
    for key, option in PIP_SOURCE_OPTIONS.items():
        for value in shlex.split(settings.get(key, "")):
            args += [option, value]
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    if settings.get("default-timeout") or settings.get("timeout"):
        env["UV_HTTP_TIMEOUT"] = settings.get("default-timeout") or settings["timeout"]
    return tuple(args), tuple(sorted(env.items()))


def _base_python() -> str:
    # A venv made from inside another venv must start from the real interpreter, so runtimes do not
    # depend on the orchestrator's venv.
    return getattr(sys, "_base_executable", None) or sys.executable


def install_argv(python: Path, req: Path) -> tuple[list[str], dict[str, str]]:
    """uv's command that installs `req` into the environment of `python`, and the environment it runs with: pip's
    package sources, the best match across them (as pip picks), one cache for every venv on the venvs' file
    system (hard links need one), never a Python download."""
    sources, source_env = pip_sources()
    argv = [uv_bin(), "pip", "install", "--quiet", "--python", str(python), "--index-strategy", "unsafe-best-match",
            *sources, "-r", str(req)]
    env = {**os.environ, "UV_CACHE_DIR": str(cache_root() / "uv"), "UV_LINK_MODE": "hardlink",
           "UV_PYTHON_DOWNLOADS": "never", **dict(source_env)}
    return argv, env


def _build_venv(venv_dir: Path, req: Path, builder: str) -> str:
    """Build the venv with `builder`; return what built it, with its version."""
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = venv_dir.parent / f"{venv_dir.name}.build.log"
    python = venv_dir / "bin" / "python"
    if builder == "pip":  # the orchestrator's pip installs into a venv with no pip (and no seeded setuptools)
        env = dict(os.environ)
        steps = [[_base_python(), "-m", "venv", "--without-pip", str(venv_dir)],
                 [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "-r", str(req)]]
    else:
        install, env = install_argv(python, req)
        steps = [[uv_bin(), "venv", "--quiet", "--python", _base_python(), str(venv_dir)], install]
    with open(log_path, "w") as log_file:
        for argv in steps:
            log_file.write(f"$ {shlex.join(argv)}\n")
            log_file.flush()
            proc = subprocess.run(argv, stdout=log_file, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S,
                                  env=env)
            if proc.returncode != 0:
                shutil.rmtree(venv_dir, ignore_errors=True)
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeBuildError(f"building runtime venv {venv_dir.name} with {builder} failed at "
                                        f"`{shlex.join(argv[1:3])}`:\n{tail}")
    if builder == "uv":
        return uv_version()
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    return " ".join(pip.stdout.split()[:2]) or "pip"


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


if __name__ == "__main__":  # `make venv`: the orchestrator's own requirements, installed as the runtimes' are
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tasks.runtimes.venvs PYTHON REQUIREMENTS")
    argv, env = install_argv(Path(sys.argv[1]), Path(sys.argv[2]))
    sys.exit(subprocess.run(argv, env=env, timeout=INSTALL_TIMEOUT_S).returncode)
