"""A server session: lay out the model, start the server, wait until ready, hand it over, always stop it.

    with server_session(server, artifact, spec, launcher, SessionSettings(run_id, session_id, log_dir)) as live:
        ...  # load-test live.endpoint

Readiness fails fast: when the server exits during start-up the session raises at once with the tail of
the server's log, instead of waiting for the readiness timeout.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tasks.convert import Artifact
from tasks.core.errors import ServerStartError
from tasks.core.spec import ModelSpec
from tasks.runtimes import interrupts
from tasks.runtimes.ports import free_ports
from tasks.serve.base import Endpoint, RunSpec, Server
from tasks.serve.launchers.base import Launcher, LaunchHandle
from tasks.serve.lines import LineCount

# Readiness is polled every READY_POLL_FRACTION of the time waited so far, within [MIN, MAX]: a start-up is
# resolved to 5 % (10 ms at least). A fixed 0.1 s poll made a 0.33 s start-up read 0.33 or 0.44 s: a +30 %
# "regression" out of a few milliseconds of jitter.
READY_POLL_MIN_S = 0.01
READY_POLL_MAX_S = 0.1
READY_POLL_FRACTION = 0.05
DEFAULT_READY_TIMEOUT_S = 120.0
RESTART_STOP_GRACE_S = 2.0


@dataclass
class LiveServer:
    """A started, ready server and what was learned while starting it.

    `serving_lines` counts what the project wrote to serve the model (tasks/serve/lines.py), read right after
    `write_layout`, before `run_spec` adds its launcher's files.

    `restart(reason)` replaces a server that died or hung with a fresh one on new ports (same layout, same
    log file): `endpoint`, `handle`, `startup_s` and `server_version` then describe the new one, `restarts`
    counts how many times that happened. The session's timeline records each restart with the crash's log tail.
    """

    server: Server
    endpoint: Endpoint
    handle: LaunchHandle
    startup_s: float
    server_version: str
    runtime_image: str = ""  # the launcher's label of what ran it: an image, or a venv and its hash
    runtime_image_kind: str = ""  # official | project (an image) | venv
    timeline: dict[str, float] = field(default_factory=dict)  # wall-clock seconds of start/ready/stop
    restarts: int = 0
    launcher: Launcher | None = None  # the launcher that started it (exit code, log tail)
    started_monotonic: float = 0.0  # time.monotonic() when the launcher was asked to start it (its start-up's start)
    serving_lines: LineCount | None = None  # what the project wrote to serve the model (tasks/serve/lines.py)
    run_spec: RunSpec | None = None  # how it was started (the launcher's image_bytes, ports)
    _restart: Callable[[str], None] | None = field(default=None, repr=False)

    def restart(self, reason: str) -> None:
        if self._restart is None:
            raise ServerStartError(f"server {self.server.name}: this session cannot restart it ({reason})")
        self._restart(reason)


@dataclass(frozen=True)
class SessionSettings:
    """Where and how one server session runs: its run and name (labels, sweeps, the log file's name), the folder
    of its log, how long start-up may take, and the CPU set and memory limit it is given (tasks/serve/budget.py)."""

    run_id: str
    session_id: str
    log_dir: Path
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    cpus: tuple[int, ...] = ()
    memory: str | None = None


@contextmanager
def server_session(server: Server, artifact: Artifact, spec: ModelSpec, launcher: Launcher,
                   settings: SessionSettings, *, ports: dict[str, int] | None = None,
                   timeline: dict | None = None) -> Iterator[LiveServer]:
    """Start `server` on `artifact`, yield it once ready, and stop it on the way out, whatever happened.

    `timeline` (optional) receives wall-clock times of start, ready, stop_begin and stopped, also on failure,
    and a `restarts` list when the server was restarted.
    """
    with ExitStack() as stack:
        workdir = Path(tempfile.mkdtemp(prefix=f"serving-eval-{server.name}-"))
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        layout = server.write_layout(artifact, spec, workdir)
        serving_lines = server.serving_lines(layout)  # before run_spec adds its own files (venv paths, backends)
        log_path = settings.log_dir / f"{settings.session_id}.log"
        timeline = timeline if timeline is not None else {}
        current: dict = {}

        def launch(chosen_ports: dict[str, int]) -> LiveServer:
            run_spec = server.launch_spec(layout, spec, chosen_ports)
            endpoint = server.endpoint(spec, chosen_ports)
            launcher.prepare(run_spec)  # a venv or image built (or found) before the start-up is timed
            started = time.monotonic()
            handle = launcher.start(run_spec, run_id=settings.run_id, cell_id=settings.session_id, workdir=workdir,
                                    log_path=log_path, cpus=settings.cpus, memory=settings.memory)
            current["handle"] = handle
            _wait_ready(server, endpoint, launcher, handle, settings.ready_timeout_s)
            startup_s = time.monotonic() - started
            return LiveServer(server, endpoint, handle, startup_s, server.version(endpoint),
                              runtime_image=launcher.runtime_label(run_spec),
                              runtime_image_kind=launcher.runtime_kind(run_spec), timeline=timeline,
                              launcher=launcher, started_monotonic=started, serving_lines=serving_lines,
                              run_spec=run_spec)

        def stop_current() -> None:
            if "handle" in current:
                _stop(launcher, current.pop("handle"), timeline)

        def restart(reason: str) -> None:
            old = current.get("handle")
            code = launcher.exit_code(old) if old is not None else None
            tail = launcher.log_tail(old) if old is not None else ""
            record = {"at": time.time(), "reason": reason[:2000], "exit_code": code, "log_tail": tail[-4000:]}
            timeline.setdefault("restarts", []).append(record)
            if old is not None:
                launcher.stop(old, grace_s=RESTART_STOP_GRACE_S)  # dead or hung: no drain to wait for
                current.pop("handle", None)
            new_ports = free_ports(server.port_names)
            timeline["ports"] = dict(new_ports)
            fresh = launch(new_ports)
            record["ready"] = time.time()
            live.endpoint, live.handle, live.startup_s = fresh.endpoint, fresh.handle, fresh.startup_s
            live.started_monotonic = fresh.started_monotonic
            live.server_version, live.restarts = fresh.server_version, live.restarts + 1

        ports = ports or free_ports(server.port_names)
        timeline.update(start=time.time(), ports=dict(ports))
        stack.callback(stop_current)
        live = launch(ports)
        live._restart = restart
        timeline["ready"] = time.time()
        yield live


def _stop(launcher: Launcher, handle: LaunchHandle, timeline: dict[str, float]) -> None:
    timeline["stop_begin"] = time.time()
    launcher.stop(handle)
    timeline["stopped"] = time.time()


def ready_poll_interval(waited_s: float) -> float:
    """Seconds until the next readiness poll after `waited_s` of waiting (the start-up's resolution)."""
    return min(READY_POLL_MAX_S, max(READY_POLL_MIN_S, READY_POLL_FRACTION * waited_s))


def _wait_ready(server: Server, endpoint: Endpoint, launcher: Launcher, handle: LaunchHandle, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        interrupts.check()
        code = launcher.exit_code(handle)
        if code is not None:
            raise ServerStartError(
                f"server {server.name} exited with code {code} during start-up; log tail:\n{launcher.log_tail(handle)}"
            )
        if server.is_ready(endpoint):
            return
        time.sleep(ready_poll_interval(timeout_s - (deadline - time.monotonic())))
    raise ServerStartError(
        f"server {server.name} was not ready at {endpoint.base_url}{server.ready_path} within {timeout_s:.0f} s "
        f"(Param ready_timeout_s); log tail:\n{launcher.log_tail(handle)}"
    )
