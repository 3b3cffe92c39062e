"""What a serving stack can do, declared by each server class next to its knobs, and how the live server is probed
for it.

Every server declares every capability in `CAPABILITIES` (`Server.capabilities`, a mapping of capability name to
`Capability`): whether the stack offers it as this project deploys it (`declared`), how it is offered or why not
(`how`, in words), and, where the live server can show it, a `Probe`. A capability that needs a configuration the
project does not write (Triton's hot reload needs `--model-control-mode=poll`, an ensemble needs a second model) is
declared with its `how` and no probe: nothing on the live server could confirm or refute it.

The probes are run against the live server by `tasks.measure.capabilities` (bounded in time, loopback only); a
declared capability whose probe fails is a *finding*, recorded with its reason and shown in the report. It never
fails a cell: a probe checks what a stack offers, not the figures measured (docs/servers.md#capabilities).
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.core.errors import ConfigError
from tasks.core.results import WIRES

# capability -> its label in the report and the docs, in the order they are shown
CAPABILITIES: dict[str, str] = {
    "dynamic_batching": "dynamic batching",
    "multi_model": "several models in one server",
    "model_versions": "model versions",
    "metrics": "metrics endpoint (Prometheus)",
    "health_readiness": "health and readiness",
    "grpc": "gRPC",
    "binary_tensors": "binary tensors",
    "kserve_v2": "KServe v2 protocol",
    "hot_reload": "hot reload",
    "ensembles": "ensembles / pipelines",
}
# What a probe does on the live server (tasks/measure/capabilities.py runs them):
PROBE_KINDS = {
    "http": "an HTTP request to `path` on port `port` answers 200 (and its body holds `expect`, when given)",
    "prometheus": "GET `path` on port `port` answers 200 with Prometheus text (at least one sample line)",
    "ready": "the server's readiness check says ready (`Server.is_ready`, at its `ready_path`)",
    "grpc": "a unary call of an empty request to `method` on port `port` returns (a gRPC status is a failure)",
    "kserve_v2": "GET /v2 (server metadata) and /v2/models/<model> (inputs and outputs) answer with their fields",
    "wire": "the served-output check over the `wire` kind matches the reference (tasks/measure/served_check.py)",
}


@dataclass(frozen=True)
class Probe:
    """How a capability is checked on the live server: one of PROBE_KINDS. `path` may hold `{model}`, the served
    model's name."""

    kind: str
    port: str = "http"
    path: str = ""
    method: str = "GET"  # the HTTP method; for kind grpc, the full gRPC method name
    expect: str = ""  # kind http: a text the body must hold (may hold `{model}`)
    wire: str = ""  # kind wire: the wire kind (WIRES) whose served-output check is the evidence

    def __post_init__(self) -> None:
        if self.kind not in PROBE_KINDS:
            raise ConfigError("Probe.kind", self.kind, f"must be one of {sorted(PROBE_KINDS)}")
        if self.kind in ("http", "prometheus") and not self.path.startswith("/"):
            raise ConfigError(f"Probe({self.kind}).path", self.path, "must be an absolute path ('/...')")
        if self.kind == "grpc" and not self.method.startswith("/"):
            raise ConfigError("Probe(grpc).method", self.method, "must be a full method name ('/package.Service/Call')")
        if self.kind == "wire" and self.wire not in WIRES:
            raise ConfigError("Probe(wire).wire", self.wire, f"must be one of {list(WIRES)}")

    def describe(self) -> str:
        """The probe in a few words, e.g. "GET /metrics on port metrics"."""
        if self.kind in ("http", "prometheus"):
            return f"{self.method} {self.path} on port {self.port}"
        if self.kind == "grpc":
            return f"gRPC {self.method} on port {self.port}"
        if self.kind == "wire":
            return f"served-output check over the {self.wire} wire"
        return {"ready": "the readiness check", "kserve_v2": "GET /v2 and /v2/models/<model>"}[self.kind]


@dataclass(frozen=True)
class Capability:
    """One capability of one stack: offered (`declared`) or not, how (in words), and its probe (None: not probed)."""

    declared: bool
    how: str
    probe: Probe | None = None

    def __post_init__(self) -> None:
        if not self.how:
            raise ConfigError("Capability.how", self.how, "must say how the stack offers it, or why not")
        if self.probe is not None and not self.declared:
            raise ConfigError("Capability.probe", self.probe, "only a declared capability is probed")


def check_declaration(server_name: str, capabilities: dict[str, Capability], wires: dict) -> None:
    """A server's declaration names every capability once, and agrees with the wires it declares (gRPC and binary
    tensors are declared exactly where a wire of that kind is); a ConfigError names what disagrees."""
    missing, unknown = set(CAPABILITIES) - set(capabilities), set(capabilities) - set(CAPABILITIES)
    if missing or unknown:
        raise ConfigError(f"server {server_name}: capabilities", sorted(missing | unknown),
                          f"must declare exactly {list(CAPABILITIES)}")
    for capability, kind in (("grpc", "grpc"), ("binary_tensors", "binary")):
        if capabilities[capability].declared != (kind in wires):
            raise ConfigError(f"server {server_name}: capabilities[{capability!r}].declared",
                              capabilities[capability].declared, f"must equal whether it has a {kind} wire")


def capability_matrix_markdown(servers: dict[str, type]) -> str:
    """The capability matrix of docs/servers.md: stacks as columns, one row per capability (yes / no, with `(probed)`
    where the live server is checked)."""
    names = sorted(servers)
    lines = ["| capability | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for capability, label in CAPABILITIES.items():
        cells = []
        for name in names:
            declared = servers[name].capabilities[capability]
            cells.append(("yes" if declared.declared else "no") + (" (probed)" if declared.probe else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
