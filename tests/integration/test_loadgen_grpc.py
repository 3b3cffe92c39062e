"""KServe v2 gRPC load against a real Triton: closed and open loop counts agree with the server's, an unknown
model counts as errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.loadgen.protocols.base import OK

READY_TIMEOUT_S = 90.0


SHORT = {"duration_s": 2.0, "warmup_s": 0.5, "window_s": 0.5}


@pytest.fixture(scope="module")
def triton_grpc(mlp_onnx, mlp_spec, tmp_path_factory):
    """One Triton for the gRPC load tests: (server, live session, gRPC endpoint)."""
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.servers.triton import TritonServer
    from tasks.serve.session import SessionSettings, server_session

    server = TritonServer()
    log_dir = tmp_path_factory.mktemp("logs")
    with server_session(server, mlp_onnx, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test-loadgen-grpc", session_id="loadgen-triton-grpc", log_dir=log_dir,
                                        ready_timeout_s=READY_TIMEOUT_S)) as live:
        yield server, live, server.wire_endpoint(live.endpoint, server.wires["grpc"].codec)


@pytest.mark.integration
def test_triton_grpc_closed_and_open_loop_counts_agree_with_server(triton_grpc, mlp_spec, tmp_path):
    """Expected request counts over gRPC, and Triton's nv_inference_request_success within 2% of the client's."""
    from tasks.loadgen.coordinator import run_load_point
    from tasks.loadgen.recording import Recording
    from tasks.loadgen.settings import LoadSettings
    from tasks.measure.hoststate import ServerReader
    from tasks.measure.window_reader import LiveServerWindowReader
    from tests.integration.test_loadgen_servers import _check_counts

    _, live, endpoint = triton_grpc
    reader = LiveServerWindowReader(ServerReader(live.handle), live)  # Triton's counter, read over REST

    for i, settings in enumerate((LoadSettings(mode="concurrency", load=4, **SHORT),
                                  LoadSettings(mode="rate", load=100, arrival="poisson", seed=5, **SHORT))):
        measurement, path = run_load_point(endpoint, mlp_spec, settings, tmp_path / str(i), server=reader)
        _check_counts(measurement, settings)
        assert measurement.latency_from == ("sent" if settings.mode == "concurrency" else "scheduled")
        assert measurement.server_requests == pytest.approx(measurement.server_client_requests, rel=0.02)
        recording = Recording.load(str(path))
        assert Path(path).exists() and (recording.codes == OK).all()


@pytest.mark.integration
def test_triton_grpc_unknown_model_counts_not_found_as_errors(triton_grpc, mlp_spec, tmp_path):
    """Every call to a model Triton does not have fails with NOT_FOUND: counted by kind, no latency figures."""
    from dataclasses import replace

    from tasks.loadgen.coordinator import run_load_point
    from tasks.loadgen.settings import LoadSettings

    _, _, endpoint = triton_grpc
    settings = LoadSettings(mode="concurrency", load=2, duration_s=1.0, warmup_s=0.2, window_s=0.5)
    measurement, _ = run_load_point(replace(endpoint, model_name="no_such_model"), mlp_spec, settings, tmp_path)
    assert measurement.requests > 0 and measurement.errors == measurement.requests
    assert measurement.errors_by_kind == {"http_status": measurement.requests}
    assert measurement.latency_ms_p99 is None and measurement.throughput_rps == 0
