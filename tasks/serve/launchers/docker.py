"""DockerLauncher: a server as a container on the local Docker engine (docker SDK).

The container runs the server's image: a project image (`serving-eval/<runtime>`, built from docker/<runtime>/
or reused by tasks/runtimes/images.py, whose tag is the hash of its inputs) or, with the run option images=official, a
registry's official image. `prepare` makes the image ready before the start-up is timed. Each container port
is published on 127.0.0.1 only, to the host port the session chose, on Docker's default bridge network (never
the host network); the model layout is mounted read-only; the container is never privileged, runs without
Linux capabilities and cannot gain privileges; no Docker socket is mounted. GPUs are requested through device
requests when `RunSpec.device == "gpu"`. The server's budget (tasks/serve/budget.py) is its CPU set (cpuset)
and memory limit (swap included).

Every container carries labels: the run id, the cell id and its owner (the process that started it, with its
start time, on this host), so `sweep` finds what a crashed run left behind even without a recorded handle, and
tells it from a live run's containers. Stopping saves the container's log into the cell's log file first, then
stops and removes the container with its anonymous volumes.

The container parameters come from one pure function, `container_params`, so they are testable without
an engine.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from pathlib import Path

from tasks.core.errors import ConfigError, ServerStartError
from tasks.runtimes import images
from tasks.runtimes.docker_engine import LauncherUnavailable, docker_client
from tasks.runtimes.proctree import create_time_of
from tasks.serve.base import RunSpec
from tasks.serve.launchers.base import (
    Launcher,
    LaunchHandle,
    RuntimeSize,
    forget_handle,
    owner_alive,
    record_handle,
    recorded_handles,
    remove_workdir,
    safe_name,
)
from tasks.serve.options import DEVICES

LABEL_RUN_ID = "serving-eval.run_id"
LABEL_CELL_ID = "serving-eval.cell_id"
LABEL_OWNER = "serving-eval.owner"  # JSON: host, pid and start time of the process that started the container
LOOPBACK = "127.0.0.1"
LOG_MAX_SIZE = "50m"  # the engine's json-file log of a container (saved into the cell's log at stop)
# Host-side settings a server may put in RunSpec.env for the process launcher; they mean nothing (or harm)
# inside an image, which has its own PATH and Python.
HOST_ONLY_ENV = frozenset({"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TMPDIR", "HOME"})
EXITED_STATES = ("exited", "dead")

log = logging.getLogger(__name__)




def owner_label() -> str:
    """This process as a container's owner: a sweep removes the container once this process is gone."""
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "create_time": create_time_of(os.getpid())})


def owner_gone(labels: dict[str, str]) -> bool:
    """True when the container's owner ran on this host and is gone; False when alive, elsewhere or unknown."""
    try:
        owner = json.loads(labels.get(LABEL_OWNER) or "")
    except ValueError:
        return False
    if owner.get("host") != socket.gethostname():
        return False
    handle = LaunchHandle(launcher="docker", run_id="", cell_id="", owner_pid=int(owner.get("pid", 0)),
                          owner_create_time=float(owner.get("create_time", 0.0)))
    return not owner_alive(handle)


