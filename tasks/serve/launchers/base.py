"""The launcher interface: start a server described by a RunSpec, stop it, sweep leftovers."""

from __future__ import annotations

import json
import os
import shutil
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tasks.core.names import safe_component
from tasks.core.paths import cache_root
from tasks.runtimes.proctree import create_time_of, is_running
from tasks.serve.base import RunSpec


@dataclass(frozen=True)
class LaunchHandle:
    """Everything a teardown in another process needs to find and end a started server."""

    launcher: str
    run_id: str
    cell_id: str
    pid: int = 0
    pgid: int = 0
    create_time: float = 0.0  # when pid started (tasks.runtimes.proctree.create_time_of): guards against PID reuse
    container_id: str = ""
    ports: dict[str, int] = field(default_factory=dict)
    workdir: str = ""
    log_path: str = ""
    shm_before: tuple[str, ...] = ()  # /dev/shm entries that existed before start (not ours to remove)
    cleanup_globs: tuple[str, ...] = ()  # RunSpec.cleanup_globs of the server
    cleanup_before: tuple[str, ...] = ()  # entries matching them before start (not ours to remove)
    owner_pid: int = 0  # the process that started the server (an Airflow task): alive means not a leftover
    owner_create_time: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> LaunchHandle:
        tuples = {k: tuple(data.get(k, ())) for k in ("shm_before", "cleanup_globs", "cleanup_before")}
        return cls(**{**data, **tuples})


@dataclass(frozen=True)
class RuntimeSize:
    """The size of what a server ran from (its container image, or its runtime venv), or None and why not."""

    size_bytes: int | None
    what: str  # what was measured ("image serving-eval/custom:... on the engine"), or why nothing was

    def to_dict(self) -> dict:
        return {"size_bytes": self.size_bytes, "what": self.what}


def handles_dir(run_id: str | None = None) -> Path:
    """Where live handles are recorded, so a crashed run's servers can be swept later."""
    root = cache_root() / "handles"
    return root / safe_name(run_id) if run_id else root


def safe_name(text: str) -> str:
    return safe_component(text)


def record_handle(handle: LaunchHandle) -> Path:
    """Write the handle where a sweep finds it, stamped with the process that started the server."""
    if not handle.owner_pid:
        handle = replace(handle, owner_pid=os.getpid(), owner_create_time=create_time_of(os.getpid()))
    directory = handles_dir(handle.run_id)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{safe_name(handle.cell_id)}-{handle.pid or handle.container_id[:12]}.json"
    path.write_text(json.dumps(handle.to_dict()))
    return path


def forget_handle(handle: LaunchHandle) -> None:
    directory = handles_dir(handle.run_id)
    (directory / f"{safe_name(handle.cell_id)}-{handle.pid or handle.container_id[:12]}.json").unlink(missing_ok=True)
    try:
        directory.rmdir()
    except OSError:
        pass  # other handles of the run are still live


def owner_alive(handle: LaunchHandle) -> bool:
    """True while the process that started the server still runs (so the server is not a leftover)."""
    return is_running(handle.owner_pid, handle.owner_create_time)


def recorded_handles(run_id: str | None = None) -> list[LaunchHandle]:
    root = handles_dir(run_id)
    if not root.exists():
        return []
    return [LaunchHandle.from_dict(json.loads(p.read_text())) for p in sorted(root.rglob("*.json"))]


class Launcher(ABC):
    name: str

    def prepare(self, spec: RunSpec) -> None:
        """Make what runs the server ready (a venv, an image) before its start-up is timed; may take minutes
        the first time, nothing once built."""
        return None

    @abstractmethod
    def start(self, spec: RunSpec, *, run_id: str, cell_id: str, workdir: Path, log_path: Path,
              cpus: tuple[int, ...] = (), memory: str | None = None) -> LaunchHandle:
        """Start the server detached from the caller on the CPU set `cpus` (empty: any) with the memory limit
        `memory` (where the launcher can apply one); return at once with its handle."""

    @abstractmethod
    def runtime_label(self, spec: RunSpec) -> str:
        """What ran the server, for the results' `runtime_image` column (an image, or a venv and its hash)."""

    def runtime_kind(self, spec: RunSpec) -> str:
        """The results' `runtime_image_kind`: official | project (images) | venv."""
        return "venv"

    def runtime_size(self, spec: RunSpec) -> RuntimeSize:
        """How large what ran the server is (an image on the engine, a venv on disk), or why it is not known."""
        return RuntimeSize(None, f"launcher {self.name} does not report the size of what it runs")

    @abstractmethod
    def exit_code(self, handle: LaunchHandle) -> int | None:
        """The server's exit code if it has exited, else None."""

    @abstractmethod
    def stop(self, handle: LaunchHandle, grace_s: float = 10.0) -> None:
        """End the server and everything it started, and remove what it left (idempotent)."""

    def log_tail(self, handle: LaunchHandle, max_bytes: int = 4000) -> str:
        path = Path(handle.log_path)
        if not path.is_file():
            return ""
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - max_bytes))
            return f.read().decode(errors="replace")

    def sweep(self, run_id: str | None = None) -> list[LaunchHandle]:
        """Stop every recorded server of `run_id` that this launcher started; with no run id, the leftovers of
        any run whose starting process is gone (a crashed task), never a server another live task is using."""
        swept = []
        for handle in recorded_handles(run_id):
            if handle.launcher == self.name and (run_id is not None or not owner_alive(handle)):
                self.stop(handle, grace_s=5.0)
                remove_workdir(handle)
                swept.append(handle)
        return swept


def remove_workdir(handle: LaunchHandle) -> None:
    """A swept server's session work folder: its session is gone, so nothing else will remove it."""
    if handle.workdir and Path(handle.workdir).name.startswith("serving-eval-"):
        shutil.rmtree(handle.workdir, ignore_errors=True)
