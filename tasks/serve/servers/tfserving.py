"""TensorFlow Serving: a SavedModel as `<name>/<version>/`, a model config file, REST (8501) and gRPC (8500).

TF Serving runs from the official image (`tensorflow/serving`, `-gpu` tag for device=gpu). There is no
`tensorflow_model_server` binary installable on a CPU laptop/CI machine without Docker, so under the
process launcher the cell is skipped with "needs Docker" unless the binary is on PATH. Note that the binary
binds its gRPC and REST ports on all interfaces (it has no bind-address flag); under the Docker launcher
the ports are published on 127.0.0.1 only, which is why Docker is the supported way to run it here. The
official image is the only one (there is no project-built TF Serving): where no registry serves it and the
engine does not have it, the cells are skipped with that reason. TensorFlow's intra-op threads follow the
server's CPUs (`ServingOptions.process_threads`), inter-op threads are one.

Files written into the layout (mounted at /models in the container):
- `models.config`: `model_config_list` text proto with container paths (`/models/<name>`);
- `models.host.config`: the same with host paths, for a local binary;
- `batching.config`: `BatchingParameters` text proto, only when dynamic batching is on;
- `monitoring.config`: turns on the Prometheus endpoint on the REST port.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

from tasks.convert import Artifact
from tasks.core.errors import ConfigError
from tasks.core.spec import ModelSpec
from tasks.runtimes.images import official_unavailable_reason
from tasks.serve.base import HTTP_PROBE_TIMEOUT_S, Endpoint, RunSpec, Server, Wire
from tasks.serve.capabilities import Capability, Probe
from tasks.serve.knobs import WITH_BATCHING, Knob
from tasks.serve.prometheus import samples, scrape, total

TFSERVING_VERSION = "2.18.0"
IMAGE_CPU = f"tensorflow/serving:{TFSERVING_VERSION}"
IMAGE_GPU = f"tensorflow/serving:{TFSERVING_VERSION}-gpu"
BINARY = "tensorflow_model_server"
CONTAINER_ROOT = "/models"
REST_PORT = 8501
GRPC_PORT = 8500
MODEL_VERSION = 1
MODELS_CONFIG = "models.config"
MODELS_HOST_CONFIG = "models.host.config"
BATCHING_CONFIG = "batching.config"
MONITORING_CONFIG = "monitoring.config"
METRICS_PATH = "/monitoring/prometheus/metrics"
MAX_ENQUEUED_BATCHES = 100
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
# Prometheus histograms of the monitoring endpoint (microseconds, labels model_name, API, entrypoint REST|GRPC)
REQUEST_LATENCY = ":tensorflow:serving:request_latency"  # the whole request inside the server: its total
RUNTIME_LATENCY = ":tensorflow:serving:runtime_latency"  # the TensorFlow runtime's part: infer
NEEDS_DOCKER = ("needs Docker: TensorFlow Serving has no binary for this machine "
                f"({BINARY} is not on PATH); run with launcher=docker")


def models_config(model_name: str, base_path: str) -> str:
    """A `model_config_list` text proto serving one SavedModel model from `base_path`."""
    return (
        "model_config_list {\n"
        "  config {\n"
        f'    name: "{model_name}"\n'
        f'    base_path: "{base_path}"\n'
        '    model_platform: "tensorflow"\n'
        "    model_version_policy { latest { num_versions: 1 } }\n"
        "  }\n"
        "}\n"
    )


def batching_config(max_batch_size: int, batch_timeout_us: int, batch_threads: int) -> str:
    """A `BatchingParameters` text proto (TF Serving's --batching_parameters_file)."""
    return (
        f"max_batch_size {{ value: {max_batch_size} }}\n"
        f"batch_timeout_micros {{ value: {batch_timeout_us} }}\n"
        f"max_enqueued_batches {{ value: {MAX_ENQUEUED_BATCHES} }}\n"
        f"num_batch_threads {{ value: {batch_threads} }}\n"
    )


def monitoring_config() -> str:
    return f'prometheus_config {{\n  enable: true\n  path: "{METRICS_PATH}"\n}}\n'


class TFServingServer(Server):
    name = "tfserving"
    runtime = "tfserving"
    wires = {"json": Wire("tfserving_rest"), "grpc": Wire("tfserving_grpc", "grpc")}
    missing_wires = {"binary": "TF Serving's REST API carries tensors as JSON only (its base64 form {\"b64\": ...} "
                               "holds DT_STRING values, not numeric tensors); its binary path is gRPC "
                               "(PredictionService/Predict with tensor_content)"}
    timing_source = (f"TF Serving's Prometheus metrics (monitoring endpoint): {REQUEST_LATENCY} as its total and "
                     f"{RUNTIME_LATENCY} as infer, for API predict over REST and gRPC")
    formats = ("savedmodel",)
    engines = {"savedmodel": "tensorflow"}
    port_names = ("http", "grpc")
    metrics_port = "http"
    metrics_path = METRICS_PATH
    ready_path = "/v1/models/<model_name>"  # per model: is_ready fills in the name and checks AVAILABLE
    knobs = (
        Knob("dynamic_batching", (False, True), "--enable_batching with the batching parameters file"),
        Knob("max_batch_size", (8, 32), "batching parameters: max_batch_size", requires=WITH_BATCHING),
        Knob("batch_delay_us", (1000, 5000), "batching parameters: batch_timeout_micros", requires=WITH_BATCHING),
        Knob("instances", (1, 2), "batching parameters: num_batch_threads", requires=WITH_BATCHING),
    )
    capabilities = {
        "dynamic_batching": Capability(True, "--enable_batching with a batching parameters file (knob "
                                             "dynamic_batching); a serving option, not probed"),
        "multi_model": Capability(True, "a model_config_list of any number of models"),
        "model_versions": Capability(True, "numbered version folders under each model's base path, with a "
                                           "version policy", Probe("http", path=f"/v1/models/{{model}}/versions/"
                                                                           f"{MODEL_VERSION}", expect="AVAILABLE")),
        "metrics": Capability(True, "Prometheus text at the monitoring path on its REST port (monitoring.config)",
                              Probe("prometheus", path=METRICS_PATH)),
        "health_readiness": Capability(True, "the model status route: a version AVAILABLE", Probe("ready")),
        "grpc": Capability(True, "PredictionService and ModelService over gRPC", Probe("wire", wire="grpc")),
        "binary_tensors": Capability(False, "REST carries tensors as JSON; its binary path is gRPC"),
        "kserve_v2": Capability(False, "its own REST (v1) and gRPC APIs"),
        "hot_reload": Capability(True, "new version folders are loaded as they appear (file system polling), and the "
                                       "model config can be reloaded (--model_config_file_poll_wait_seconds); not "
                                       "probed"),
        "ensembles": Capability(False, "one SavedModel per model; a graph of models is built into the SavedModel"),
    }
    uncounted_files = {MODELS_HOST_CONFIG: "the model list with host paths, for a local binary: the container reads "
                                           "models.config"}

    @property
    def image(self) -> str:
        return IMAGE_GPU if self.options.device == "gpu" else IMAGE_CPU

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        self.check_format(artifact.format)
        source = Path(artifact.path)
        if not source.is_dir() or not any((source / f).is_file() for f in SAVED_MODEL_FILES):
            raise ConfigError("artifact.path", str(source), f"a SavedModel must be a directory holding one of "
                                                             f"{list(SAVED_MODEL_FILES)}")
        name = self.model_name(spec)
        layout = workdir / "tfserving"
        version_dir = layout / name / str(MODEL_VERSION)
        version_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, version_dir, dirs_exist_ok=True)
        (layout / MODELS_CONFIG).write_text(models_config(name, f"{CONTAINER_ROOT}/{name}"))
        (layout / MODELS_HOST_CONFIG).write_text(models_config(name, str((layout / name).resolve())))
        (layout / MONITORING_CONFIG).write_text(monitoring_config())
        if self.options.dynamic_batching:
            (layout / BATCHING_CONFIG).write_text(
                batching_config(self.options.max_batch_size, self.options.batch_delay_us, self.options.instances))
        return layout

    def _flags(self, root: str, models_file: str, rest_port: int, grpc_port: int) -> tuple[str, ...]:
        flags = [f"--port={grpc_port}", f"--rest_api_port={rest_port}", f"--model_config_file={root}/{models_file}",
                 f"--monitoring_config_file={root}/{MONITORING_CONFIG}",
                 f"--tensorflow_intra_op_parallelism={self.options.process_threads}",
                 "--tensorflow_inter_op_parallelism=1"]
        if self.options.dynamic_batching:
            flags += ["--enable_batching=true", f"--batching_parameters_file={root}/{BATCHING_CONFIG}"]
        return tuple(flags)

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        host_root = str(layout.resolve())
        return RunSpec(
            runtime=self.runtime,
            argv=(BINARY, *self._flags(host_root, MODELS_HOST_CONFIG, ports["http"], ports["grpc"])),
            ports=dict(ports),
            image=self.image,
            # appended to the image's entrypoint (tf_serving_entrypoint.sh -> tensorflow_model_server)
            container_argv=self._flags(CONTAINER_ROOT, MODELS_CONFIG, REST_PORT, GRPC_PORT),
            container_ports={"http": REST_PORT, "grpc": GRPC_PORT},
            mounts={host_root: CONTAINER_ROOT},
            device=self.options.device,
        )

    def model_status(self, endpoint: Endpoint) -> dict:
        url = f"{endpoint.base_url}/v1/models/{endpoint.model_name}"
        with urllib.request.urlopen(url, timeout=HTTP_PROBE_TIMEOUT_S) as resp:
            return json.load(resp)

    def is_ready(self, endpoint: Endpoint) -> bool:
        """Ready when a version of the model is AVAILABLE (the status URL answers 200 while still loading)."""
        try:
            status = self.model_status(endpoint)
        except (OSError, ValueError):
            return False
        return any(v.get("state") == "AVAILABLE" for v in status.get("model_version_status", []))

    def version(self, endpoint: Endpoint) -> str:
        """TF Serving's REST API does not report its own version: the pinned image tag, plus the model version."""
        versions = [v.get("version", "?") for v in self.model_status(endpoint).get("model_version_status", [])
                    if v.get("state") == "AVAILABLE"]
        return f"tensorflow-serving {TFSERVING_VERSION} (model version {','.join(versions) or '?'})"

    def server_timings(self, endpoint: Endpoint) -> dict[str, float] | None:
        return parse_timings(scrape(f"{endpoint.base_url}{METRICS_PATH}"), endpoint.model_name)

    def skip_reason(self, launcher: str, fmt: str | None = None, spec: ModelSpec | None = None) -> str | None:
        if launcher == "process" and shutil.which(BINARY) is None:
            return NEEDS_DOCKER
        if launcher == "docker":
            return official_unavailable_reason(self.image)
        return None


def parse_timings(text: str, model_name: str) -> dict[str, float] | None:
    """The breakdown's sums (ms) from TF Serving's monitoring text: predict requests over REST and gRPC."""
    found = samples(text)
    labels = {"model_name": model_name, "API": "predict"}
    count = total(found, f"{REQUEST_LATENCY}_count", **labels)
    if count is None:
        return None
    out = {"requests": count}
    for name, key in ((REQUEST_LATENCY, "server_ms"), (RUNTIME_LATENCY, "infer_ms")):
        value = total(found, f"{name}_sum", **labels)
        if value is not None:
            out[key] = value / 1000.0
    return out
