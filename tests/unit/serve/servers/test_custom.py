"""The custom service without a server (tasks/serve/servers/custom.py): its container parameters."""

from __future__ import annotations

from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers.custom import CustomServer


def test_custom_container_parameters(mlp_onnx, mlp_spec, tmp_path):
    server = get_server("custom")
    layout = server.write_layout(mlp_onnx, mlp_spec, tmp_path)
    spec = server.run_spec(layout, mlp_spec, {"http": 18000})
    assert spec.image == "serving-eval/custom"  # the Docker launcher resolves the hashed tag
    assert spec.container_ports == {"http": 8000} and spec.mounts == {str(layout): "/models"}
    assert spec.argv[spec.argv.index("--host") + 1] == "127.0.0.1"
    assert "--inputs" in spec.container_argv and "input" in spec.container_argv
    assert get_server("custom", ServingOptions(device="gpu")).skip_reason("process", fmt="onnx")


def test_the_server_name_is_this_server():
    assert isinstance(get_server("custom"), CustomServer)
