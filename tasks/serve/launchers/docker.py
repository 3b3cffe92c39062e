"""DockerLauncher: a server as a container on the local Docker engine (docker SDK).

The container is created from the server's `RunSpec.image` and `container_argv`; each container port is
published on 127.0.0.1 only, to the host port the session chose; the model layout is mounted read-only;
GPUs are requested through device requests when `RunSpec.device == "gpu"`; CPU set and memory limit are
options. Every container carries the run id and cell id as labels, so `sweep` finds what a crashed run
left behind even without a recorded handle. Stopping saves the container's log into the cell's log file
first, then stops and removes the container.

The container parameters come from one pure function, `container_params`, so they are testable without
an engine.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from tasks.errors import ConfigError, ServerStartError
from tasks.serve.base import DEVICES, RunSpec
from tasks.serve.launchers.base import (
    Launcher,
    LaunchHandle,
    forget_handle,
    owner_alive,
    record_handle,
    recorded_handles,
    remove_workdir,
    safe_name,
)

LABEL_RUN_ID = "serving-eval.run_id"
LABEL_CELL_ID = "serving-eval.cell_id"
LOOPBACK = "127.0.0.1"
DOCKER_CLIENT_TIMEOUT_S = 10
# Host-side settings a server may put in RunSpec.env for the process launcher; they mean nothing (or harm)
# inside an image, which has its own PATH and Python.
HOST_ONLY_ENV = frozenset({"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TMPDIR", "HOME"})
EXITED_STATES = ("exited", "dead")

log = logging.getLogger(__name__)


class LauncherUnavailable(ServerStartError):
    """The launcher's backend (the Docker engine) cannot be reached; no server was started."""


def container_params(spec: RunSpec, run_id: str, cell_id: str, cpus: tuple[int, ...] = (), device: str = "cpu",
                     memory: str | None = None, shm_size: str | None = None) -> dict:
    """The keyword arguments of docker's `containers.create` for `spec` (pure: no engine needed)."""
    if not spec.image:
        raise ConfigError("RunSpec.image", spec.image, f"runtime {spec.runtime!r} names no container image; "
                                                       "the Docker launcher needs one (use launcher=process)")
    if device not in DEVICES:
        raise ConfigError("device", device, f"must be one of {list(DEVICES)}")
    ports = {}
    for name, container_port in spec.container_ports.items():
        if name not in spec.ports:
            raise ConfigError(f"RunSpec.ports[{name!r}]", None,
                              f"container port {name!r} ({container_port}) needs a host port; got {sorted(spec.ports)}")
        ports[f"{container_port}/tcp"] = (LOOPBACK, spec.ports[name])
    params: dict = {
        "image": spec.image,
        "command": list(spec.container_argv),
        "detach": True,
        "init": True,  # a tiny init as PID 1: signals reach the server, zombies are reaped
        "labels": {LABEL_RUN_ID: run_id, LABEL_CELL_ID: cell_id},
        "ports": ports,
        "volumes": {host: {"bind": inside, "mode": "ro"} for host, inside in spec.mounts.items()},
        "environment": {k: v for k, v in spec.env.items() if k not in HOST_ONLY_ENV},
    }
    if cpus:
        params["cpuset_cpus"] = ",".join(str(c) for c in sorted(cpus))
    if memory:
        params["mem_limit"] = memory
    if shm_size:
        params["shm_size"] = shm_size
    if device == "gpu":
        from docker.types import DeviceRequest

        params["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return params


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
            "needs a running engine: start one (or set DOCKER_HOST), or run with launcher=process"
        ) from exc
    return client


