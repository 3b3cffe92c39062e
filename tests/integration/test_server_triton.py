"""Triton: the real tritonserver (nvidia-pytriton wheel) per format, HTTP + gRPC, dynamic batching; start-up
failures that end fast with their log tail and leave nothing behind."""

from __future__ import annotations

import glob
import socket
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import psutil
import pytest

from tasks.convert import Artifact
from tasks.core.errors import ConfigError, ServerStartError
from tasks.core.spec import make_inputs
from tasks.runtimes.ports import free_ports
from tasks.serve.base import RunSpec
from tasks.serve.launchers.process import ProcessLauncher
from tasks.serve.options import ServingOptions
from tasks.serve.servers.triton import (
    PYTHON_ENV_GLOB,
    TritonServer,
)
from tasks.serve.session import SessionSettings, server_session
from tests.helpers import (
    assert_probes_pass,
    is_loopback,
    listening_addresses,
    port_free,
    post,
    probe_live_capabilities,
    reference_outputs,
    shm_entries,
    split_request,
    tree_pids,
)

BATCH_SIZES = (1, 4)


VERSION = "triton 2.51.0"


READY_TIMEOUT_S = 90.0


CONCURRENCY = 16


CONCURRENT_S = 2.0


START_FAILURE_MAX_S = 45.0  # a load failure or a taken port must end the start-up long before the ready timeout


BATCHING = ServingOptions(dynamic_batching=True, max_batch_size=8, batch_delay_us=2000)


@pytest.fixture(scope="module")
def references(mlp_torchscript, mlp_spec):
    return {b: reference_outputs(mlp_torchscript, mlp_spec, b) for b in BATCH_SIZES}


def python_envs() -> set[str]:
    return set(glob.glob(PYTHON_ENV_GLOB))


def _http_infer(live, spec, batch_size: int) -> dict[str, np.ndarray]:
    from tasks.loadgen.protocols import get_codec
    from tasks.loadgen.worker import output_shapes

    codec = get_codec("kserve_v2_rest")(live.endpoint.host, live.endpoint.port, live.endpoint.model_name,
                                        make_inputs(spec, batch_size), output_shapes(spec, batch_size))
    path, body = split_request(codec.request_bytes())
    status, response = post(live.endpoint.base_url + path, body)
    assert codec.check(status, response) == 0, (status, response[:500])
    return codec.decode(response)


def _grpc_infer(live, spec, batch_size: int) -> dict[str, np.ndarray]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{live.endpoint.ports['grpc']}")
    try:
        inputs = []
        for name, array in make_inputs(spec, batch_size).items():
            tensor = grpcclient.InferInput(name, list(array.shape), "FP32")
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        outputs = [grpcclient.InferRequestedOutput(t.name) for t in spec.outputs]
        result = client.infer(live.endpoint.model_name, inputs, outputs=outputs)
        return {t.name: result.as_numpy(t.name) for t in spec.outputs}
    finally:
        client.close()


def _concurrent_requests(live, spec) -> int:
    """CONCURRENCY threads send single-row HTTP requests for CONCURRENT_S; returns how many were answered OK."""
    from tasks.loadgen.protocols import get_codec
    from tasks.loadgen.worker import output_shapes

    codec = get_codec("kserve_v2_rest")(live.endpoint.host, live.endpoint.port, live.endpoint.model_name,
                                        make_inputs(spec, 1), output_shapes(spec, 1))
    path, body = split_request(codec.request_bytes())
    url = live.endpoint.base_url + path
    answered, failed = [0] * CONCURRENCY, [0] * CONCURRENCY
    deadline = time.monotonic() + CONCURRENT_S

    def client(i: int) -> None:
        while time.monotonic() < deadline:
            status, _ = post(url, body)
            if status == 200:
                answered[i] += 1
            else:
                failed[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(failed) == 0, f"{sum(failed)} of {sum(answered) + sum(failed)} requests failed"
    return sum(answered)


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_triton_serves_http_grpc_with_dynamic_batching(fmt, mlp_spec, references, log_dir, request):
    artifact = request.getfixturevalue(f"mlp_{fmt}")
    server = TritonServer(BATCHING)
    shm_before, envs_before = shm_entries(), python_envs()
    seen: dict = {}
    with server_session(server, artifact, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test", session_id=f"triton-{fmt}", log_dir=log_dir,
                                        ready_timeout_s=READY_TIMEOUT_S)) as live:
        seen.update(handle=live.handle, ports=dict(live.endpoint.ports))
        assert server.is_ready(live.endpoint)
        assert live.server_version == VERSION
        for batch_size, expected in references.items():
            outputs = _http_infer(live, mlp_spec, batch_size)
            for name, want in expected.items():
                np.testing.assert_allclose(outputs[name], want, atol=mlp_spec.parity_atol, rtol=mlp_spec.parity_rtol)
        outputs = _grpc_infer(live, mlp_spec, 4)
        for name, want in references[4].items():
            np.testing.assert_allclose(outputs[name], want, atol=mlp_spec.parity_atol, rtol=mlp_spec.parity_rtol)
        checks = {c.capability: c for c in probe_live_capabilities(live, mlp_spec, artifact)}
        assert_probes_pass(list(checks.values()))
        assert {n for n, c in checks.items() if c.result == "passed"} >= {
            "multi_model", "model_versions", "metrics", "health_readiness", "grpc", "binary_tensors", "kserve_v2"}

        before = server.server_side_counts(live.endpoint)
        sent = _concurrent_requests(live, mlp_spec)
        after = server.server_side_counts(live.endpoint)
        delta = {k: after[k] - before[k] for k in after}
        assert delta["nv_inference_request_success"] == sent, (delta, sent)
        assert delta["nv_inference_request_failure"] == 0
        assert delta["nv_inference_count"] == sent  # one row per request
        average_batch = delta["nv_inference_count"] / delta["nv_inference_exec_count"]
        assert average_batch > 1, f"dynamic batching did not batch: {delta}"
        print(f"{fmt}: {sent} requests in {CONCURRENT_S} s, average batch {average_batch:.2f}, startup "
              f"{live.startup_s:.1f} s")

        pids = tree_pids(live.handle.pid, live.handle.pgid)
        assert len(pids) >= 2  # tritonserver and a python-backend stub
        listeners = listening_addresses(pids)
        assert {port for _, port in listeners} >= set(live.endpoint.ports.values())
        assert all(is_loopback(address) for address, _ in listeners), listeners
        seen["pids"] = pids
    _assert_nothing_left(seen, shm_before, envs_before)


