"""Triton without a server (tasks/serve/servers/triton.py): model configs and layouts, run specs for process and
container, skip reasons, metrics parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.convert import Artifact
from tasks.core.errors import ConfigError
from tasks.runtimes.venvs import RuntimeEnv
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers import triton as triton_module
from tasks.serve.servers.triton import (
    CONTAINER_PORTS,
    IMAGE,
    OFFICIAL_IMAGE,
    TritonServer,
    parse_counts,
)

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
