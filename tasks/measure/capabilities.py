"""The capability probes of a live server: each declared capability with a probe (tasks/serve/capabilities.py) is
checked on the server, before its first load point, and recorded with its evidence.

A declared capability whose probe fails is a *finding*: recorded with the reason, counted in the rows'
`capability_findings` and shown in the report. It does not fail the cell: a probe checks what the stack offers (its
metrics route, its readiness route, its gRPC port), not the figures its cells measure, and a load point's outcome
rules stay those of docs/measuring.md. Probes are bounded in time (`PROBE_TIMEOUT_S` each, `PROBES_BUDGET_S` in all)
and speak to loopback addresses only.
"""

from __future__ import annotations

import ipaddress
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from tasks.core.errors import ConfigError
from tasks.serve.base import Endpoint, Server
from tasks.serve.capabilities import CAPABILITIES, Capability, Probe
from tasks.serve.prometheus import samples

PROBE_TIMEOUT_S = 2.0  # one probe's request
PROBES_BUDGET_S = 20.0  # every probe of one server life
EVIDENCE_CHARS = 300
PASSED, FAILED, NOT_PROBED = "passed", "failed", "not probed"

# wire kind -> (passed, evidence): the served-output check over that wire, run by the caller (measure/life.py)
WireCheck = Callable[[str], tuple[bool, str]]


@dataclass(frozen=True)
class CapabilityCheck:
    """One capability of one live server: what was declared, how it was probed, and what the probe found."""

    capability: str
    declared: bool
    how: str
    probe: str  # the probe in words, "" when none
    result: str  # PASSED | FAILED | NOT_PROBED
    evidence: str  # what the probe saw, or why it did not run

    @property
    def finding(self) -> bool:
        """A declared capability that failed its probe."""
        return self.declared and self.result == FAILED

    def to_dict(self) -> dict:
        return {"capability": self.capability, "declared": self.declared, "how": self.how, "probe": self.probe,
                "result": self.result, "evidence": self.evidence}


def require_loopback(host: str) -> None:
    """Probes speak to this machine's loopback only; any other address is refused (ConfigError)."""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ConfigError("probe host", host, "must be a loopback address (127.0.0.0/8, ::1 or localhost)")


def probe_capabilities(server: Server, endpoint: Endpoint, *, capabilities: dict[str, Capability] | None = None,
                       wire_check: WireCheck | None = None, timeout_s: float = PROBE_TIMEOUT_S,
                       budget_s: float = PROBES_BUDGET_S) -> list[CapabilityCheck]:
    """Every capability of `server` (or of `capabilities`, a declaration to check instead), in CAPABILITIES' order,
    its probe run against `endpoint` where it has one. `wire_check(kind)` gives the served-output check over a wire
    (probes of kind wire); without it those are not probed."""
    require_loopback(endpoint.host)
    declared = capabilities if capabilities is not None else server.capabilities
    deadline = time.monotonic() + budget_s
    checks = []
    for name in CAPABILITIES:
        capability = declared.get(name)
        if capability is None:
            checks.append(CapabilityCheck(name, False, "not declared", "", NOT_PROBED,
                                          f"server {server.name} declares nothing about it"))
            continue
        probe = capability.probe
        if probe is None:
            why = ("no probe: nothing on the live server shows it (see how)" if capability.declared
                   else "not offered: nothing to probe")
            checks.append(CapabilityCheck(name, capability.declared, capability.how, "", NOT_PROBED, why))
            continue
        if time.monotonic() >= deadline:
            checks.append(CapabilityCheck(name, capability.declared, capability.how, probe.describe(), NOT_PROBED,
                                          f"the probes' time budget ({budget_s:g} s) was spent"))
            continue
        passed, evidence = run_probe(probe, server, endpoint, wire_check, timeout_s)
        result = NOT_PROBED if passed is None else PASSED if passed else FAILED
        checks.append(CapabilityCheck(name, capability.declared, capability.how, probe.describe(), result,
                                      evidence[:EVIDENCE_CHARS]))
    return checks


def declared_only(server: Server, why: str) -> list[CapabilityCheck]:
    """The declaration alone, for a server that did not run (its cells skipped): nothing probed, and why."""
    return [CapabilityCheck(name, c.declared, c.how, c.probe.describe() if c.probe else "", NOT_PROBED, why)
            for name, c in ((n, server.capabilities.get(n)) for n in CAPABILITIES) if c is not None]