def _assert_nothing_left(seen: dict, shm_before: set[str], envs_before: set[str]) -> None:
    handle = seen["handle"]
    left = tree_pids(handle.pid, handle.pgid) | {pid for pid in seen["pids"] if psutil.pid_exists(pid)
                                                  and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE}
    assert not left, f"left running: {left}"
    assert all(port_free(port) for port in seen["ports"].values()), seen["ports"]
    assert not Path(handle.workdir).exists()
    assert shm_entries() <= shm_before
    assert python_envs() <= envs_before


def _servers_on(port: int) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if any(arg == f"--http-port={port}" for arg in proc.info["cmdline"] or ()):
            found.append(proc.pid)
    return found


def session_workdirs() -> set[str]:
    return set(glob.glob(str(Path(tempfile.gettempdir()) / "serving-eval-triton-*")))


def _assert_failed_start_left_nothing(ports: dict[str, int], before: dict[str, set[str]]) -> None:
    assert not _servers_on(ports["http"])
    assert shm_entries() <= before["shm"]
    assert python_envs() <= before["python_envs"]
    assert session_workdirs() <= before["workdirs"]


def snapshot() -> dict[str, set[str]]:
    return {"shm": shm_entries(), "python_envs": python_envs(), "workdirs": session_workdirs()}


@pytest.mark.integration
def test_corrupt_model_fails_fast_with_log_tail(mlp_spec, tmp_path, log_dir):
    corrupt = tmp_path / "model.onnx"
    corrupt.write_bytes(b"this is not an ONNX model")
    artifact = Artifact(model="mlp", format="onnx", path=str(corrupt), sha256="", key="", cache_hit=False, record={})
    ports = free_ports(TritonServer.port_names)
    before = snapshot()
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        with server_session(TritonServer(), artifact, mlp_spec, ProcessLauncher(),
                            SessionSettings(run_id="test", session_id="triton-corrupt", log_dir=log_dir,
                                            ready_timeout_s=READY_TIMEOUT_S), ports=ports):
            pass
    assert time.monotonic() - started < START_FAILURE_MAX_S
    message = str(info.value)
    assert "exited with code" in message and "log tail" in message
    assert "failed to load" in message, message[-2000:]
    _assert_failed_start_left_nothing(ports, before)


@pytest.mark.integration
def test_port_taken_fails_with_log_tail(mlp_onnx, mlp_spec, log_dir):
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        ports = {**free_ports(TritonServer.port_names), "http": taken.getsockname()[1]}
        before = snapshot()
        started = time.monotonic()
        with pytest.raises(ServerStartError) as info:
            with server_session(TritonServer(), mlp_onnx, mlp_spec, ProcessLauncher(),
                                SessionSettings(run_id="test", session_id="triton-port-taken", log_dir=log_dir,
                                                ready_timeout_s=READY_TIMEOUT_S), ports=ports):
                pass
        assert time.monotonic() - started < START_FAILURE_MAX_S
    assert "already in use" in str(info.value), str(info.value)[-2000:]
    _assert_failed_start_left_nothing(ports, before)


@pytest.mark.integration
def test_process_launcher_removes_new_cleanup_glob_entries(tmp_path, log_dir):
    """The launcher removes entries of RunSpec.cleanup_globs that appeared after the start, and only those."""
    (tmp_path / "leak_old").mkdir()
    script = ("import os, sys, time; os.mkdir(sys.argv[1]); open(sys.argv[2], 'w').close(); "
              "print('made', flush=True); time.sleep(60)")
    spec = RunSpec(runtime="triton", argv=("python", "-c", script, str(tmp_path / "leak_dir"),
                                           str(tmp_path / "leak_file")),
                   ports={}, cleanup_globs=(str(tmp_path / "leak_*"),))
    launcher = ProcessLauncher()
    workdir = tmp_path / "work"
    workdir.mkdir()
    handle = launcher.start(spec, run_id="test", cell_id="cleanup-globs", workdir=workdir, log_path=log_dir / "c.log")
    deadline = time.monotonic() + 30
    while not (tmp_path / "leak_file").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    launcher.stop(handle, grace_s=2.0)
    assert sorted(p.name for p in tmp_path.glob("leak_*")) == ["leak_old"]
    with pytest.raises(ConfigError, match="cleanup_globs"):
        launcher.start(RunSpec(runtime="triton", argv=("python",), ports={}, cleanup_globs=("leak_*",)),
                       run_id="test", cell_id="relative", workdir=workdir, log_path=log_dir / "r.log")
