"""ProcessLauncher: a server as a local process group, in its runtime's venv.

The server runs in its own session (process group), detached from the caller so that it outlives an
Airflow setup task, with stdout/stderr in a log file. Stopping sends SIGTERM to the whole group, then
SIGKILL after a grace period, and removes the group's temp dirs and Triton's shared-memory regions, and the
entries matching the server's `RunSpec.cleanup_globs` that appeared after the start (paths a server creates
outside its workdir, which a killed server leaves behind).
Some servers' workers leave the group (BentoML's circus workers call setsid()), so the stop also snapshots
the group's descendant tree before signalling and signals those processes by PID (`tasks.runtimes.proctree`).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.runtimes.proctree import create_time_of, is_running, terminate_tree
from tasks.runtimes.venvs import BUILDER, RuntimeEnv, ensure_runtime, runtime_env_vars
from tasks.serve.base import RunSpec
from tasks.serve.launchers.base import Launcher, LaunchHandle, RuntimeSize, forget_handle, record_handle

# Servers this process started, by PID: holding the Popen keeps the subprocess module from reaping the server
# behind our back (it reaps dropped Popens on the next Popen()), which would lose the exit code of a crash.
_CHILDREN: dict[int, subprocess.Popen] = {}
SHM_DIR = Path("/dev/shm")
SHM_PREFIXES = ("triton_python_backend_shm_region",)


def runtime_of(spec: RunSpec) -> RuntimeEnv:
    """The venv a server runs in: its runtime's, built from `spec.requirements` when it names another file (a
    regression reference's), by `spec.builder` when it names one."""
    return ensure_runtime(spec.runtime, requirements=Path(spec.requirements) if spec.requirements else None,
                          builder=spec.builder or BUILDER)


class ProcessLauncher(Launcher):
    name = "process"

    def prepare(self, spec: RunSpec) -> None:
        runtime_of(spec)

    def start(self, spec: RunSpec, *, run_id: str, cell_id: str, workdir: Path, log_path: Path,
              cpus: tuple[int, ...] = (), memory: str | None = None) -> LaunchHandle:
        """`cpus`: the server's CPU affinity (every process it starts inherits it). `memory` is not applied: a
        process tree's memory cannot be bounded without a container (its rows record no limit)."""
        for pattern in spec.cleanup_globs:
            if not os.path.isabs(pattern):
                raise ConfigError("RunSpec.cleanup_globs", pattern, "must be an absolute glob pattern")
        env = runtime_of(spec)
        argv = list(spec.argv)
        program = env.bin_dir / argv[0]
        if program.exists():
            argv[0] = str(program)
        tmp = workdir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        environ = runtime_env_vars(env, {"TMPDIR": str(tmp), **spec.env})
        shm_before = tuple(sorted(_shm_entries()))
        cleanup_before = tuple(sorted(_glob_entries(spec.cleanup_globs)))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv, cwd=workdir, env=environ, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group; not killed with the task that started it
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            )
        _CHILDREN[proc.pid] = proc
        handle = LaunchHandle(
            launcher=self.name, run_id=run_id, cell_id=cell_id, pid=proc.pid, pgid=proc.pid,
            create_time=create_time_of(proc.pid), ports=dict(spec.ports), workdir=str(workdir),
            log_path=str(log_path), shm_before=shm_before, cleanup_globs=tuple(spec.cleanup_globs),
            cleanup_before=cleanup_before,
        )
        record_handle(handle)
        return handle

    def runtime_label(self, spec: RunSpec) -> str:
        return f"venv:{spec.runtime}@{runtime_of(spec).requirements_sha256[:12]}"

    def runtime_size(self, spec: RunSpec) -> RuntimeSize:
        """The runtime venv's size on disk (its files' bytes; a venv is never changed once built, so the sum is kept
        beside it after the first walk)."""
        env = runtime_of(spec)
        try:
            return RuntimeSize(venv_size_bytes(env.venv_dir), f"venv {env.venv_dir.name} on disk")
        except OSError as exc:
            return RuntimeSize(None, f"the venv's size could not be read ({exc})")

    def exit_code(self, handle: LaunchHandle) -> int | None:
        child = _CHILDREN.get(handle.pid)
        if child is not None:  # ours and not yet reaped by anyone else, so the PID cannot have been reused
            return child.poll()  # -N when ended by signal N
        try:
            pid, status = os.waitpid(handle.pid, os.WNOHANG)
        except ChildProcessError:  # not our child (another process started it): ask the OS
            return None if _is_ours(handle) else -1
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)

    def stop(self, handle: LaunchHandle, grace_s: float = 10.0) -> None:
        terminate_tree(handle.pid, handle.pgid, handle.create_time, grace_s, reap=lambda: self.exit_code(handle))
        for entry in set(_shm_entries()) - set(handle.shm_before):
            (SHM_DIR / entry).unlink(missing_ok=True)
        for entry in set(_glob_entries(handle.cleanup_globs)) - set(handle.cleanup_before):
            _remove(Path(entry))
        shutil.rmtree(Path(handle.workdir) / "tmp", ignore_errors=True)
        child = _CHILDREN.pop(handle.pid, None)
        if child is not None:
            child.poll()
        forget_handle(handle)


def venv_size_bytes(venv_dir: Path) -> int:
    """The bytes of every file under `venv_dir` (links not followed), read once per build of it and kept in
    `<venv>.size` with the folder's modification time (a venv rebuilt in place is walked again)."""
    cached = venv_dir.with_name(venv_dir.name + ".size")
    stamp = str(venv_dir.stat().st_mtime_ns)
    try:
        kept_stamp, kept = cached.read_text().split()
        if kept_stamp == stamp:
            return int(kept)
    except (OSError, ValueError):
        pass
    total = 0
    for folder, _, names in os.walk(venv_dir):
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    try:
        cached.write_text(f"{stamp} {total}")
    except OSError:
        pass  # a read-only cache: walked again next time
    return total


def _is_ours(handle: LaunchHandle) -> bool:
    """True when pid is still the process we started (not a reused PID)."""
    return is_running(handle.pid, handle.create_time)


def _shm_entries() -> list[str]:
    if not SHM_DIR.is_dir():
        return []
    return [p.name for p in SHM_DIR.iterdir() if p.name.startswith(SHM_PREFIXES)]


def _glob_entries(patterns: tuple[str, ...]) -> list[str]:
    return [entry for pattern in patterns for entry in glob.glob(pattern)]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
