"""What goes into an image's build: the context assembled for each image, never the repository as a whole, and
the hash that tags it.

    Dockerfile, requirements.txt    the same requirements file the process launcher's venv is built from
    <the image's other files>       entry scripts (docker/<runtime>/*.py ...)
    app/                            the repository's code, for images whose entry points import it (the
                                    converters: tasks/, models/; airflow: the whole project), at its own paths
    wheels/                         the host's wheels of HOST_WHEELS (torch's CPU build: inside a build, pip sees
                                    only the public index, whose torch is a multi-GB CUDA build), which the builder
                                    installs into the venv (runtime-wheels/ for airflow, whose workers build
                                    runtime venvs later and only carry them)
    ca/                             extra CA certificates (the CA build option): the builder's and airflow's only

The CA option (`SERVING_EVAL_CA_CERTS`): `host` (the default) takes the host's extra CA certificates, those
installed with update-ca-certificates under /usr/local/share/ca-certificates (a TLS-inspecting proxy, as in many
companies: without them pip fails with CERTIFICATE_VERIFY_FAILED); a path names a `.crt` file or a folder of them;
`none` adds nothing. The builder image trusts them for pip; the runtime images built on it do not carry them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tasks.core.errors import ConfigError, RuntimeBuildError
from tasks.core.paths import DOCKER_DIR, REPO_ROOT, cache_root, runtime_home
from tasks.runtimes.venvs import available_runtimes, requirements_path

CA_ENV = "SERVING_EVAL_CA_CERTS"
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
# requirement name -> text its wheel's file name must hold: these wheels come from the host's pip into wheels/
HOST_WHEELS = {"torch": "+cpu"}
SKIP_CONTEXT = ("README.md", "__pycache__")
CONVERTERS = ("convert-torch", "convert-tf", "convert-tensorrt")
# The repository's files an image's entry point imports, under app/ at their own paths (so part of its hash):
# folders (only .py and .yaml files) and single files.
APP_FOLDERS = {**{runtime: ("tasks", "models") for runtime in CONVERTERS},
               "airflow": ("tasks", "models", "dags", "plugins", "suites")}
APP_FILES = {**{runtime: (f"docker/{runtime}/convert.py",) for runtime in CONVERTERS}, "airflow": ("requirements.txt",)}
# every file of these folders (entry scripts, configs, the report's templates), not only .py/.yaml
APP_WHOLE = {"airflow": ("docker", "tasks/report/templates")}
APP_SUFFIXES = (".py", ".yaml")
# Images that carry the host wheels every runtime pins without installing them (their workers build the runtimes'
# venvs at run time: converters, launcher=process servers; pip finds them through PIP_FIND_LINKS).
RUNTIME_WHEELS = ("airflow",)
ROOT_FILES = {"airflow": ("requirements.txt",)}  # an image whose requirements.txt is the repository's, not its folder's
WITH_CA = ("builder", "airflow")  # the builder's pip, and airflow's workers' pip at run time
NO_VENV = ("builder", "postgres", "redis")  # images with no requirements.txt of their own: no host wheels
_REQ_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)")


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_file_sha256(path: Path) -> str:
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


def pinned_requirements(runtime: str) -> dict[str, str]:
    """name -> pinned version of each `name==version` line of the runtime's requirements file."""
    pins = {}
    for line in requirements_path(runtime).read_text().splitlines():
        match = _REQ_LINE.match(line)
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def host_wheels(image: str, log=print) -> list[Path]:
    """The host's wheels of the image's HOST_WHEELS requirements (for airflow: every runtime's), fetched once by the
    host's pip (its own settings: a local wheel folder, a mirror) into <cache>/wheels/ and reused."""
    wheels: list[Path] = []
    if image in NO_VENV or (image not in RUNTIME_WHEELS and image not in available_runtimes()):
        return wheels
    pins = pinned_requirements(image) if image not in RUNTIME_WHEELS else {
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
                                  capture_output=True, text=True, timeout=3600)
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


def _app_files(image: str) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for name in (*APP_FOLDERS.get(image, ()), *APP_WHOLE.get(image, ())):
        whole = name in APP_WHOLE.get(image, ())
        files.update({f"app/{p.relative_to(REPO_ROOT).as_posix()}": p for p in sorted((REPO_ROOT / name).rglob("*"))
                      if p.is_file() and (whole or p.suffix in APP_SUFFIXES) and "__pycache__" not in p.parts
                      and not p.name.startswith("compose")})  # the deployment's files are not the image's
    files.update({f"app/{name}": REPO_ROOT / name for name in APP_FILES.get(image, ())})
    return files


def context_files(image: str, log=print) -> dict[str, Path]:
    """Name inside the build context -> file on the host, for the image of docker/<image>/."""
    folder = runtime_home(image)
    if not (folder / "Dockerfile").is_file():
        raise ConfigError("runtime", image, f"has no Dockerfile under {folder}; images exist for "
                                            f"{sorted(p.parent.name for p in DOCKER_DIR.glob('*/Dockerfile'))}")
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
             if p.is_file() and not any(part in SKIP_CONTEXT for part in p.relative_to(folder).parts)}
    files.update(_app_files(image))
    files.update({name: REPO_ROOT / name for name in ROOT_FILES.get(image, ())})
    wheel_dir = "runtime-wheels" if image in RUNTIME_WHEELS else "wheels"
    files.update({f"{wheel_dir}/{w.name}": w for w in host_wheels(image, log)})
    if image in WITH_CA:
        files.update({f"ca/{i:02d}-{p.name}": p for i, p in enumerate(ca_files())})
    return files


def inputs_sha256(files: dict[str, Path], base_id: str, buildargs: dict[str, str]) -> str:
    """What tags an image: every file of its context (names and bytes), its base image's id, its build arguments
    (the builder's tag among them, itself a hash of its inputs)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{cached_file_sha256(files[name])}\n".encode())
    digest.update(f"base\0{base_id}\n".encode())
    digest.update(json.dumps(buildargs, sort_keys=True).encode())
    return digest.hexdigest()
