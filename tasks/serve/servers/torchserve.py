"""TorchServe 0.12: a Java frontend with Python workers, serving TorchScript through our own handler.

Layout (under the session's workdir, mounted read-only at /models in a container):

    torchserve/model_store/<model>.mar   torch-model-archiver output: the TorchScript file, the handler
                                         (docker/torchserve/handler.py) and handler_config.json
    torchserve/container.properties      addresses 0.0.0.0 on fixed ports, for the Docker launcher
    torchserve/config.properties         addresses 127.0.0.1 on the session's ports, for the process launcher
    torchserve/java-tmp/                 the JVM's private java.io.tmpdir (worker sockets, unpacked models)

TorchServe takes its addresses only from the properties file, so `run_spec` writes config.properties once
the ports are known. Every address (HTTP inference, management, metrics, both gRPC APIs) is bound to
127.0.0.1; token authorisation is disabled only because of that. Batching is TorchServe's own: with
`dynamic_batching` the model is registered with batchSize=max_batch_size and maxBatchDelay (ms); the
`instances` option is the number of workers (one Python process each, each with
`ServingOptions.threads_per_instance` intra-op threads: the server's CPUs shared among the workers, at least
one); the frontend's Netty threads follow the server's CPU count.

In a container the project image of docker/torchserve/ runs it; with the run option images=official, the
registry's TorchServe image (OFFICIAL_IMAGE) runs the same layout, where a registry serves it.
Readiness means the model's workers are READY (management API), not just `/ping`, which answers earlier.

Wires: JSON rows over REST, raw tensor bytes over REST (`application/octet-stream`) and over the gRPC inference
API (`Predictions`, port `grpc_inference`), all read by our handler. Its metrics port runs in Prometheus mode, so
the frontend's latency counters and the handler's decode/infer/encode counters tell where a request's time goes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from tasks.convert import Artifact
from tasks.core.errors import ConfigError, ServerStartError
from tasks.core.spec import ModelSpec
from tasks.runtimes.images import official_unavailable_reason, project_image
from tasks.runtimes.venvs import ensure_runtime, runtime_env_vars
from tasks.serve.base import HTTP_PROBE_TIMEOUT_S, Endpoint, RunSpec, Server, Wire
from tasks.serve.capabilities import Capability, Probe
from tasks.serve.knobs import WITH_BATCHING, Knob
from tasks.serve.prometheus import samples, scrape, total

HANDLER = "handler.py"  # in the runtime folder (docker/torchserve/, or a reference's snapshot of it)
LOG_CONFIG = "log4j2.xml"  # start-up and errors only: no access log, no per-request metrics
HANDLER_CONFIG = "handler_config.json"
IMAGE = project_image("torchserve")  # built here from docker/torchserve/ (runtimes/images.py tags it by its inputs)
OFFICIAL_IMAGE = "pytorch/torchserve:0.12.0-cpu"  # the registry's image of the same release (images=official)
CONTAINER_ROOT = "/models"
# The official image's ports: inference, management, metrics, gRPC inference, gRPC management.
CONTAINER_PORTS = {"http": 8080, "management": 8081, "metrics": 8082, "grpc_inference": 7070, "grpc_management": 7071}
ARCHIVE_TIMEOUT_S = 600
MODEL_VERSION = "1.0"
UNBATCHED_DELAY_MS = 100  # TorchServe's default maxBatchDelay; irrelevant with batchSize 1
RESPONSE_TIMEOUT_S = 120
MAX_MESSAGE_BYTES = 1 << 30  # request and response bodies up to 1 GiB
JVM_ARGS = "-XX:-UsePerfData"  # no /tmp/hsperfdata_<user>
# Prometheus counters of the metrics port -> the breakdown's sums: the frontend's (microseconds, label model_name)
# and our handler's (docker/torchserve/handler.py, milliseconds, label ModelName)
FRONTEND_TIMINGS = {"ts_inference_latency_microseconds": "server_ms", "ts_queue_latency_microseconds": "queue_ms"}
HANDLER_TIMINGS = {"ServingEvalDecodeMs": "decode_ms", "ServingEvalInferMs": "infer_ms",
                   "ServingEvalEncodeMs": "encode_ms"}


class TorchServeServer(Server):
    name = "torchserve"
    runtime = "torchserve"
    wires = {"json": Wire("torchserve_rest"), "binary": Wire("torchserve_raw"),
             "grpc": Wire("torchserve_grpc", "grpc_inference")}
    timing_source = ("TorchServe's Prometheus metrics (metrics port, metrics_mode=prometheus): the frontend's "
                     "ts_inference_latency_microseconds (its total) and ts_queue_latency_microseconds (queue), and "
                     "the handler's decode, infer and encode counters; the rest of its total is the frontend and "
                     "its IPC to the Python worker. Over gRPC the frontend adds nothing to its latency counters, so "
                     "those rows have the handler's parts and no total")
    formats = ("torchscript",)
    engines = {"torchscript": "torchscript"}
    port_names = ("http", "management", "metrics", "grpc_inference", "grpc_management")
    ready_path = "/ping"  # for messages only: is_ready asks the management API
    metrics_port = "metrics"
    knobs = (
        Knob("instances", (1, 2, 4), "workers (one Python process each), with the CPUs shared among them"),
        Knob("dynamic_batching", (False, True), "TorchServe's batching: batchSize = max_batch_size"),
        Knob("max_batch_size", (8, 32), "batchSize of the model's registration, with batching", requires=WITH_BATCHING),
        Knob("batch_delay_us", (1000, 5000), "maxBatchDelay (rounded up to ms), with batching", requires=WITH_BATCHING),
    )
    capabilities = {
        "dynamic_batching": Capability(True, "batchSize and maxBatchDelay of the model's registration (knob "
                                             "dynamic_batching); a serving option, not probed"),
        "multi_model": Capability(True, "a model store of any number of .mar archives, listed by the management API",
                                  Probe("http", port="management", path="/models", expect='"{model}"')),
        "model_versions": Capability(True, "each registration has a version, one of them the default",
                                     Probe("http", port="management", path=f"/models/{{model}}/{MODEL_VERSION}",
                                           expect=f'"{MODEL_VERSION}"')),
        "metrics": Capability(True, "Prometheus text on its metrics port (metrics_mode=prometheus)",
                              Probe("prometheus", port="metrics", path="/metrics")),
        "health_readiness": Capability(True, "/ping for health; readiness from the management API (the model's "
                                             "workers READY)", Probe("ready")),
        "grpc": Capability(True, "its gRPC inference and management APIs",
                           Probe("grpc", port="grpc_inference",
                                 method="/org.pytorch.serve.grpc.inference.InferenceAPIsService/Ping")),
        "binary_tensors": Capability(True, "raw bytes bodies (application/octet-stream) read by the handler",
                                     Probe("wire", wire="binary")),
        "kserve_v2": Capability(False, "its own REST and gRPC APIs; the KServe v2 envelope (service_envelope=kservev2) "
                                       "serves TorchServe behind KServe's wrapper, not configured here"),
        "hot_reload": Capability(True, "the management API registers, scales and unregisters models while it runs",
                                 Probe("http", port="management", path="/", method="OPTIONS", expect="registerModel")),
        "ensembles": Capability(True, "workflows: a DAG of models in a .war archive, through the workflow API",
                                Probe("http", port="management", path="/workflows")),
    }
    serving_code = (HANDLER,)
    uncounted_files = {"model_store/*.mar!MAR-INF/*": "written by torch-model-archiver, not by the project",
                       "java-tmp/*": "the JVM's scratch folder"}

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        self.check_format(artifact.format)
        layout = workdir / "torchserve"
        store = layout / "model_store"
        store.mkdir(parents=True, exist_ok=True)
        (layout / "java-tmp").mkdir(exist_ok=True)
        shutil.copy2(self.runtime_dir / LOG_CONFIG, layout / "log4j2.xml")
        self._archive(artifact, spec, store)
        addresses = {name: ("0.0.0.0", port) for name, port in CONTAINER_PORTS.items()}
        (layout / "container.properties").write_text(
            self.properties(spec, addresses, f"{CONTAINER_ROOT}/model_store", JVM_ARGS))
        return layout

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        if os.environ.get("TS_CONFIG_FILE"):  # torchserve would read it instead of --ts-config
            raise ConfigError("environment TS_CONFIG_FILE", os.environ["TS_CONFIG_FILE"],
                              "must be unset: it overrides the generated TorchServe config")
        addresses = {name: ("127.0.0.1", ports[name]) for name in self.port_names}
        jvm_args = f"{JVM_ARGS} -Djava.io.tmpdir={layout / 'java-tmp'}"
        config = layout / "config.properties"
        config.write_text(self.properties(spec, addresses, str(layout / "model_store"), jvm_args))
        flags = ("--ncs", "--disable-token-auth")
        return RunSpec(
            runtime=self.runtime,
            argv=("torchserve", "--start", "--foreground", "--ts-config", str(config),
                  "--model-store", str(layout / "model_store"), "--log-config", str(layout / "log4j2.xml"), *flags),
            ports=dict(ports),
            env=self.options.thread_env,
            device=self.options.device,
            image=self.image,
            container_argv=("torchserve", "--start", "--foreground",
                            "--ts-config", f"{CONTAINER_ROOT}/container.properties",
                            "--model-store", f"{CONTAINER_ROOT}/model_store",
                            "--log-config", f"{CONTAINER_ROOT}/log4j2.xml", *flags),
            container_ports=dict(CONTAINER_PORTS),
            mounts={str(layout): CONTAINER_ROOT},
        )

    @property
    def image(self) -> str:
        return OFFICIAL_IMAGE if self.options.images == "official" else IMAGE

    def properties(self, spec: ModelSpec, addresses: dict[str, tuple[str, int]], model_store: str,
                   jvm_args: str) -> str:
        """The TorchServe config.properties text for these addresses (name -> (host, port))."""
        name = self.model_name(spec)
        opts = self.options
        batch_size = opts.max_batch_size if opts.dynamic_batching else 1
        delay_ms = math.ceil(opts.batch_delay_us / 1000) if opts.dynamic_batching else UNBATCHED_DELAY_MS
        models = {name: {MODEL_VERSION: {
            "defaultVersion": True, "marName": f"{name}.mar", "minWorkers": opts.instances,
            "maxWorkers": opts.instances, "batchSize": batch_size, "maxBatchDelay": delay_ms,
            "responseTimeout": RESPONSE_TIMEOUT_S,
        }}}

        def http(key: str) -> str:
            return f"http://{addresses[key][0]}:{addresses[key][1]}"

        lines = [
            f"inference_address={http('http')}",
            f"management_address={http('management')}",
            f"metrics_address={http('metrics')}",
            f"grpc_inference_address={addresses['grpc_inference'][0]}",
            f"grpc_inference_port={addresses['grpc_inference'][1]}",
            f"grpc_management_address={addresses['grpc_management'][0]}",
            f"grpc_management_port={addresses['grpc_management'][1]}",
            f"model_store={model_store}",
            f"load_models={name}.mar",
            f"models={json.dumps(models, separators=(',', ':'))}",
            f"default_workers_per_model={opts.instances}",
            "disable_token_authorization=true",  # every address is loopback (or a loopback-published container)
            "install_py_dep_per_model=false",  # never pip install at model load
            "enable_envvars_config=false",  # stray TS_* variables cannot change this config
            "disable_system_metrics=true",
            # the metrics port serves the frontend's counters and the handler's own (its decode/infer/encode
            # counters are registered as they first appear): where each request's time goes
            "metrics_mode=prometheus", "model_metrics_auto_detect=true",
            # TorchServe refuses requests (413) and drops responses ("Worker died") over 6.5 MB by default: a
            # batch of 4 ResNet-50 images or BERT hidden states as JSON is more than that
            f"max_request_size={MAX_MESSAGE_BYTES}",
            f"max_response_size={MAX_MESSAGE_BYTES}",
            *([f"number_of_netty_threads={opts.cpus}", f"netty_client_threads={opts.cpus}"] if opts.cpus else []),
            f"vmargs={jvm_args}",
        ]
        return "\n".join(lines) + "\n"

    def _archive(self, artifact: Artifact, spec: ModelSpec, store: Path) -> None:
        env = ensure_runtime(self.runtime)
        name = self.model_name(spec)
        with tempfile.TemporaryDirectory(prefix="ts-archive-", dir=store.parent) as scratch:
            config = Path(scratch) / HANDLER_CONFIG
            config.write_text(json.dumps({
                "threads": self.options.threads_per_instance,
                "inputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in spec.inputs],
                "outputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in spec.outputs],
            }))
            argv = [str(env.bin_dir / "torch-model-archiver"), "--model-name", name, "--version", MODEL_VERSION,
                    "--serialized-file", str(artifact.path), "--handler", str(self.runtime_dir / HANDLER),
                    "--extra-files", str(config), "--export-path", str(store), "--force"]
            proc = subprocess.run(argv, cwd=scratch, env=runtime_env_vars(env, {"TMPDIR": scratch}),
                                  capture_output=True, text=True, timeout=ARCHIVE_TIMEOUT_S)
        if proc.returncode != 0 or not (store / f"{name}.mar").is_file():
            raise ServerStartError(f"torch-model-archiver failed for model {name} (rc {proc.returncode}):\n"
                                   f"{(proc.stdout + proc.stderr)[-2000:]}")

    def is_ready(self, endpoint: Endpoint) -> bool:
        """Ready when every registered worker of the model is READY (`/ping` is healthy before that)."""
        try:
            described = _get_json(f"{_management_url(endpoint)}/models/{endpoint.model_name}")
        except (OSError, ValueError):
            return False
        workers = [w for model in described for w in model.get("workers", [])]
        return bool(workers) and all(w.get("status") == "READY" for w in workers)

    def version(self, endpoint: Endpoint) -> str:
        """`info.version` of the management API's description (OPTIONS /)."""
        request = urllib.request.Request(_management_url(endpoint) + "/", method="OPTIONS")
        with urllib.request.urlopen(request, timeout=HTTP_PROBE_TIMEOUT_S) as resp:
            info = json.load(resp)["info"]
        return f"torchserve {info['version']}"

    def server_timings(self, endpoint: Endpoint) -> dict[str, float] | None:
        found = samples(scrape(f"http://{endpoint.host}:{endpoint.ports['metrics']}/metrics"))
        requests = total(found, "ts_inference_requests_total", model_name=endpoint.model_name)
        if requests is None:
            return None
        out = {"requests": requests}
        for name, key in FRONTEND_TIMINGS.items():
            value = total(found, name, model_name=endpoint.model_name)
            if value is not None:
                out[key] = value / 1000.0
        for name, key in HANDLER_TIMINGS.items():
            value = total(found, name, ModelName=endpoint.model_name)
            if value is not None:
                out[key] = value
        return out

    def skip_reason(self, launcher: str, fmt: str | None = None, spec: ModelSpec | None = None) -> str | None:
        if self.options.device == "gpu":
            return "device=gpu: the torchserve runtime is CPU-only (CPU build of torch, the 0.12.0-cpu image)"
        if launcher == "docker" and self.options.images == "official":
            return official_unavailable_reason(OFFICIAL_IMAGE)
        return None


def _management_url(endpoint: Endpoint) -> str:
    return f"http://{endpoint.host}:{endpoint.ports['management']}"


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=HTTP_PROBE_TIMEOUT_S) as resp:
        return json.load(resp)
