"""KServe without a server (tasks/serve/servers/kserve.py): registration, skips, container parameters, manifest."""

from __future__ import annotations

import json

import yaml

from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers.kserve import CONTAINER_PORTS, MANIFEST, KServeServer


def test_registered_and_skips():
    assert isinstance(get_server("kserve"), KServeServer)
    assert KServeServer().skip_reason("process") is None
    assert "dynamic_batching" in KServeServer(ServingOptions(dynamic_batching=True)).skip_reason("process")


def test_container_parameters(mlp_onnx, mlp_spec, tmp_path):
    server = KServeServer(ServingOptions(instances=2))
    layout = server.write_layout(mlp_onnx, mlp_spec, tmp_path)
    config = json.loads((layout / "model.json").read_text())
    assert config["format"] == "onnx" and (layout / config["model_file"]).is_file()
    run = server.run_spec(layout, mlp_spec, {"http": 44000, "grpc": 44001})
    assert run.argv[0] == "python" and run.argv[1].endswith("docker/kserve/server.py")

    def flag(argv, name):
        return argv[argv.index(name) + 1]

    assert (flag(run.argv, "--bind_host"), flag(run.argv, "--http_port"), flag(run.argv, "--grpc_port")) == (
        "127.0.0.1", "44000", "44001")
    assert flag(run.argv, "--threads") == "2" and flag(run.argv, "--enable_latency_logging") == "false"
    assert run.image == "serving-eval/kserve"
    assert flag(run.container_argv, "--model_dir") == "/models" and flag(run.container_argv, "--bind_host") == "0.0.0.0"
    assert flag(run.container_argv, "--http_port") == str(CONTAINER_PORTS["http"])
    assert run.container_ports == CONTAINER_PORTS and set(run.container_ports) == set(server.port_names)
    assert run.mounts == {str(layout): "/models"}


def test_inference_service_manifest(mlp_onnx, mlp_spec, tmp_path):
    server = KServeServer()
    layout = server.write_layout(mlp_onnx, mlp_spec, tmp_path)
    manifest = yaml.safe_load((layout / MANIFEST).read_text())
    assert manifest == yaml.safe_load(server.inference_service_manifest(mlp_spec, "serving-eval/kserve"))
    assert (manifest["apiVersion"], manifest["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert manifest["metadata"]["name"] == "mlp"
    (container,) = manifest["spec"]["predictor"]["containers"]
    assert container["name"] == "kserve-container" and container["image"] == "serving-eval/kserve"
    args = container["args"]
    assert args[args.index("--model_dir") + 1] == "/mnt/models" and args[args.index("--bind_host") + 1] == "0.0.0.0"
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": 8080}
    assert {"name": "STORAGE_URI", "value": "s3://CHANGE-ME/models/mlp/"} in container["env"]
    custom = server.inference_service_manifest(mlp_spec, "registry.example/kserve:1", storage_uri="pvc://models/{model}")
    assert "pvc://models/mlp" in custom and "registry.example/kserve:1" in custom
