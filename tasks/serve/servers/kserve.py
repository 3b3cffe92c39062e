"""KServe 0.21: a `kserve.Model` in a ModelServer (docker/kserve/server.py) over ONNX Runtime or TorchScript.

Layout (under the session's workdir; mounted read-only at /models in a container):

    kserve/model.json                 model file, format, tensor names/dtypes/shapes
    kserve/<model file>               the artifact (hard link when possible, else a copy)
    kserve/inferenceservice.yaml      an InferenceService manifest for Kubernetes users (not used locally)

One process serves REST (KServe v2 and v1) and gRPC v2, both bound to 127.0.0.1 (the entry script replaces
KServe's hard-coded 0.0.0.0 / [::]). One process: its intra-op threads are `ServingOptions.process_threads`
(instances x the server's CPUs shared among them); KServe's multi-worker mode cannot be bound to loopback.
Per-request latency logging is off. KServe has no server-side batching for a custom model: with
`dynamic_batching` the cells are skipped. In a container the project image of docker/kserve/ runs it (binding
0.0.0.0 inside; the launcher publishes on 127.0.0.1), with the layout at /models.
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.convert import Artifact
from tasks.core.spec import ModelSpec
from tasks.runtimes.images import project_image
from tasks.serve.base import Endpoint, RunSpec, Server, Wire, link_or_copy
from tasks.serve.capabilities import Capability, Probe
from tasks.serve.knobs import Knob
from tasks.serve.prometheus import scrape, total

ENTRY = "server.py"  # in the runtime folder (docker/kserve/, or a reference's snapshot of it)
IMAGE = project_image("kserve")  # built here from docker/kserve/ (tasks/runtimes/images.py tags it by its inputs)
CONTAINER_ROOT = "/models"
CONTAINER_PORTS = {"http": 8080, "grpc": 8081}
MANIFEST = "inferenceservice.yaml"
K8S_MODEL_DIR = "/mnt/models"  # where KServe's storage initializer puts STORAGE_URI's files


class KServeServer(Server):
    name = "kserve"
    runtime = "kserve"
    wires = {"json": Wire("kserve_v2_rest"), "binary": Wire("kserve_v2_binary"), "grpc": Wire("kserve_v2_grpc", "grpc")}
    timing_source = ("KServe's Prometheus metrics (GET /metrics): request_predict_seconds, the model's predict (the "
                     "engine with its input arrays and output tensors) as infer; KServe reports no queue, no request "
                     "parsing or response writing, and no total")
    formats = ("onnx", "torchscript")
    engines = {"onnx": "onnxruntime", "torchscript": "torchscript"}
    port_names = ("http", "grpc")
    ready_path = "/v2/health/ready"
    metrics_port = "http"
    # KServe's own multi-worker mode pickles the registered model into spawned processes (an ONNX Runtime or
    # TorchScript session does not pickle) and binds every interface, so its knob is the engine's threads.
    knobs = (Knob("threads", (1, 2, 4), "the engine's intra-op threads (one process)"),)
    capabilities = {
        "dynamic_batching": Capability(False, "no server-side batching for a custom model in a ModelServer (an "
                                              "InferenceService's batcher is a sidecar on Kubernetes)"),
        "multi_model": Capability(True, "one ModelServer serves a list of models (v1 lists them)",
                                  Probe("http", path="/v1/models", expect='"{model}"')),
        "model_versions": Capability(False, "one version per model in a ModelServer; versions are InferenceService "
                                            "revisions (canary rollouts) on Kubernetes"),
        "metrics": Capability(True, "Prometheus text at /metrics on its REST port",
                              Probe("prometheus", path="/metrics")),
        "health_readiness": Capability(True, "/v2/health/live, /v2/health/ready and the model's ready route",
                                       Probe("ready")),
        "grpc": Capability(True, "KServe v2 gRPC (GRPCInferenceService)",
                           Probe("grpc", port="grpc", method="/inference.GRPCInferenceService/ServerReady")),
        "binary_tensors": Capability(True, "the KServe v2 binary tensor data extension", Probe("wire", wire="binary")),
        "kserve_v2": Capability(True, "KServe v2 REST and gRPC (and v1 REST)", Probe("kserve_v2")),
        "hot_reload": Capability(False, "the model is registered when the server starts; loading another needs a "
                                        "model repository written for it (or a new revision on Kubernetes)"),
        "ensembles": Capability(True, "InferenceGraph chains InferenceServices on Kubernetes; not probed here"),
    }
    serving_code = (ENTRY,)
    uncounted_files = {MANIFEST: "the InferenceService manifest for Kubernetes: not read by the server that runs here"}

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        self.check_format(artifact.format)
        layout = workdir / "kserve"
        layout.mkdir(parents=True, exist_ok=True)
        model_file = Path(artifact.path).name
        link_or_copy(Path(artifact.path), layout / model_file)
        (layout / "model.json").write_text(json.dumps({
            "format": artifact.format, "model_file": model_file,
            "inputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in spec.inputs],
            "outputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in spec.outputs],
        }, indent=1))
        (layout / MANIFEST).write_text(self.inference_service_manifest(spec, IMAGE))
        return layout

    def server_args(self, model_dir: str, spec: ModelSpec, host: str, ports: dict[str, int]) -> tuple[str, ...]:
        """The entry script's arguments (the same locally, in a container and in the manifest)."""
        return ("--model_dir", model_dir, "--model_name", self.model_name(spec), "--bind_host", host,
                "--http_port", str(ports["http"]), "--grpc_port", str(ports["grpc"]),
                "--threads", str(self.options.process_threads), "--enable_latency_logging", "false")

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        return RunSpec(
            runtime=self.runtime,
            argv=("python", str(self.runtime_dir / ENTRY), *self.server_args(str(layout), spec, "127.0.0.1", ports)),
            ports=dict(ports),
            env=self.options.thread_env,
            device=self.options.device,
            image=IMAGE,
            container_argv=self.server_args(CONTAINER_ROOT, spec, "0.0.0.0", CONTAINER_PORTS),
            container_ports=dict(CONTAINER_PORTS),
            mounts={str(layout): CONTAINER_ROOT},
        )

    def inference_service_manifest(self, spec: ModelSpec, image: str,
                                   storage_uri: str = "s3://CHANGE-ME/models/{model}/") -> str:
        """A serving.kserve.io/v1beta1 InferenceService running this image as a custom predictor container.

        The model files (the layout's model file and model.json) are fetched from `storage_uri` into
        /mnt/models by KServe's storage initializer; "{model}" in it is replaced by the model name.
        """
        import yaml

        name = self.model_name(spec).lower().replace("_", "-")
        args = self.server_args(K8S_MODEL_DIR, spec, "0.0.0.0", CONTAINER_PORTS)
        manifest = {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "serving-eval"}},
            "spec": {"predictor": {
                "minReplicas": 1,
                "containers": [{
                    "name": "kserve-container",
                    "image": image,
                    "args": list(args),
                    "env": [{"name": "STORAGE_URI", "value": storage_uri.format(model=spec.name)}],
                    "ports": [{"containerPort": CONTAINER_PORTS["http"], "protocol": "TCP"}],
                    "readinessProbe": {"httpGet": {"path": self.ready_path, "port": CONTAINER_PORTS["http"]}},
                    "resources": {"requests": {"cpu": str(self.options.instances), "memory": "1Gi"},
                                  "limits": {"cpu": str(self.options.instances), "memory": "2Gi"}},
                }],
            }},
        }
        return yaml.safe_dump(manifest, sort_keys=False)

    def server_timings(self, endpoint: Endpoint) -> dict[str, float] | None:
        """request_predict_seconds' count and sum (s -> ms) for the model."""
        text = scrape(f"{endpoint.base_url}/metrics")
        count = total(text, "request_predict_seconds_count", model_name=endpoint.model_name)
        seconds = total(text, "request_predict_seconds_sum", model_name=endpoint.model_name)
        if count is None or seconds is None:
            return None
        return {"requests": count, "infer_ms": seconds * 1000.0}

    def skip_reason(self, launcher: str, fmt: str | None = None, spec: ModelSpec | None = None) -> str | None:
        if self.options.dynamic_batching:
            return "dynamic_batching=true: KServe has no server-side batching for a custom model"
        if self.options.device == "gpu":
            return "device=gpu: the kserve runtime is CPU-only (CPU build of torch, onnxruntime without CUDA)"
        return None

