"""Capability probes (tasks/measure/capabilities.py) against a tiny in-process HTTP server: pass or fail with
their reason, bounded by their budget, loopback only."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from tasks.core.errors import ConfigError
from tasks.measure.capabilities import probe_capabilities
from tasks.serve.base import Endpoint
from tasks.serve.capabilities import CAPABILITIES, Capability, Probe
from tasks.serve.servers.custom import CustomServer


class _Handler(http.server.BaseHTTPRequestHandler):
    """/metrics: Prometheus text; /not-metrics: JSON; /v2/health/ready: 503 (not ready); /v2 and /v2/models/m: KServe
    v2 metadata without the model's outputs; anything else 404."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        routes = {
            "/metrics": (200, b"# TYPE requests_total counter\nrequests_total 3\n"),
            "/not-metrics": (200, b'{"ready": true}'),
            "/v2/health/ready": (503, b"loading"),
            "/v2": (200, b'{"name": "tiny", "version": "1"}'),
            "/v2/models/m": (200, b'{"name": "m", "inputs": [{"name": "x"}]}'),
        }
        status, body = routes.get(self.path, (404, b"no such route"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def tiny_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_probes_of_a_real_http_server_pass_fail_with_their_reason_and_are_bounded(tiny_server):
    endpoint = Endpoint("127.0.0.1", tiny_server, "m", "kserve_v2_rest",
                        {"http": tiny_server, "grpc": _closed_port()})
    declared = {
        "metrics": Capability(True, "Prometheus text", Probe("prometheus", path="/metrics")),
        "multi_model": Capability(True, "pointed at a JSON route", Probe("prometheus", path="/not-metrics")),
        "model_versions": Capability(True, "a route that is not there", Probe("http", path="/v2/models/{model}/1")),
        "health_readiness": Capability(True, "503 while loading", Probe("ready")),
        "kserve_v2": Capability(True, "metadata without outputs", Probe("kserve_v2")),
        "grpc": Capability(True, "nothing listens", Probe("grpc", port="grpc", method="/pkg.Svc/Ready")),
        "binary_tensors": Capability(True, "its served check", Probe("wire", wire="binary")),
        "hot_reload": Capability(False, "not offered"),
    }
    started = time.monotonic()
    checks = {c.capability: c for c in probe_capabilities(CustomServer(), endpoint, capabilities=declared,
                                                          timeout_s=1.0)}
    assert time.monotonic() - started < 10
    assert list(checks) == list(CAPABILITIES)
    assert checks["metrics"].result == "passed" and "1 samples, e.g. requests_total" in checks["metrics"].evidence
    findings = {name for name, c in checks.items() if c.finding}
    assert findings == {"multi_model", "model_versions", "health_readiness", "kserve_v2", "grpc"}
    assert "no Prometheus sample line" in checks["multi_model"].evidence
    assert "HTTP 404" in checks["model_versions"].evidence and "/v2/models/m/1" in checks["model_versions"].evidence
    assert checks["health_readiness"].evidence == "/v2/health/ready says not ready"
    assert "lacks ['outputs']" in checks["kserve_v2"].evidence
    assert "gRPC UNAVAILABLE" in checks["grpc"].evidence
    # no served-output check given: the wire probe did not run, which is no finding
    assert checks["binary_tensors"].result == "not probed" and not checks["binary_tensors"].finding
    assert checks["hot_reload"].result == "not probed" and checks["dynamic_batching"].how == "not declared"


def test_probes_stop_at_their_budget_and_touch_loopback_only(tiny_server):
    endpoint = Endpoint("127.0.0.1", tiny_server, "m", "kserve_v2_rest", {"http": tiny_server})
    checks = probe_capabilities(CustomServer(), endpoint, budget_s=0.0)
    probed = [c for c in checks if c.probe]
    assert probed and all(c.result == "not probed" and "time budget" in c.evidence for c in probed)
    with pytest.raises(ConfigError, match="must be a loopback address"):
        probe_capabilities(CustomServer(), Endpoint("10.1.2.3", 80, "m", "kserve_v2_rest", {"http": 80}))