class DockerLauncher(Launcher):
    name = "docker"

    def __init__(self, memory: str | None = None, shm_size: str | None = None, client=None) -> None:
        """`memory`: container memory limit ("8g"); `shm_size`: /dev/shm size ("1g", Triton's python backend
        needs more than Docker's 64 MB default); `client`: a docker client (tests pass a fake)."""
        self.memory = memory
        self.shm_size = shm_size
        self._client = client

    @property
    def client(self):
        if self._client is None:
            self._client = docker_client()
        return self._client

    def runtime_label(self, spec: RunSpec) -> str:
        return spec.image

    def start(self, spec: RunSpec, *, run_id: str, cell_id: str, workdir: Path, log_path: Path,
              cpus: tuple[int, ...] = ()) -> LaunchHandle:
        from docker.errors import DockerException

        params = container_params(spec, run_id, cell_id, cpus, spec.device, self.memory, self.shm_size)
        name = f"serving-eval-{safe_name(cell_id)}-{uuid.uuid4().hex[:8]}"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            container = self.client.containers.create(name=name, **params)
        except DockerException as exc:
            raise ServerStartError(f"image={spec.image!r}: the Docker engine refused to create the container "
                                   f"({exc}); is the image pulled or built (docker/{spec.runtime}/)?") from exc
        handle = LaunchHandle(launcher=self.name, run_id=run_id, cell_id=cell_id, container_id=container.id,
                              ports=dict(spec.ports), workdir=str(workdir), log_path=str(log_path))
        record_handle(handle)  # before start: a failed start is still swept
        try:
            container.start()
        except DockerException as exc:
            self.stop(handle, grace_s=0)
            raise ServerStartError(f"container {container.id[:12]} ({spec.image}) did not start: {exc}") from exc
        return handle

    def _container(self, handle: LaunchHandle):
        from docker.errors import NotFound

        try:
            return self.client.containers.get(handle.container_id)
        except NotFound:
            return None

    def exit_code(self, handle: LaunchHandle) -> int | None:
        container = self._container(handle)
        if container is None:
            return -1  # gone: removed by someone else
        container.reload()
        if container.status in EXITED_STATES:
            return int(container.attrs.get("State", {}).get("ExitCode", -1))
        return None

    def stop(self, handle: LaunchHandle, grace_s: float = 10.0) -> None:
        from docker.errors import DockerException, NotFound

        container = self._container(handle)
        if container is not None:
            try:
                container.stop(timeout=max(0, round(grace_s)))
            except NotFound:
                container = None
            if container is not None:
                _save_logs(container, handle.log_path)
                try:
                    container.remove(force=True)
                except NotFound:
                    pass
                except DockerException as exc:  # e.g. removal already in progress
                    log.warning("container %s: remove failed: %s", handle.container_id[:12], exc)
        forget_handle(handle)

    def log_tail(self, handle: LaunchHandle, max_bytes: int = 4000) -> str:
        """The live container's log while it exists (running or exited), else the log saved at stop."""
        try:
            container = self._container(handle)
        except LauncherUnavailable:
            container = None
        if container is None:
            return super().log_tail(handle, max_bytes)
        return container.logs(stdout=True, stderr=True, tail=200)[-max_bytes:].decode(errors="replace")

    def sweep(self, run_id: str | None = None) -> list[LaunchHandle]:
        """Remove the run's containers: recorded handles first (their logs saved), then any labelled leftover.

        Without a reachable engine there is nothing this launcher can remove: recorded handles are kept for
        a later sweep and an empty list is returned, so a run-level teardown on a host without Docker passes.
        """
        mine = [h for h in recorded_handles(run_id)
                if h.launcher == self.name and (run_id is not None or not owner_alive(h))]
        try:
            client = self.client
        except LauncherUnavailable as exc:
            if mine:
                log.warning("sweep: %d recorded container(s) of run %s not removed: %s", len(mine), run_id, exc)
            return []
        swept = []
        for handle in mine:
            self.stop(handle, grace_s=5.0)
            remove_workdir(handle)
            swept.append(handle)
        if run_id is None:  # labels cannot tell a live run's containers from leftovers: recorded handles only
            return swept
        seen = {h.container_id for h in swept}
        label = f"{LABEL_RUN_ID}={run_id}"
        for container in client.containers.list(all=True, filters={"label": label}):
            if container.id in seen:
                continue
            labels = container.labels or {}
            handle = LaunchHandle(launcher=self.name, run_id=labels.get(LABEL_RUN_ID, ""),
                                  cell_id=labels.get(LABEL_CELL_ID, ""), container_id=container.id)
            self.stop(handle, grace_s=5.0)
            swept.append(handle)
        return swept


def _save_logs(container, log_path: str) -> None:
    """Append the container's whole log (stdout and stderr) to the cell's log file."""
    if not log_path:
        return
    try:
        data = container.logs(stdout=True, stderr=True)
    except Exception as exc:  # noqa: BLE001 - logs are best effort; the container must still be removed
        data = f"(container logs unavailable: {exc})\n".encode()
    path = Path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)
