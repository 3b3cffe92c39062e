"""TorchServe without a server (tasks/serve/servers/torchserve.py): registration, properties, container parameters."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers.torchserve import CONTAINER_PORTS, TorchServeServer


def test_registered():
    assert isinstance(get_server("torchserve"), TorchServeServer)


def test_properties_bind_loopback_and_map_options(mlp_spec):
    server = TorchServeServer(ServingOptions(dynamic_batching=True, max_batch_size=16, batch_delay_us=2500,
                                             instances=2))
    ports = {name: 40000 + i for i, name in enumerate(server.port_names)}
    text = server.properties(mlp_spec, {n: ("127.0.0.1", p) for n, p in ports.items()}, "/store", "-XX:-UsePerfData")
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["inference_address"] == "http://127.0.0.1:40000"
    assert props["management_address"] == "http://127.0.0.1:40001"
    assert props["metrics_address"] == "http://127.0.0.1:40002"
    assert (props["grpc_inference_address"], props["grpc_inference_port"]) == ("127.0.0.1", "40003")
    assert (props["grpc_management_address"], props["grpc_management_port"]) == ("127.0.0.1", "40004")
    assert props["disable_token_authorization"] == "true" and props["install_py_dep_per_model"] == "false"
    assert props["default_workers_per_model"] == "2"
    assert "-XX:-UsePerfData" in props["vmargs"]
    registration = json.loads(props["models"])["mlp"]["1.0"]
    assert registration["batchSize"] == 16 and registration["maxBatchDelay"] == 3  # 2500 us -> 3 ms
    assert registration["minWorkers"] == registration["maxWorkers"] == 2


def test_container_parameters(mlp_torchscript, mlp_spec, tmp_path):
    server = TorchServeServer()
    layout = server.write_layout(mlp_torchscript, mlp_spec, tmp_path)
    assert (layout / "model_store" / "mlp.mar").is_file()
    ports = {name: 41000 + i for i, name in enumerate(server.port_names)}
    run = server.run_spec(layout, mlp_spec, ports)
    assert run.runtime == "torchserve" and run.argv[0] == "torchserve"
    assert run.argv[run.argv.index("--ts-config") + 1] == str(layout / "config.properties")
    assert "127.0.0.1:41000" in (layout / "config.properties").read_text()
    assert run.image == "serving-eval/torchserve"  # the Docker launcher resolves the hashed tag
    assert run.container_argv[:3] == ("torchserve", "--start", "--foreground")
    assert run.container_argv[run.container_argv.index("--ts-config") + 1] == "/models/container.properties"
    assert run.container_ports == CONTAINER_PORTS and set(run.container_ports) == set(server.port_names)
    assert run.mounts == {str(layout): "/models"}
    container = (layout / "container.properties").read_text()
    assert "inference_address=http://0.0.0.0:8080" in container and "model_store=/models/model_store" in container
    assert str(tmp_path) not in container  # no host path inside the container's config
    assert Path(run.mounts[str(layout)]).is_absolute()