def run_probe(probe: Probe, server: Server, endpoint: Endpoint, wire_check: WireCheck | None,
              timeout_s: float) -> tuple[bool | None, str]:
    """(passed, evidence) of one probe; passed is None when it could not be run (no wire check given)."""
    if probe.kind == "ready":
        ready = server.is_ready(endpoint)
        return ready, f"{server.ready_path} says {'ready' if ready else 'not ready'}"
    if probe.kind == "wire":
        if wire_check is None:
            return None, "no served-output check over the wire was run"
        return wire_check(probe.wire)
    if probe.kind == "kserve_v2":
        return _kserve_v2(endpoint, timeout_s)
    if probe.port not in endpoint.ports:
        return False, f"the server has no port named {probe.port!r} (its ports: {sorted(endpoint.ports)})"
    port = endpoint.ports[probe.port]
    if probe.kind == "grpc":
        return _grpc(endpoint.host, port, probe.method, timeout_s)
    path = probe.path.replace("{model}", endpoint.model_name)
    status, body, error = http_request(endpoint.host, port, path, probe.method, timeout_s)
    if error:
        return False, f"{probe.method} {path}: {error}"
    if status != 200:
        return False, f"{probe.method} {path}: HTTP {status}: {_text(body)}"
    if probe.kind == "prometheus":
        found = samples(body.decode(errors="replace"))
        if not found:
            return False, f"GET {path}: HTTP 200 but no Prometheus sample line in {len(body)} bytes: {_text(body)}"
        return True, f"GET {path}: {len(found)} samples, e.g. {found[0][0]}"
    expect = probe.expect.replace("{model}", endpoint.model_name)
    if expect and expect not in body.decode(errors="replace"):
        return False, f"{probe.method} {path}: HTTP 200 without {expect!r}: {_text(body)}"
    return True, f"{probe.method} {path}: HTTP 200" + (f" with {expect!r}" if expect else "") + f", {len(body)} bytes"


def http_request(host: str, port: int, path: str, method: str = "GET",
                 timeout_s: float = PROBE_TIMEOUT_S) -> tuple[int | None, bytes, str]:
    """(status, body, error) of one request; error is "" when an HTTP answer came (any status)."""
    require_loopback(host)
    data = b"{}" if method == "POST" else None
    request = urllib.request.Request(f"http://{host}:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read(), ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), ""
    except OSError as exc:  # refused, reset, timed out
        return None, b"", f"no answer ({exc})"


def _kserve_v2(endpoint: Endpoint, timeout_s: float) -> tuple[bool, str]:
    """Server metadata (name, version) and model metadata (name, inputs, outputs), as KServe v2 REST requires."""
    found = []
    for path, fields in (("/v2", ("name", "version")), (f"/v2/models/{endpoint.model_name}", ("name", "inputs",
                                                                                             "outputs"))):
        status, body, error = http_request(endpoint.host, endpoint.port, path, "GET", timeout_s)
        if error or status != 200:
            return False, f"GET {path}: {error or f'HTTP {status}: {_text(body)}'}"
        try:
            meta = json.loads(body)
        except ValueError:
            return False, f"GET {path}: not JSON: {_text(body)}"
        missing = [f for f in fields if not isinstance(meta, dict) or f not in meta]
        if missing:
            return False, f"GET {path}: the metadata lacks {missing} (KServe v2 requires {list(fields)})"
        empty = [f for f in ("inputs", "outputs") if f in fields and not meta[f]]
        if empty:
            return False, f"GET {path}: the model metadata lists no {' and no '.join(empty)}"
        found.append(meta)
    server_meta, model_meta = found
    return True, (f"GET /v2: {server_meta['name']} {server_meta['version']}; GET /v2/models/{endpoint.model_name}: "
                  f"{len(model_meta['inputs'])} input(s), {len(model_meta['outputs'])} output(s)")


def _grpc(host: str, port: int, method: str, timeout_s: float) -> tuple[bool, str]:
    """One unary call with an empty request (ServerReady, Ping take no field): it returns, or its status says why."""
    import grpc

    require_loopback(host)
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            reply = channel.unary_unary(method)(b"", timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            return False, f"{method}: gRPC {getattr(code, 'name', code)}: {str(details)[:200]}"
    return True, f"{method} returned {describe_reply(reply)}"


def describe_reply(reply: bytes) -> str:
    """A reply's first field in words (ServerReady's `ready`, Ping's `health`), or its size."""
    if reply[:1] == b"\x08" and len(reply) >= 2:
        return f"field 1 = {reply[1]} ({'true' if reply[1] == 1 else 'false'} as a bool)"
    if reply[:1] == b"\x0a" and len(reply) >= 2 and reply[1] < 0x80:
        return f"field 1 = {reply[2:2 + reply[1]].decode(errors='replace')[:120]!r}"
    return f"{len(reply)} bytes"


def _text(body: bytes) -> str:
    return body[:160].decode(errors="replace").replace("\n", " ").strip() or "(empty)"


def checks_record(checks: list[CapabilityCheck]) -> str:
    """The rows' `capabilities` column: the checks as JSON (capability -> its declaration, probe and result)."""
    return json.dumps({c.capability: {k: v for k, v in c.to_dict().items() if k != "capability"} for c in checks},
                      sort_keys=True)
