"""The server interface: one implementation per serving stack, one file each under `servers/`.

A server knows how to lay out a model for itself, how it is run (a runtime command for the process
launcher, an image and command for the Docker launcher), its readiness, version and metrics endpoints, the
wires it is spoken to over (`wires`: per kind of wire, json, binary or grpc, the load generator's codec and the
port; `missing_wires`: why it has none of a kind), where it reports its requests' time (`server_timings`), what it
can do (`capabilities`: tasks/serve/capabilities.py, each with the probe of the live server that shows it) and
what the project writes to serve a model on it (`serving_lines`: its layout and its runtime's serving code,
tasks/serve/lines.py). It does not start anything itself: launchers do.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from tasks.convert import Artifact
from tasks.core.errors import ConfigError
from tasks.core.paths import runtime_home
from tasks.core.results import WIRES
from tasks.core.spec import ModelSpec
from tasks.serve.capabilities import Capability
from tasks.serve.knobs import Knob
from tasks.serve.lines import LineCount, count_serving_lines
from tasks.serve.options import ServingOptions

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
    requirements: str = ""  # the process launcher builds the venv from this file ("": docker/<runtime>/'s own)
    builder: str = ""  # and with this builder (tasks/runtimes/venvs.py BUILDERS; "": tonight's)


@dataclass(frozen=True)
class Wire:
    """One way to reach a server: the load generator's codec (tasks/loadgen/protocols/) and the port's name."""

    codec: str
    port: str = "http"


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

    `knobs` declares what a configuration search may change (tasks/serve/knobs.py, tasks/plan/tune.py): each a
    ServingOptions field this server honours, with the values a grid tries, in the order a quick search tries
    them. A server without knobs is measured with its defaults only."""

    name: ClassVar[str]
    runtime: ClassVar[str]  # runtime folder under docker/ (process launcher)
    wires: ClassVar[dict[str, Wire]]  # wire kind (WIRES) -> its codec and port; "json" is the server's REST JSON
    missing_wires: ClassVar[dict[str, str]] = {}  # wire kind -> why the stack has none (a skipped cell's reason)
    timing_source: ClassVar[str] = ""  # what `server_timings` reads, in words; "" when the stack reports none
    formats: ClassVar[tuple[str, ...]]  # artifact formats it can serve
    engines: ClassVar[dict[str, str]]  # artifact format -> inference engine, recorded per cell
    port_names: ClassVar[tuple[str, ...]] = ("http",)
    ready_path: ClassVar[str] = "/v2/health/ready"
    metrics_port: ClassVar[str | None] = None
    knobs: ClassVar[tuple[Knob, ...]] = ()
    metrics_path: ClassVar[str] = "/metrics"
    # every capability of tasks/serve/capabilities.py: offered or not, how, and how the live server shows it
    capabilities: ClassVar[dict[str, Capability]] = {}
    serving_code: ClassVar[tuple[str, ...]] = ()  # files of the runtime folder the stack runs to serve (handler...)
    uncounted_files: ClassVar[dict[str, str]] = {}  # layout glob -> why its lines are not counted (serve/lines.py)

    def __init__(self, options: ServingOptions | None = None) -> None:
        self.options = options or ServingOptions()

    @property
    def protocol(self) -> str:
        """The codec of its REST JSON wire: what the served-output check and the control cell speak."""
        return self.wires["json"].codec

    def wire_of(self, protocol: str | None) -> str | None:
        """The wire kind a codec is this server's, or None when it does not speak it."""
        return next((kind for kind, wire in self.wires.items() if wire.codec == protocol), None)

    def wire_reason(self, kind: str) -> str:
        """Why this server has no `kind` wire (the reason of the cells planned over it)."""
        if kind not in WIRES:
            raise ConfigError("protocols", kind, f"must be one of {list(WIRES)}")
        why = self.missing_wires.get(kind, "its serving stack does not speak it")
        return f"server {self.name} has no {kind} wire: {why}"

    def server_timings(self, endpoint: Endpoint) -> dict[str, float] | None:
        """The server's own cumulative sums of where its requests' time went (tasks.loadgen.measurement.ServerTiming:
        `requests`, `server_ms` and the parts, in ms summed over requests), read from what the stack reports; None
        when it reports nothing (the base). A scrape that fails raises OSError/ValueError."""
        return None

    def serving_lines(self, layout: Path) -> LineCount:
        """The lines of config and code the project wrote to serve the model: the layout `write_layout` made (before
        `run_spec` adds to it) and the runtime's `serving_code`."""
        return count_serving_lines(layout, tuple(self.runtime_dir / name for name in self.serving_code),
                                   self.uncounted_files)

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

    @property
    def runtime_dir(self) -> Path:
        """The runtime's folder of entry scripts and requirements: this checkout's docker/<runtime>/, or the
        snapshot of a regression reference (`ServingOptions.runtime_dir`)."""
        return Path(self.options.runtime_dir) if self.options.runtime_dir else runtime_home(self.runtime)

    def launch_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        """`run_spec`, pointed at a reference's runtime snapshot or image when the options name one."""
        run_spec = self.run_spec(layout, spec, ports)
        if self.options.runtime_dir:
            run_spec = replace(run_spec, requirements=str(self.runtime_dir / "requirements.txt"))
        if self.options.runtime_builder:
            run_spec = replace(run_spec, builder=self.options.runtime_builder)
        if self.options.runtime_image:
            run_spec = replace(run_spec, image=self.options.runtime_image)
        return run_spec

    def endpoint(self, spec: ModelSpec, ports: dict[str, int]) -> Endpoint:
        return Endpoint("127.0.0.1", ports["http"], self.model_name(spec), self.protocol, dict(ports))

    def wire_endpoint(self, endpoint: Endpoint, protocol: str | None) -> Endpoint:
        """Where `protocol` is spoken (the REST endpoint for None or the JSON codec); ConfigError when this server
        does not speak it."""
        if protocol in (None, endpoint.protocol):
            return endpoint
        kind = self.wire_of(protocol)
        if kind is None or self.wires[kind].port not in endpoint.ports:
            raise ConfigError("protocol", protocol, f"server {self.name!r} speaks "
                                                    f"{sorted(w.codec for w in self.wires.values())}")
        return replace(endpoint, port=endpoint.ports[self.wires[kind].port], protocol=protocol)

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
