"""The "write it yourself" baseline: FastAPI + uvicorn over ONNX Runtime, TorchScript or a TensorFlow
SavedModel, speaking the KServe v2 REST protocol, JSON or with the binary tensor data extension.

It times its own requests (docker/custom/app.py: decoding, the engine, encoding and its total, summed over every
worker) and serves the sums at `GET /metrics`; `server_timings` reads them.

`instances` uvicorn worker processes (one by default), each loading the model with
`ServingOptions.threads_per_instance` intra-op threads (the server's CPUs shared among them, or `threads`). In a
container it runs from the project image of docker/custom/ with the layout at /models.
"""

from __future__ import annotations

from pathlib import Path

from tasks.convert import Artifact
from tasks.core.spec import ModelSpec
from tasks.runtimes.images import project_image
from tasks.serve.base import Endpoint, RunSpec, Server, Wire, link_or_copy
from tasks.serve.capabilities import Capability, Probe
from tasks.serve.knobs import Knob
from tasks.serve.prometheus import samples, scrape, total

APP = "app.py"  # in the runtime folder (docker/custom/, or a reference's snapshot of it)
CONTAINER_PORT = 8000


class CustomServer(Server):
    name = "custom"
    runtime = "custom"
    wires = {"json": Wire("kserve_v2_rest"), "binary": Wire("kserve_v2_binary")}
    missing_wires = {"grpc": "the custom service is a FastAPI app, REST only (a gRPC endpoint would be a second "
                             "server to write)"}
    timing_source = ("the custom service's own timing (GET /metrics): decoding the request, the engine, encoding "
                     "the response, and its total timed apart, from the whole body received to the response made "
                     "(the body's arrival and the socket writes are outside it)")
    formats = ("onnx", "torchscript", "savedmodel")
    engines = {"onnx": "onnxruntime", "torchscript": "torch", "savedmodel": "tensorflow"}
    knobs = (
        Knob("instances", (1, 2), "uvicorn worker processes, each with the model"),
        Knob("threads", (1, 2), "the engine's intra-op threads in each worker"),
    )
    capabilities = {
        "dynamic_batching": Capability(False, "not written: each request runs the engine on its own"),
        "multi_model": Capability(False, "one model per service"),
        "model_versions": Capability(False, "one model file, no versions"),
        "metrics": Capability(True, "its own request timings as Prometheus text at /metrics",
                              Probe("prometheus", path="/metrics")),
        "health_readiness": Capability(True, "/v2/health/live, /v2/health/ready and the model's ready route",
                                       Probe("ready")),
        "grpc": Capability(False, "REST only (a FastAPI app)"),
        "binary_tensors": Capability(True, "the KServe v2 binary tensor data extension", Probe("wire", wire="binary")),
        "kserve_v2": Capability(True, "KServe v2 REST: server and model metadata, infer", Probe("kserve_v2")),
        "hot_reload": Capability(False, "the model is loaded when a worker starts"),
        "ensembles": Capability(False, "one model per service"),
    }
    serving_code = (APP,)

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        self.check_format(artifact.format)
        layout = workdir / "model"
        layout.mkdir(parents=True, exist_ok=True)
        source = Path(artifact.path)
        link_or_copy(source, layout / (source.stem + ".savedmodel" if source.is_dir() else source.name))
        return layout

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        common = ("--model-name", self.model_name(spec), "--threads", str(self.options.threads_per_instance),
                  "--workers", str(self.options.instances),
                  "--inputs", ",".join(t.name for t in spec.inputs),
                  "--outputs", ",".join(t.name for t in spec.outputs))
        return RunSpec(
            runtime=self.runtime,
            argv=("python", str(self.runtime_dir / APP), "--host", "127.0.0.1", "--port", str(ports["http"]),
                  "--model-dir", str(layout), *common),
            ports=dict(ports),
            env=self.options.thread_env,
            image=project_image(self.runtime),
            container_argv=("--model-dir", "/models", *common),
            container_ports={"http": CONTAINER_PORT},
            mounts={str(layout): "/models"},
            device=self.options.device,
        )

    def server_timings(self, endpoint: Endpoint) -> dict[str, float] | None:
        found = samples(scrape(f"{endpoint.base_url}/metrics"))
        requests = total(found, "serving_eval_requests_total")
        if requests is None:
            return None
        out = {"requests": requests}
        for part, key in (("total", "server_ms"), ("decode", "decode_ms"), ("infer", "infer_ms"),
                          ("encode", "encode_ms")):
            seconds = total(found, "serving_eval_request_seconds_total", part=part)
            if seconds is not None:
                out[key] = seconds * 1000.0
        return out

    def skip_reason(self, launcher: str, fmt: str | None = None, spec: ModelSpec | None = None) -> str | None:
        if self.options.device == "gpu":
            return "device=gpu: the custom runtime is built on CPU wheels (onnxruntime, torch, tensorflow-cpu)"
        return None