def container_params(spec: RunSpec, run_id: str, cell_id: str, cpus: tuple[int, ...] = (), device: str = "cpu",
                     memory: str | None = None, shm_size: str | None = None, image: str | None = None) -> dict:
    """The keyword arguments of docker's `containers.create` for `spec` (pure: no engine needed).

    `image`: the resolved image (a project image's hashed tag) instead of `spec.image`."""
    if not spec.image:
        raise ConfigError("RunSpec.image", spec.image, f"runtime {spec.runtime!r} names no container image; "
                                                       "the Docker launcher needs one (use launcher=process)")
    if device not in DEVICES:
        raise ConfigError("device", device, f"must be one of {list(DEVICES)}")
    from docker.types import LogConfig

    ports = {}
    for name, container_port in spec.container_ports.items():
        if name not in spec.ports:
            raise ConfigError(f"RunSpec.ports[{name!r}]", None,
                              f"container port {name!r} ({container_port}) needs a host port; got {sorted(spec.ports)}")
        ports[f"{container_port}/tcp"] = (LOOPBACK, spec.ports[name])
    env = spec.container_env if spec.container_env is not None else spec.env
    params: dict = {
        "image": image or spec.image,
        "command": list(spec.container_argv),
        "detach": True,
        "init": True,  # a tiny init as PID 1: signals reach the server, zombies are reaped
        "labels": {LABEL_RUN_ID: run_id, LABEL_CELL_ID: cell_id},
        "ports": ports,
        "network_mode": "bridge",  # Docker's default bridge: never the host's network
        "privileged": False,
        "cap_drop": ["ALL"],  # the servers bind unprivileged ports and need no capability
        "security_opt": ["no-new-privileges:true"],
        "volumes": {host: {"bind": inside, "mode": "ro"} for host, inside in spec.mounts.items()},
        "environment": {k: v for k, v in env.items() if k not in HOST_ONLY_ENV},
        "log_config": LogConfig(type="json-file", config={"max-size": LOG_MAX_SIZE}),
    }
    if cpus:
        params["cpuset_cpus"] = ",".join(str(c) for c in sorted(cpus))
    if memory:
        params["mem_limit"] = memory
        params["memswap_limit"] = memory  # no swap beyond the limit
    if shm_size:
        params["shm_size"] = shm_size
    if device == "gpu":
        from docker.types import DeviceRequest

        params["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return params


def make_readable(root: Path) -> None:
    """Let any user in a container read a mounted layout (an image may run its server as a non-root user);
    session work dirs are created private (0700)."""
    paths = [root, *root.rglob("*")] if root.is_dir() else [root]
    for path in paths:
        try:
            mode = path.lstat().st_mode
            if path.is_symlink():
                continue
            path.chmod(mode | (0o555 if path.is_dir() else 0o444))
        except OSError:
            continue


class DockerLauncher(Launcher):
    name = "docker"

    def __init__(self, memory: str | None = None, shm_size: str | None = None, client=None,
                 resolve_image=None) -> None:
        """`memory`: the default container memory limit ("8g") when `start` is given none; `shm_size`: /dev/shm
        size (Docker's default is 64 MB); `client`: a docker client (tests pass a fake); `resolve_image`:
        RunSpec -> runtimes.images.ImageRef (default: build or reuse a project image, find or pull an official one)."""
        self.memory = memory
        self.shm_size = shm_size
        self._client = client
        self._resolve_image = resolve_image
        self._images: dict[tuple[str, str], object] = {}

    @property
    def client(self):
        if self._client is None:
            self._client = docker_client()
        return self._client

    def prepare(self, spec: RunSpec) -> None:
        """Make the spec's image ready on the engine (a project image is built once, then reused)."""
        self._image(spec)

    def _image(self, spec: RunSpec):
        key = (spec.image, spec.runtime)
        if key not in self._images:
            if self._resolve_image is not None:
                self._images[key] = self._resolve_image(spec)
            else:
                self.client  # noqa: B018 - no engine: LauncherUnavailable (with its advice) before any build
                self._images[key] = images.resolve(spec.image, spec.runtime)
        return self._images[key]

    def runtime_label(self, spec: RunSpec) -> str:
        """The image reference and its id on the engine (`runtime_image`)."""
        return self._image(spec).label

    def runtime_kind(self, spec: RunSpec) -> str:
        return self._image(spec).kind

    def runtime_size(self, spec: RunSpec) -> RuntimeSize:
        """The image's size as the engine reports it (`docker image inspect`'s Size: every layer, uncompressed)."""
        from docker.errors import DockerException

        try:
            image = self._image(spec)
            size = self.client.images.get(image.ref).attrs.get("Size")
        except (DockerException, LauncherUnavailable, OSError) as exc:
            return RuntimeSize(None, f"the engine did not report image {spec.image}'s size ({exc})")
        if not isinstance(size, int):
            return RuntimeSize(None, f"the engine reported no size for image {image.ref}")
        return RuntimeSize(size, f"image {image.label} on the engine")

    def start(self, spec: RunSpec, *, run_id: str, cell_id: str, workdir: Path, log_path: Path,
              cpus: tuple[int, ...] = (), memory: str | None = None) -> LaunchHandle:
        from docker.errors import DockerException

        image = self._image(spec)
        params = container_params(spec, run_id, cell_id, cpus, spec.device, memory or self.memory, self.shm_size,
                                  image=image.ref)
        params["labels"][LABEL_OWNER] = owner_label()
        for host_path in spec.mounts:
            make_readable(Path(host_path))
        name = f"serving-eval-{safe_name(cell_id)}-{uuid.uuid4().hex[:8]}"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            container = self.client.containers.create(name=name, **params)
        except DockerException as exc:
            raise ServerStartError(f"image={image.ref!r}: the Docker engine refused to create the container "
                                   f"({exc})") from exc
        handle = LaunchHandle(launcher=self.name, run_id=run_id, cell_id=cell_id, container_id=container.id,
                              ports=dict(spec.ports), workdir=str(workdir), log_path=str(log_path))
        record_handle(handle)  # before start: a failed start is still swept
        try:
            container.start()
        except DockerException as exc:
            self.stop(handle, grace_s=0)
            raise ServerStartError(f"container {container.id[:12]} ({image.ref}) did not start: {exc}") from exc
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
                    container.remove(force=True, v=True)  # with its anonymous volumes
                except NotFound:
                    pass
                except DockerException as exc:  # e.g. removal already in progress
                    log.warning("container %s: remove failed: %s", handle.container_id[:12], exc)
        forget_handle(handle)

    def log_tail(self, handle: LaunchHandle, max_bytes: int = 4000) -> str:
        """The live container's log while it exists (running or exited), else the log saved at stop; an exited
        container's state first when it says more than its log (killed by the OOM killer at its memory limit)."""
        try:
            container = self._container(handle)
        except LauncherUnavailable:
            container = None
        if container is None:
            return super().log_tail(handle, max_bytes) or "(the container's log is empty)"
        text = container.logs(stdout=True, stderr=True, tail=200)[-max_bytes:].decode(errors="replace")
        state = container.attrs.get("State", {})
        if state.get("OOMKilled"):
            limit = container.attrs.get("HostConfig", {}).get("Memory") or 0
            text = (f"(the container was killed by the kernel's OOM killer: memory limit {limit / 2**20:.0f} MB, "
                    f"Param server_memory)\n") + text
        return text or "(the container's log is empty)"

    def sweep(self, run_id: str | None = None) -> list[LaunchHandle]:
        """Remove the run's containers: recorded handles first (their logs saved), then any labelled leftover.
        With no run id: the containers of every run whose owner (the process that started them, on this host)
        is gone, found by their labels even when no handle was recorded (a task killed at the wrong moment).

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
        seen = {h.container_id for h in swept}
        label = f"{LABEL_RUN_ID}={run_id}" if run_id is not None else LABEL_RUN_ID
        for container in client.containers.list(all=True, filters={"label": label}):
            labels = container.labels or {}
            if container.id in seen or (run_id is None and not owner_gone(labels)):
                continue  # with no run id, a container whose owner still runs is a live run's
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
