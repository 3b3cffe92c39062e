"""The "write it yourself" baseline: FastAPI + uvicorn + ONNX Runtime, speaking KServe v2 REST."""

from __future__ import annotations

import shutil
from pathlib import Path

from tasks.convert import Artifact
from tasks.serve.base import RunSpec, Server
from tasks.spec import ModelSpec

APP = "docker/custom/app.py"
CONTAINER_PORT = 8000


class CustomServer(Server):
    name = "custom"
    runtime = "custom"
    protocol = "kserve_v2_rest"
    formats = ("onnx",)
    engines = {"onnx": "onnxruntime"}

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        self.check_format(artifact.format)
        layout = workdir / "model"
        layout.mkdir(parents=True, exist_ok=True)
        shutil.copy2(artifact.path, layout / Path(artifact.path).name)
        return layout

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        from tasks.runtimes import REPO_ROOT

        common = ("--model-name", self.model_name(spec), "--threads", str(self.options.instances))
        return RunSpec(
            runtime=self.runtime,
            argv=("python", str(REPO_ROOT / APP), "--host", "127.0.0.1", "--port", str(ports["http"]),
                  "--model-dir", str(layout), *common),
            ports=dict(ports),
            image="serving-eval/custom:latest",
            container_argv=("--model-dir", "/models", *common),
            container_ports={"http": CONTAINER_PORT},
            mounts={str(layout): "/models"},
        )
