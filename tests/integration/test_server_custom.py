"""The custom FastAPI service: a real server per engine (ONNX Runtime, TorchScript, TensorFlow SavedModel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.convert.parity import load_reference
from tasks.serve.capabilities import Capability, Probe
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tests.helpers import serve_and_check

VERSION = "serving-eval-custom 0.1.0"


def source_references(artifact, spec) -> dict[int, dict]:
    """The source model's own outputs, which the converter kept beside the artifact (batch size -> outputs)."""
    outputs = load_reference(Path(artifact.path).parent, spec)
    return {bs: {t.name: out for t, out in zip(spec.outputs, outs, strict=True)} for bs, outs in outputs.items()}


# A declaration pointed wrong, probed on the same live server: a metrics route that answers JSON, and a gRPC
# ServerReady call on its HTTP/1.1 port.
WRONG_PROBES = {
    "metrics": Capability(True, "pointed at the readiness route", Probe("prometheus", path="/v2/health/ready")),
    "grpc": Capability(True, "pointed at the REST port",
                       Probe("grpc", port="http", method="/inference.GRPCInferenceService/ServerReady")),
}


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_custom_serves_mlp(fmt, request, mlp_spec, log_dir):
    artifact = request.getfixturevalue(f"mlp_{fmt}")
    seen = serve_and_check(get_server("custom"), artifact, mlp_spec, log_dir, source_references(artifact, mlp_spec),
                           VERSION, wrong_probes=WRONG_PROBES)
    assert seen["startup_s"] > 0
    checks = {c.capability: c for c in seen["capabilities"]}
    assert {n for n, c in checks.items() if c.result == "passed"} == {"metrics", "health_readiness", "binary_tensors",
                                                                      "kserve_v2"}
    assert "1 input(s), 1 output(s)" in checks["kserve_v2"].evidence  # the v2 model metadata lists its outputs
    assert not any(c.finding for c in checks.values())
    wrong = {c.capability: c for c in seen["wrong_probes"]}
    assert {n for n, c in wrong.items() if c.finding} == {"metrics", "grpc"}
    assert "no Prometheus sample line" in wrong["metrics"].evidence
    assert wrong["grpc"].evidence.startswith("/inference.GRPCInferenceService/ServerReady: gRPC ")


@pytest.mark.integration
def test_custom_serves_a_tensorflow_savedmodel(log_dir):
    from tasks.convert import convert
    from tasks.core.spec import load_spec

    spec = load_spec("tiny-cnn-tf")
    artifact = convert(spec, "savedmodel")
    serve_and_check(get_server("custom"), artifact, spec, log_dir, source_references(artifact, spec), VERSION,
                    ready_timeout_s=120)


@pytest.mark.integration
def test_two_workers_answer_keep_alive_requests_on_one_connection(mlp_onnx, mlp_spec, log_dir):
    """Two workers behind one listener answer 30 keep-alive requests on one connection, each correctly.
    uvicorn's multi-worker listener leaves Nagle on (its issue #3149): each keep-alive response would then wait
    ~40 ms for the client's delayed ACK. The service sets TCP_NODELAY itself; the latency that shows it is a
    figure of the machine (printed here; benchmarks/null_server.py), not a bound a busy machine could cross."""
    import http.client
    import statistics
    import time

    from tasks.core.spec import make_inputs
    from tasks.loadgen.protocols import get_codec
    from tasks.loadgen.worker import output_shapes
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.session import SessionSettings, server_session
    from tests.helpers import split_request

    server = get_server("custom", ServingOptions(instances=2, cpus=1))
    with server_session(server, mlp_onnx, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test", session_id="custom-2-workers", log_dir=log_dir,
                                        ready_timeout_s=90)) as live:
        codec = get_codec(server.protocol)(live.endpoint.host, live.endpoint.port, live.endpoint.model_name,
                                           make_inputs(mlp_spec, 1), output_shapes(mlp_spec, 1))
        path, body = split_request(codec.request_bytes())
        connection = http.client.HTTPConnection(live.endpoint.host, live.endpoint.port, timeout=10)
        took_ms = []
        try:
            for _ in range(30):  # one connection: every request after the first is a keep-alive request
                started = time.perf_counter()
                connection.request("POST", path, body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                assert codec.check(response.status, response.read()) == 0
                took_ms.append((time.perf_counter() - started) * 1000)
        finally:
            connection.close()
    # How fast they come back is a figure of the machine (benchmarks/null_server.py); printed for the record.
    print(f"\nkeep-alive requests: median {statistics.median(took_ms[1:]):.1f} ms of {sorted(took_ms)}")
