"""BentoML without a server (tasks/serve/servers/bentoml.py): registration, version, skips, container parameters."""

from __future__ import annotations

import json

from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers.bentoml import BentoMLServer, package_version

BENTOML_VERSION = "1.4.40"  # the pin in docker/bentoml/requirements.txt


def test_registered_and_version_from_runtime():
    assert isinstance(get_server("bentoml"), BentoMLServer)
    assert package_version("bentoml", "bentoml") == BENTOML_VERSION


def test_skips_what_it_does_not_do(mlp_spec):
    from tasks.core.spec import load_spec

    assert BentoMLServer().skip_reason("process") is None
    batching = BentoMLServer(ServingOptions(dynamic_batching=True))
    assert batching.skip_reason("process", spec=mlp_spec) is None  # one input, one output: adaptive batching
    reason = batching.skip_reason("process", spec=load_spec("tiny-bert"))  # two inputs
    assert "dynamic_batching" in reason and "2 inputs" in reason


def test_container_parameters(mlp_onnx, mlp_spec, tmp_path):
    server = BentoMLServer(ServingOptions(instances=2))
    layout = server.write_layout(mlp_onnx, mlp_spec, tmp_path)
    config = json.loads((layout / "service.json").read_text())
    assert config["workers"] == 2 and config["threads"] == 1 and (layout / config["model_file"]).is_file()
    run = server.run_spec(layout, mlp_spec, {"http": 43000})
    assert run.argv[:3] == ("bentoml", "serve", "service:ServingEvalModel")
    assert run.argv[run.argv.index("--host") + 1] == "127.0.0.1" and "43000" in run.argv
    assert run.env["BENTOML_DO_NOT_TRACK"] == "true" and run.env["BENTOML_HOME"].startswith(str(tmp_path))
    assert run.image == "serving-eval/bentoml"  # the Docker launcher resolves the hashed tag
    assert run.container_argv[run.container_argv.index("--working-dir") + 1] == "/models"
    assert run.container_argv[run.container_argv.index("--host") + 1] == "0.0.0.0"
    assert run.container_ports == {"http": 3000}
    assert run.mounts == {str(layout): "/models"}
