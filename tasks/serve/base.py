"""The server interface: one implementation per serving stack, one file each under `servers/`.

A server knows how to lay out a model for itself, how it is run (a runtime command for the process
launcher, an image and command for the Docker launcher), its readiness, version and metrics endpoints and
the request protocol it speaks. It does not start anything itself: launchers do.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tasks.convert import Artifact
from tasks.errors import ConfigError
from tasks.serve.knobs import Knob
from tasks.spec import ModelSpec

DEVICES = ("cpu", "gpu")
IMAGE_SOURCES = ("project", "official")  # Docker launcher: images built here, or a registry's official image
HTTP_PROBE_TIMEOUT_S = 2.0


def link_or_copy(source: Path, target: Path) -> None:
    """Place an artifact file in a server layout: a hard link when possible (no copy of large weights),
    a copy across filesystems; a directory (SavedModel) is copied."""
    if source.is_dir():
        shutil.copytree(source, target)
        return
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed
        shutil.copy2(source, target)


@dataclass(frozen=True)
class ServingOptions:
    """How the server should serve: the same meaning for every server that supports the option."""

    max_batch_size: int = 8
    dynamic_batching: bool = False
    batch_delay_us: int = 1000
    instances: int = 1
    device: str = "cpu"
    cpus: int = 0  # how many CPUs the server is given (tasks/serve/budget.py); 0: unknown, one thread per instance
    images: str = "project"  # Docker launcher: "project" images built here, or "official" ones from a registry
    threads: int = 0  # intra-op threads of each instance; 0: the server's CPUs shared among its instances
    preferred_batch_sizes: tuple[int, ...] = ()  # batch sizes a dynamic batcher should aim for (Triton)
    max_latency_ms: int = 0  # a batcher's latency budget (BentoML's max_latency_ms); 0: the server's default

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError("device", self.device, f"must be one of {list(DEVICES)}")
        if self.images not in IMAGE_SOURCES:
            raise ConfigError("images", self.images, f"must be one of {list(IMAGE_SOURCES)}")
        for name in ("max_batch_size", "instances"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "must be >= 1")
        if self.batch_delay_us < 0:
            raise ConfigError("batch_delay_us", self.batch_delay_us, "must be >= 0")
        if self.cpus < 0:
            raise ConfigError("cpus", self.cpus, "must be >= 0")
        if self.threads < 0:
            raise ConfigError("threads", self.threads, "must be >= 0 (0: the server's CPUs shared among instances)")
        if any(b < 1 or b > self.max_batch_size for b in self.preferred_batch_sizes):
            raise ConfigError("preferred_batch_sizes", list(self.preferred_batch_sizes),
                              f"each must be from 1 to max_batch_size ({self.max_batch_size})")

    @property
    def threads_per_instance(self) -> int:
        """Intra-op threads of each instance (a worker process or a model instance): `threads` when set, else the
        server's CPUs shared among its instances, at least one."""
        if self.threads:
            return self.threads
        return max(1, self.cpus // self.instances) if self.cpus else 1

    @property
    def process_threads(self) -> int:
        """Intra-op threads of a server that runs all its instances in one process (KServe, the custom service)."""
        return self.instances * self.threads_per_instance

    @property
    def thread_env(self) -> dict[str, str]:
        """OpenMP/MKL pools sized like the server's own threads (torch and onnxruntime read them at start)."""
        threads = str(self.threads_per_instance)
        return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


@dataclass(frozen=True)
class RunSpec:
    """How to run one server. `argv[0]` is looked up in the runtime's `bin` first (python, tritonserver...)."""

    runtime: str
    argv: tuple[str, ...]
    ports: dict[str, int]  # port name -> host port on 127.0.0.1
    env: dict[str, str] = field(default_factory=dict)
    image: str = ""  # container image for the Docker launcher
    container_argv: tuple[str, ...] = ()
    container_ports: dict[str, int] = field(default_factory=dict)  # port name -> port inside the container
    mounts: dict[str, str] = field(default_factory=dict)  # host path -> container path (read-only)
    container_env: dict[str, str] | None = None  # the container's environment; None: `env` less host-only settings
    device: str = "cpu"  # cpu | gpu: the Docker launcher requests GPUs for "gpu" (set from ServingOptions.device)
    # Absolute glob patterns of host paths the server creates outside its workdir (e.g. Triton's hard-coded
    # /tmp/python_env_*): the process launcher removes the matching entries that appeared after the start.
    cleanup_globs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """Where a running server answers, and for which model."""

    host: str
    port: int
    model_name: str
    protocol: str
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


class Server(ABC):
    """One serving stack. Subclasses set the class attributes and implement the three methods.

    `knobs` declares what a configuration search may change (tasks/serve/knobs.py, tasks/tune.py): each a
    ServingOptions field this server honours, with the values a grid tries, in the order a quick search tries
    them. A server without knobs is measured with its defaults only."""

    name: ClassVar[str]
    runtime: ClassVar[str]  # runtime folder under docker/ (process launcher)
    protocol: ClassVar[str]  # load generator codec name
    formats: ClassVar[tuple[str, ...]]  # artifact formats it can serve
    engines: ClassVar[dict[str, str]]  # artifact format -> inference engine, recorded per cell
    port_names: ClassVar[tuple[str, ...]] = ("http",)
    ready_path: ClassVar[str] = "/v2/health/ready"
    metrics_port: ClassVar[str | None] = None
    knobs: ClassVar[tuple[Knob, ...]] = ()
    metrics_path: ClassVar[str] = "/metrics"

    def __init__(self, options: ServingOptions | None = None) -> None:
        self.options = options or ServingOptions()

    def check_format(self, fmt: str) -> None:
        if fmt not in self.formats:
            raise ConfigError(f"server {self.name}: format", fmt, f"must be one of {list(self.formats)}")

    def model_name(self, spec: ModelSpec) -> str:
        return spec.name.replace("-", "_")

    @abstractmethod
    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        """Write the model repository/layout this server loads, and return its root."""

    @abstractmethod
    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        """Describe how to run the server on `ports` (127.0.0.1) over `layout`."""

    def endpoint(self, spec: ModelSpec, ports: dict[str, int]) -> Endpoint:
        return Endpoint("127.0.0.1", ports["http"], self.model_name(spec), self.protocol, dict(ports))

    def is_ready(self, endpoint: Endpoint) -> bool:
        try:
            with urllib.request.urlopen(endpoint.base_url + self.ready_path, timeout=HTTP_PROBE_TIMEOUT_S) as resp:
                return resp.status == 200
        except OSError:
            return False

    def version(self, endpoint: Endpoint) -> str:
        """The server's own version string (KServe v2 server metadata by default)."""
        with urllib.request.urlopen(endpoint.base_url + "/v2", timeout=HTTP_PROBE_TIMEOUT_S) as resp:
            meta = json.load(resp)
        return f"{meta.get('name', self.name)} {meta.get('version', '')}".strip()

    def skip_reason(self, launcher: str, fmt: str | None = None, spec: ModelSpec | None = None) -> str | None:
        """Why this server cannot run under `launcher` on this host (for artifact format `fmt` and model `spec`
        when given), or None when it can."""
        return None
