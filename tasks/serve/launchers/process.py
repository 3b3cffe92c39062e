"""ProcessLauncher: a server as a local process group, in its runtime's venv.

The server runs in its own session (process group), detached from the caller so that it outlives an
Airflow setup task, with stdout/stderr in a log file. Stopping sends SIGTERM to the whole group, then
SIGKILL after a grace period, and removes the group's temp dirs and Triton's shared-memory regions, and the
entries matching the server's `RunSpec.cleanup_globs` that appeared after the start (paths a server creates
outside its workdir, which a killed server leaves behind).
Some servers' workers leave the group (BentoML's circus workers call setsid()), so the stop also snapshots
the group's descendant tree before signalling and signals those processes by PID (PID reuse is guarded).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil

from tasks.errors import ConfigError
from tasks.runtimes import ensure_runtime, requirements_sha256, runtime_env_vars
from tasks.serve.base import RunSpec
from tasks.serve.launchers.base import Launcher, LaunchHandle, forget_handle, record_handle

SHM_DIR = Path("/dev/shm")
SHM_PREFIXES = ("triton_python_backend_shm_region",)
POLL_S = 0.05


class ProcessLauncher(Launcher):
    name = "process"

    def prepare(self, spec: RunSpec) -> None:
        ensure_runtime(spec.runtime)

    def start(self, spec: RunSpec, *, run_id: str, cell_id: str, workdir: Path, log_path: Path,
              cpus: tuple[int, ...] = (), memory: str | None = None) -> LaunchHandle:
        """`cpus`: the server's CPU affinity (every process it starts inherits it). `memory` is not applied: a
        process tree's memory cannot be bounded without a container (its rows record no limit)."""
        for pattern in spec.cleanup_globs:
            if not os.path.isabs(pattern):
                raise ConfigError("RunSpec.cleanup_globs", pattern, "must be an absolute glob pattern")
        env = ensure_runtime(spec.runtime)
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
        handle = LaunchHandle(
            launcher=self.name, run_id=run_id, cell_id=cell_id, pid=proc.pid, pgid=proc.pid,
            create_time=_create_time(proc.pid), ports=dict(spec.ports), workdir=str(workdir),
            log_path=str(log_path), shm_before=shm_before, cleanup_globs=tuple(spec.cleanup_globs),
            cleanup_before=cleanup_before,
        )
        record_handle(handle)
        return handle

    def runtime_label(self, spec: RunSpec) -> str:
        return f"venv:{spec.runtime}@{requirements_sha256(spec.runtime)[:12]}"

    def exit_code(self, handle: LaunchHandle) -> int | None:
        try:
            pid, status = os.waitpid(handle.pid, os.WNOHANG)
        except ChildProcessError:  # not our child (another process started it): ask the OS
            return None if _is_ours(handle) else -1
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)

    def stop(self, handle: LaunchHandle, grace_s: float = 10.0) -> None:
        if _is_ours(handle) or _group_alive(handle.pgid):
            tree = _descendants(handle)  # before signalling: a setsid()'ed orphan loses its ppid link after
            _signal_group(handle.pgid, signal.SIGTERM)
            _signal_procs(tree, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while _alive(handle.pgid, tree) and time.monotonic() < deadline:
                self.exit_code(handle)  # reap the leader if it is our child
                time.sleep(POLL_S)
            if _alive(handle.pgid, tree):
                _signal_group(handle.pgid, signal.SIGKILL)
                _signal_procs(tree, signal.SIGKILL)
                deadline = time.monotonic() + 5.0
                while _alive(handle.pgid, tree) and time.monotonic() < deadline:
                    self.exit_code(handle)
                    time.sleep(POLL_S)
        self.exit_code(handle)
        for entry in set(_shm_entries()) - set(handle.shm_before):
            (SHM_DIR / entry).unlink(missing_ok=True)
        for entry in set(_glob_entries(handle.cleanup_globs)) - set(handle.cleanup_before):
            _remove(Path(entry))
        shutil.rmtree(Path(handle.workdir) / "tmp", ignore_errors=True)
        forget_handle(handle)


def _create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def _is_ours(handle: LaunchHandle) -> bool:
    """True when pid is still the process we started (not a reused PID)."""
    try:
        proc = psutil.Process(handle.pid)
        return abs(proc.create_time() - handle.create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group_members(pgid: int) -> list[int]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return members


def _group_alive(pgid: int) -> bool:
    return bool(pgid) and bool(_group_members(pgid))


def _descendants(handle: LaunchHandle) -> list[psutil.Process]:
    """Every descendant of the leader and of the group's members, started after the leader (so ours).

    psutil.Process remembers each process's create_time and refuses to signal a reused PID.
    """
    roots = [handle.pid] if _is_ours(handle) else []
    roots += [pid for pid in _group_members(handle.pgid) if pid not in roots]
    found: dict[int, psutil.Process] = {}
    for pid in roots:
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            try:
                if child.create_time() >= handle.create_time - 0.01:  # started after the leader
                    found.setdefault(child.pid, child)
            except psutil.Error:
                continue
    return list(found.values())


def _tree_alive(tree: list[psutil.Process]) -> bool:
    for proc in tree:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def _alive(pgid: int, tree: list[psutil.Process]) -> bool:
    return _group_alive(pgid) or _tree_alive(tree)


def _signal_procs(tree: list[psutil.Process], sig: int) -> None:
    for proc in tree:
        try:
            proc.send_signal(sig)  # raises NoSuchProcess when the PID now belongs to another process
        except psutil.Error:
            continue


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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
