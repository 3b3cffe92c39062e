"""Triton: the real tritonserver 2.51 (nvidia-pytriton wheel) per format, HTTP + gRPC, dynamic batching, metrics,
failures at start-up; config.pbtxt of every native backend and the container parameters (no process)."""

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
from tasks.runtimes.venvs import RuntimeEnv
from tasks.serve.base import RunSpec
from tasks.serve.launchers.process import ProcessLauncher
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers import triton as triton_module
from tasks.serve.servers.triton import (
    CONTAINER_PORTS,
    IMAGE,
    OFFICIAL_IMAGE,
    PYTHON_ENV_GLOB,
    TritonServer,
    parse_counts,
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
    from tasks.loadgen.run import output_shapes

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
    from tasks.loadgen.run import output_shapes

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


# --- no process: model configuration, layout, container parameters -------------------------------------------

def fake_artifact(tmp_path: Path, fmt: str) -> Artifact:
    if fmt == "savedmodel":
        path = tmp_path / "saved"
        (path / "variables").mkdir(parents=True)
        (path / "saved_model.pb").write_bytes(b"pb")
    else:
        path = tmp_path / f"model.{fmt}"
        path.write_bytes(b"model bytes")
    return Artifact(model="mlp", format=fmt, path=str(path), sha256="", key="", cache_hit=False, record={})


@pytest.fixture()
def fake_runtime(tmp_path, monkeypatch) -> RuntimeEnv:
    """A venv laid out like the triton runtime (no binaries run), so run_spec needs no real runtime."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    root = site / "pytriton" / "tritonserver"
    for path in (root / "bin" / "tritonserver", root / "backends" / "python" / "libtriton_python.so",
                 root / "python_backend_stubs" / "3.11" / "triton_python_backend_stub"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    (site / "nvidia_pytriton.libs").mkdir()
    home = tmp_path / "python" / "bin"
    (home.parent / "lib").mkdir(parents=True)
    (home.parent / "lib" / "libpython3.11.so.1.0").write_bytes(b"")
    (venv / "pyvenv.cfg").write_text(f"home = {home}\nversion = 3.11.7\n")
    env = RuntimeEnv("triton", venv, "0" * 64, built_now=False, build_s=0.0)
    monkeypatch.setattr(triton_module, "ensure_runtime", lambda name: env)
    return env


def config_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize(("fmt", "platform", "filename"), [
    ("onnx", "onnxruntime_onnx", "model.onnx"),
    ("torchscript", "pytorch_libtorch", "model.pt"),
    ("savedmodel", "tensorflow_savedmodel", "model.savedmodel"),
    ("tensorrt", "tensorrt_plan", "model.plan"),
])
def test_native_config_and_layout(fmt, platform, filename, mlp_spec, tmp_path):
    server = TritonServer(ServingOptions(max_batch_size=16, dynamic_batching=True, batch_delay_us=500, instances=2))
    layout = server.write_layout(fake_artifact(tmp_path, fmt), mlp_spec, tmp_path / "work")
    model_dir = layout / "native" / "mlp"
    assert (model_dir / "1" / filename).exists()
    lines = config_lines((model_dir / "config.pbtxt").read_text())
    assert lines[:3] == ['name: "mlp"', f'platform: "{platform}"', "max_batch_size: 16"]
    assert '{ name: "input" data_type: TYPE_FP32 dims: [ 64 ] }' in lines
    assert '{ name: "output" data_type: TYPE_FP32 dims: [ 10 ] }' in lines
    assert "dynamic_batching { max_queue_delay_microseconds: 500 }" in lines
    assert "instance_group [ { count: 2 kind: KIND_CPU } ]" in lines
    assert (layout / "python").is_dir() == (fmt in ("onnx", "torchscript"))


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_python_backend_model_for_process_runs(fmt, mlp_spec, tmp_path):
    server = TritonServer(ServingOptions(device="cpu", instances=3))
    layout = server.write_layout(fake_artifact(tmp_path, fmt), mlp_spec, tmp_path / "work")
    model_dir = layout / "python" / "mlp"
    filename = {"onnx": "model.onnx", "torchscript": "model.pt"}[fmt]
    assert (model_dir / "1" / filename).read_bytes() == b"model bytes"
    assert "class TritonPythonModel" in (model_dir / "1" / "model.py").read_text()
    lines = config_lines((model_dir / "config.pbtxt").read_text())
    assert 'backend: "python"' in lines and "max_batch_size: 8" in lines
    assert not any(line.startswith("dynamic_batching") for line in lines)  # off by default
    assert "instance_group [ { count: 3 kind: KIND_CPU } ]" in lines
    engine = {"onnx": "onnxruntime", "torchscript": "torchscript"}[fmt]
    assert f'parameters {{ key: "engine" value: {{ string_value: "{engine}" }} }}' in lines
    assert f'parameters {{ key: "model_filename" value: {{ string_value: "{filename}" }} }}' in lines


@pytest.mark.parametrize(("device", "kind"), [("cpu", "KIND_CPU"), ("gpu", "KIND_GPU")])
def test_instance_kind_and_batching_off(device, kind, mlp_spec):
    server = TritonServer(ServingOptions(device=device, dynamic_batching=False, instances=1))
    text = server.config_text(mlp_spec, "onnx")
    assert f"instance_group [ {{ count: 1 kind: {kind} }} ]" in text
    assert "dynamic_batching" not in text
    # the python backend of the local runtime is CPU-only
    assert "kind: KIND_CPU" in server.config_text(mlp_spec, "onnx", python_backend=True)


def test_unsupported_dtype_names_the_field(mlp_spec):
    import dataclasses

    from tasks.core.spec import TensorSpec

    spec = dataclasses.replace(mlp_spec, inputs=(TensorSpec("words", "string", (-1, 4)),))
    with pytest.raises(ConfigError, match="input words: dtype='string'"):
        TritonServer().config_text(spec, "onnx")
    with pytest.raises(ConfigError, match="python backend serves only"):
        TritonServer().config_text(mlp_spec, "savedmodel", python_backend=True)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_run_spec_process_and_container(device, mlp_spec, tmp_path, fake_runtime):
    server = TritonServer(ServingOptions(device=device))
    layout = server.write_layout(fake_artifact(tmp_path, "onnx"), mlp_spec, tmp_path / "work")
    ports = {"http": 41000, "grpc": 41001, "metrics": 41002}
    run = server.run_spec(layout, mlp_spec, ports)
    # process: the wheel's binary on loopback over the python-backend repository, a private backend folder
    assert run.runtime == "triton" and run.argv[0].endswith("pytriton/tritonserver/bin/tritonserver")
    assert f"--model-repository={(layout / 'python').resolve()}" in run.argv
    backends = layout.resolve() / "backends"
    assert f"--backend-directory={backends}" in run.argv
    assert (backends / "python" / "triton_python_backend_stub").stat().st_mode & 0o111
    assert (backends / "python" / "libtriton_python.so").exists()
    for flag in ("--http-address=127.0.0.1", "--http-port=41000", "--grpc-address=127.0.0.1", "--grpc-port=41001",
                 "--metrics-address=127.0.0.1", "--metrics-port=41002", "--pinned-memory-pool-byte-size=0",
                 "--exit-on-error=true", "--strict-readiness=true"):
        assert flag in run.argv, flag
    assert "--backend-config=python,shm-region-prefix-name=triton_python_backend_shm_region_p41000_" in run.argv
    ld_path = run.env["LD_LIBRARY_PATH"].split(":")
    assert ld_path[0] == str(tmp_path / "python" / "lib")  # the base interpreter's libpython first
    assert ld_path[1].endswith("site-packages/nvidia_pytriton.libs")
    assert run.cleanup_globs == ("/tmp/python_env_*",)
    # container: the project image (the wheel's server) over the python repository, the layout mounted read-only
    # at /models, fixed container ports
    assert run.image == IMAGE == "serving-eval/triton"
    assert run.container_argv[0] == "--model-repository=/models/python"  # the image's entry point is tritonserver
    assert run.container_ports == CONTAINER_PORTS == {"http": 8000, "grpc": 8001, "metrics": 8002}
    assert set(run.container_ports) == set(server.port_names)
    assert run.mounts == {str(layout.resolve()): "/models"}
    assert run.device == device
    assert ("--pinned-memory-pool-byte-size=0" in run.container_argv) == (device == "cpu")
    assert not any(str(tmp_path) in arg for arg in run.container_argv)
    # images=official: NVIDIA's image over the native repository
    official = TritonServer(ServingOptions(device=device, images="official")).run_spec(layout, mlp_spec, ports)
    assert official.image == OFFICIAL_IMAGE and OFFICIAL_IMAGE.endswith("tritonserver:24.10-py3")
    assert official.container_argv[:2] == ("tritonserver", "--model-repository=/models/native")
    assert ("--pinned-memory-pool-byte-size=0" in official.container_argv) == (device == "cpu")


def test_process_argv_falls_back_to_native_repository_for_native_only_formats(mlp_spec, tmp_path, fake_runtime):
    server = TritonServer(ServingOptions(device="gpu"))
    layout = server.write_layout(fake_artifact(tmp_path, "tensorrt"), mlp_spec, tmp_path / "work")
    run = server.run_spec(layout, mlp_spec, {"http": 1, "grpc": 2, "metrics": 3})
    assert f"--model-repository={(layout / 'native').resolve()}" in run.argv


def test_skip_reasons(monkeypatch):
    cpu, gpu = TritonServer(), TritonServer(ServingOptions(device="gpu"))
    assert cpu.skip_reason("process") is None and cpu.skip_reason("docker") is None
    assert cpu.skip_reason("process", fmt="onnx") is None and cpu.skip_reason("process", fmt="torchscript") is None
    assert cpu.skip_reason("docker", fmt="onnx") is None  # the project image serves the python-backend formats
    assert "needs Docker" in cpu.skip_reason("process", fmt="savedmodel")
    assert "images=official" in cpu.skip_reason("docker", fmt="savedmodel")  # native backends: NVIDIA's image
    assert "needs an NVIDIA GPU" in cpu.skip_reason("docker", fmt="tensorrt")
    assert "CPU-only" in gpu.skip_reason("process") and "CPU-only" in gpu.skip_reason("docker")
    official = {"device": "gpu", "images": "official"}
    monkeypatch.setattr("tasks.serve.servers.triton.official_unavailable_reason", lambda ref: None)
    assert TritonServer(ServingOptions(**official)).skip_reason("docker", fmt="tensorrt") is None
    assert TritonServer(ServingOptions(images="official")).skip_reason("docker", fmt="savedmodel") is None
    monkeypatch.setattr("tasks.serve.servers.triton.official_unavailable_reason", lambda ref: f"needs {ref}")
    assert TritonServer(ServingOptions(**official)).skip_reason("docker", fmt="tensorrt") == f"needs {OFFICIAL_IMAGE}"


def test_parse_counts_sums_over_models():
    text = "\n".join([
        "# HELP nv_inference_count Number of inferences performed",
        "# TYPE nv_inference_count counter",
        'nv_inference_count{model="a",version="1"} 40',
        'nv_inference_count{model="b",version="1"} 2',
        'nv_inference_exec_count{model="a",version="1"} 10',
        'nv_inference_request_success{model="a",version="1"} 40',
        'nv_inference_request_success{model="b",version="1"} 1',
        'nv_inference_request_duration_us{model="a",version="1"} 12345',
        "nv_cpu_utilization 0.5",
    ])
    assert parse_counts(text) == {"nv_inference_request_success": 41.0, "nv_inference_request_failure": 0.0,
                                  "nv_inference_count": 42.0, "nv_inference_exec_count": 10.0}


def test_registered():
    server = get_server("triton", ServingOptions(dynamic_batching=True))
    assert isinstance(server, TritonServer) and server.options.dynamic_batching
    assert server.protocol == "kserve_v2_rest" and server.metrics_port == "metrics"
    assert set(server.engines) == set(server.formats)
