"""The local Docker engine: use one that answers, or start `dockerd` in the background and stop it by its PID.

    with engine_for_a_while():     # an engine for the block: started (and then stopped) here when none answers
        client = docker_client()

(`python -m tasks.cli engine start|stop|status|run -- CMD` on the command line.)

Nothing here installs the engine (`.ci/run` and `make engine` install Debian's `docker.io` when `dockerd` is
missing). An engine that already answers (at `$DOCKER_HOST`, or the default socket) is used and never stopped:
only a `dockerd` started here is stopped, found through the PID file written at start (PID and process start
time, so a reused PID is never signalled). `dockerd` runs with its defaults (overlay2 storage, the default
bridge network, data in /var/lib/docker, so built images survive a stop); its log goes to
`<cache>/engine/dockerd.log`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from tasks.core.errors import ServerStartError, ServingEvalError
from tasks.core.paths import cache_root
from tasks.runtimes.proctree import create_time_of, is_running

DOCKERD = "dockerd"
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 30.0
PING_TIMEOUT_S = 3
POLL_S = 0.2
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
DOCKER_CLIENT_TIMEOUT_S = 30


class EngineUnavailable(ServingEvalError):
    """No Docker engine answers and none can be started here (the message says why)."""


class LauncherUnavailable(ServerStartError):
    """The launcher's backend (the Docker engine) cannot be reached; no server was started."""


@dataclass(frozen=True)
class EngineHandle:
    """The engine in use. `pid` is set only when this module started it (and so may stop it)."""

    host: str
    pid: int = 0
    create_time: float = 0.0
    log_path: str = ""

    @property
    def started_here(self) -> bool:
        return self.pid > 0


def docker_client(timeout_s: int = DOCKER_CLIENT_TIMEOUT_S):
    """A client of the engine at $DOCKER_HOST (default socket); LauncherUnavailable when none answers."""
    from docker.errors import DockerException

    import docker

    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except DockerException as exc:
        where = os.environ.get("DOCKER_HOST") or "(unset: unix:///var/run/docker.sock)"
        raise LauncherUnavailable(
            f"launcher='docker': no Docker engine answered at DOCKER_HOST={where} ({exc}); the Docker launcher "
            "needs a running engine: start one (`make engine`, or set DOCKER_HOST), or run with launcher=process"
        ) from exc
    return client


def engine_dir() -> Path:
    path = cache_root() / "engine"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pid_file() -> Path:
    return engine_dir() / "dockerd.json"


def engine_host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def engine_answers(timeout_s: int = PING_TIMEOUT_S) -> bool:
    """True when a Docker engine answers a ping at $DOCKER_HOST (or the default socket)."""
    from docker.errors import DockerException

    import docker

    try:
        client = docker.from_env(timeout=timeout_s)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (DockerException, OSError):
        return False


def start_blocker() -> str | None:
    """Why this host cannot start an engine itself, or None when it can."""
    if os.environ.get("DOCKER_HOST"):
        return (f"DOCKER_HOST={os.environ['DOCKER_HOST']} is set and no engine answers there; this module starts "
                f"only a local dockerd on {DEFAULT_SOCKET} (unset DOCKER_HOST or start that engine)")
    if shutil.which(DOCKERD) is None:
        return (f"{DOCKERD} is not installed (Debian: apt-get install docker.io, which `make engine` and .ci/run "
                "do)")
    if os.geteuid() != 0:
        return f"{DOCKERD} must run as root and this process runs as uid {os.geteuid()} (start an engine yourself)"
    return None


def recorded_engine() -> EngineHandle | None:
    """The dockerd this module started, if it still runs (PID and start time both match)."""
    path = pid_file()
    if not path.is_file():
        return None
    try:
        handle = EngineHandle(**json.loads(path.read_text()))
    except (ValueError, TypeError):
        path.unlink(missing_ok=True)
        return None
    if not is_running(handle.pid, handle.create_time):
        path.unlink(missing_ok=True)
        return None
    return handle


def start_engine(timeout_s: float = START_TIMEOUT_S, log=print) -> EngineHandle:
    """An answering engine: the one already running (not this call's to stop, even when an earlier `start`
    here began it), or a dockerd started now (its handle has the PID to stop)."""
    if engine_answers():
        return EngineHandle(host=engine_host())
    blocker = start_blocker()
    if blocker:
        raise EngineUnavailable(f"no Docker engine answers at {engine_host()} and none can be started: {blocker}")
    stale = recorded_engine()
    if stale is not None and stale.host == engine_host():  # ours, but not answering: stop it, start afresh
        stop_engine(stale, log=log)
    log_path = engine_dir() / "dockerd.log"
    started = time.monotonic()
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([DOCKERD], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own group: a Ctrl-C of the caller does not reach it
    handle = EngineHandle(host=DEFAULT_SOCKET, pid=proc.pid, create_time=create_time_of(proc.pid),
                          log_path=str(log_path))
    pid_file().write_text(json.dumps(asdict(handle)))
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            pid_file().unlink(missing_ok=True)
            raise EngineUnavailable(f"{DOCKERD} exited with code {proc.returncode} while starting; log tail "
                                    f"({log_path}):\n{_tail(log_path)}")
        if engine_answers(timeout_s=1):
            log(f"docker engine: started {DOCKERD} (pid {proc.pid}) in {time.monotonic() - started:.1f} s; "
                f"log {log_path}")
            return handle
        time.sleep(POLL_S)
    stop_engine(handle, log=log)
    raise EngineUnavailable(f"{DOCKERD} (pid {proc.pid}) did not answer within {timeout_s:.0f} s; log tail "
                            f"({log_path}):\n{_tail(log_path)}")


def stop_engine(handle: EngineHandle | None = None, grace_s: float = STOP_GRACE_S, log=print) -> bool:
    """Stop the dockerd this module started (SIGTERM, then SIGKILL after `grace_s`); False when none was ours."""
    handle = handle or recorded_engine()
    if handle is None or not handle.started_here:
        return False
    if is_running(handle.pid, handle.create_time):
        os.kill(handle.pid, signal.SIGTERM)  # dockerd stops its containers and its own containerd
        deadline = time.monotonic() + grace_s
        while is_running(handle.pid, handle.create_time) and time.monotonic() < deadline:
            _reap(handle.pid)
            time.sleep(POLL_S)
        if is_running(handle.pid, handle.create_time):
            os.kill(handle.pid, signal.SIGKILL)
            _reap(handle.pid, block=True)
    pid_file().unlink(missing_ok=True)
    log(f"docker engine: stopped {DOCKERD} (pid {handle.pid})")
    return True


@contextmanager
def engine_for_a_while(log=print) -> Iterator[EngineHandle | None]:
    """An engine for the `with` block: the one that answers, or a dockerd started now and stopped after. Yields
    None (after saying why) when none can be had, so the caller's Docker steps report their own errors."""
    try:
        handle = start_engine(log=log)
    except EngineUnavailable as exc:
        log(f"docker engine: {exc}")
        handle = None
    try:
        yield handle
    finally:
        if handle is not None and handle.started_here:
            stop_engine(handle, log=log)


def _reap(pid: int, block: bool = False) -> None:
    try:
        os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (started by an earlier command): init reaps it


def _tail(path: Path, max_bytes: int = 3000) -> str:
    try:
        return path.read_bytes()[-max_bytes:].decode(errors="replace")
    except OSError:
        return ""
