"""NVIDIA Triton Inference Server 2.51 (release 24.10): the python backend locally and in the project image,
native backends in NVIDIA's official image.

`write_layout` writes two model repositories side by side, because the server does not know its launcher:

    triton/native/<model>/config.pbtxt     native backends, for the official image (launcher=docker, images=official):
    triton/native/<model>/1/model.onnx       onnxruntime_onnx | model.pt pytorch_libtorch |
                                             model.savedmodel/ tensorflow_savedmodel | model.plan tensorrt_plan
    triton/python/<model>/config.pbtxt     the python backend, for the process launcher and the project image
                                           (onnx, torchscript only)
    triton/python/<model>/1/model.py         docker/triton/python_model.py (ONNX Runtime or TorchScript)
    triton/python/<model>/1/model.onnx|.pt   the same file as in native/ (a hard link where possible)

The process launcher runs the real `tritonserver` 2.51.0 binary that the nvidia-pytriton 0.7.0 wheel ships in
the `triton` runtime venv; that build has only the python backend. `run_spec` prepares a private backend
folder `triton/backends/python/` (the wheel's backend plus the python-backend stub for the venv's Python) and
points `--model-repository` at `python/`. In a container the whole layout is mounted read-only at /models: the
project image (docker/triton/, the same wheel's server with its backend folder made at build time) serves
/models/python; the official NVIDIA image (`OFFICIAL_IMAGE`, run option images=official, where a registry
serves it) serves /models/native.

Threads follow the server's CPUs: each of the `instances` model instances runs
`ServingOptions.threads_per_instance` intra-op threads (python backend: the model's `num_threads`; native
ONNX Runtime / libtorch backends: their intra-op thread parameters).

Formats savedmodel and tensorrt have no python-backend model: the process launcher and the project image
cannot serve them.
`skip_reason(launcher, fmt=...)` says so when given the format (an optional keyword on top of the base
interface; callers that do not pass it get the launcher-level reason only). Without that check a process run
of such a format still fails cleanly at start: its process argv points at `native/`, and the wheel's server
exits with "unable to find backend" in the log tail.

Names, data types and dims (without the batch axis) come from the model spec; the client uses the spec's
names for every server. The libtorch backend maps names without `__<index>` to forward() arguments in config
order (its STRICT_CONFIG_ORDERING convention), which is the spec's order.

Facts about the wheel's server on a CPU host (checked here): the stub loads the interpreter's libpython
unless the base Python's `lib` is first on LD_LIBRARY_PATH, and the private backend copy finds its bundled
libraries only with `site-packages/nvidia_pytriton.libs` on LD_LIBRARY_PATH; without them the server hangs
(neither ready nor exiting), so sessions always use a ready timeout. The python backend makes one
`/dev/shm/<prefix><uuid>` region per model instance (the prefix is per server here) and a
`/tmp/python_env_XXXXXX` dir (hard-coded path); a killed server leaves both, so the RunSpec declares the
latter in `cleanup_globs` and the process launcher removes the former by prefix.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

from tasks.convert import Artifact
from tasks.core.errors import ConfigError
from tasks.core.spec import ModelSpec, TensorSpec
from tasks.runtimes.images import official_unavailable_reason, project_image
from tasks.runtimes.venvs import RuntimeEnv, ensure_runtime
from tasks.serve.base import HTTP_PROBE_TIMEOUT_S, Endpoint, RunSpec, Server, Wire, link_or_copy
from tasks.serve.capabilities import Capability, Probe
from tasks.serve.knobs import WITH_BATCHING, Knob
from tasks.serve.options import ServingOptions
from tasks.serve.prometheus import samples, total

IMAGE = project_image("triton")  # built here from docker/triton/ (the wheel's server, python backend)
OFFICIAL_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"  # NVIDIA's image of Triton 2.51.0, with the native backends
CONTAINER_ROOT = "/models"
CONTAINER_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
MODEL_VERSION = "1"
NATIVE_DIR = "native"
PYTHON_DIR = "python"
BACKENDS_DIR = "backends"
PYTHON_MODEL = "python_model.py"  # in the runtime folder (docker/triton/, or a reference's snapshot of it)
PYTRITON_DIR = "pytriton/tritonserver"  # inside the runtime's site-packages
BUNDLED_LIBS_DIR = "nvidia_pytriton.libs"  # the wheel's vendored shared libraries, inside site-packages
SHM_PREFIX = "triton_python_backend_shm_region_"  # the python backend's default; the launcher cleans this prefix
PYTHON_ENV_GLOB = "/tmp/python_env_*"  # made by the python backend at a hard-coded path (TMPDIR is not used)
EXIT_TIMEOUT_S = 5  # graceful drain on SIGTERM, below the launcher's grace period

# format -> (platform, file or folder name in the version directory)
NATIVE = {
    "onnx": ("onnxruntime_onnx", "model.onnx"),
    "torchscript": ("pytorch_libtorch", "model.pt"),
    "savedmodel": ("tensorflow_savedmodel", "model.savedmodel"),
    "tensorrt": ("tensorrt_plan", "model.plan"),
}
# format -> python_model.py engine: the formats the process runtime can serve
PYTHON_ENGINES = {"onnx": "onnxruntime", "torchscript": "torchscript"}
# native platform -> its backend's intra-op thread parameter
NATIVE_THREAD_PARAMETER = {"onnxruntime_onnx": "intra_op_thread_count", "pytorch_libtorch": "INTRA_OP_THREAD_COUNT"}
DATA_TYPES = {
    "float32": "TYPE_FP32", "float16": "TYPE_FP16", "float64": "TYPE_FP64", "int64": "TYPE_INT64",
    "int32": "TYPE_INT32", "int8": "TYPE_INT8", "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL",
}
COUNT_METRICS = ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                 "nv_inference_exec_count")
# the statistics extension's inference_stats entry -> the breakdown's part (tasks.loadgen.measurement.ServerTiming)
STATS_PARTS = {"success": "server_ms", "queue": "queue_ms", "compute_input": "decode_ms",
               "compute_infer": "infer_ms", "compute_output": "encode_ms"}


def _tensor_block(kind: str, tensors: tuple[TensorSpec, ...]) -> str:
    rows = []
    for t in tensors:
        if t.dtype not in DATA_TYPES:
            raise ConfigError(f"{kind} {t.name}: dtype", t.dtype, f"must be one of {sorted(DATA_TYPES)} for Triton")
        dims = ", ".join(str(d) for d in t.shape[1:])  # without the batch axis: max_batch_size > 0
        rows.append(f'  {{ name: "{t.name}" data_type: {DATA_TYPES[t.dtype]} dims: [ {dims} ] }}')
    return f"{kind} [\n" + ",\n".join(rows) + "\n]\n"


def model_config(name: str, spec: ModelSpec, opts: ServingOptions, *, kind: str, platform: str = "",
                 backend: str = "", parameters: dict[str, str] | None = None) -> str:
    """A Triton `config.pbtxt` (text protobuf) for one model with a batch axis, batched and instanced as `opts`
    says (max_batch_size, dynamic_batching, batch_delay_us, preferred_batch_sizes, instances)."""
    if bool(platform) == bool(backend):
        raise ConfigError("model_config platform/backend", (platform, backend), "exactly one must be given")
    if kind not in ("KIND_CPU", "KIND_GPU"):
        raise ConfigError("instance_group kind", kind, "must be KIND_CPU or KIND_GPU")
    text = f'name: "{name}"\n'
    text += f'platform: "{platform}"\n' if platform else f'backend: "{backend}"\n'
    text += f"max_batch_size: {opts.max_batch_size}\n"
    text += _tensor_block("input", spec.inputs) + _tensor_block("output", spec.outputs)
    if opts.dynamic_batching:
        preferred = (f" preferred_batch_size: [ {', '.join(str(b) for b in opts.preferred_batch_sizes)} ]"
                     if opts.preferred_batch_sizes else "")
        text += f"dynamic_batching {{ max_queue_delay_microseconds: {opts.batch_delay_us}{preferred} }}\n"
    text += f"instance_group [ {{ count: {opts.instances} kind: {kind} }} ]\n"
    for key, value in (parameters or {}).items():
        text += f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'
    return text


class TritonServer(Server):
    name = "triton"
    runtime = "triton"
    wires = {"json": Wire("kserve_v2_rest"), "binary": Wire("kserve_v2_binary"), "grpc": Wire("kserve_v2_grpc", "grpc")}
    timing_source = ("Triton's statistics extension (GET /v2/models/<model>/stats): queue, compute_input (decode), "
                     "compute_infer (infer), compute_output (encode); success is its total. Its HTTP and gRPC front "
                     "ends' reading and writing of the body lie outside that total")
    formats = ("onnx", "torchscript", "savedmodel", "tensorrt")
    engines = {"onnx": "onnxruntime", "torchscript": "libtorch", "savedmodel": "tensorflow",
               "tensorrt": "tensorrt"}
    port_names = ("http", "grpc", "metrics")
    ready_path = "/v2/health/ready"  # with --strict-readiness: ready only when every model is READY
    metrics_port = "metrics"
    knobs = (
        Knob("instances", (1, 2, 4), "model instances (instance_group count), each with the CPUs shared among them"),
        Knob("dynamic_batching", (False, True), "Triton's dynamic batcher"),
        Knob("max_batch_size", (8, 32), "the model's max_batch_size (the largest batch the batcher forms)",
             requires=WITH_BATCHING),
        Knob("batch_delay_us", (100, 1000, 5000), "dynamic batching: max_queue_delay_microseconds",
             requires=WITH_BATCHING),
        Knob("preferred_batch_sizes", ((), (4, 8)), "dynamic batching: preferred_batch_size", requires=WITH_BATCHING),
    )
    capabilities = {
        "dynamic_batching": Capability(True, "the dynamic_batching block of config.pbtxt (knob dynamic_batching); a "
                                             "serving option, not probed: the cells run with it on show it"),
        "multi_model": Capability(True, "one model repository holds any number of models (repository extension)",
                                  Probe("http", path="/v2/repository/index", method="POST", expect='"{model}"')),
        "model_versions": Capability(True, "numbered version folders under each model, with a version_policy",
                                     Probe("http", path=f"/v2/models/{{model}}/versions/{MODEL_VERSION}")),
        "metrics": Capability(True, "Prometheus text on its metrics port", Probe("prometheus", port="metrics",
                                                                                  path="/metrics")),
        "health_readiness": Capability(True, "/v2/health/live and /v2/health/ready (strict: every model READY)",
                                       Probe("ready")),
        "grpc": Capability(True, "KServe v2 gRPC (GRPCInferenceService)",
                           Probe("grpc", port="grpc", method="/inference.GRPCInferenceService/ServerReady")),
        "binary_tensors": Capability(True, "the KServe v2 binary tensor data extension",
                                     Probe("wire", wire="binary")),
        "kserve_v2": Capability(True, "KServe v2 REST and gRPC, its native protocol", Probe("kserve_v2")),
        "hot_reload": Capability(True, "--model-control-mode=poll or explicit loads and unloads models without a "
                                       "restart; not probed: the sessions run with the default mode (none)"),
        "ensembles": Capability(True, "ensemble models and business logic scripting (BLS) in the repository; not "
                                      "probed: the layout holds one model"),
    }
    serving_code = (PYTHON_MODEL,)

    @property
    def uncounted_files(self) -> dict[str, str]:  # type: ignore[override]
        """The repository this deployment does not serve: native/ for the python backend (process launcher, project
        image), python/ (and the backend's model code) for NVIDIA's image."""
        if self.options.images == "official":
            return {f"{PYTHON_DIR}/*": "the python-backend repository serves the process launcher and the project "
                                       "image, not NVIDIA's image that runs here", "runtime:*": "the same"}
        return {f"{NATIVE_DIR}/*": "the native repository serves NVIDIA's image (images=official), not the python "
                                   "backend that runs here: another deployment of the same model"}

    def config_text(self, spec: ModelSpec, fmt: str, *, python_backend: bool = False) -> str:
        """config.pbtxt of the native repository, or of the python-backend repository."""
        self.check_format(fmt)
        opts = self.options
        name = self.model_name(spec)
        if python_backend:
            if fmt not in PYTHON_ENGINES:
                raise ConfigError("format", fmt, f"the python backend serves only {sorted(PYTHON_ENGINES)}")
            params = {"engine": PYTHON_ENGINES[fmt], "model_filename": NATIVE[fmt][1],
                      "num_threads": str(opts.threads_per_instance)}
            return model_config(name, spec, opts, backend="python", kind="KIND_CPU", parameters=params)
        kind = "KIND_GPU" if opts.device == "gpu" else "KIND_CPU"
        platform = NATIVE[fmt][0]
        params = {NATIVE_THREAD_PARAMETER[platform]: str(opts.threads_per_instance)} \
            if platform in NATIVE_THREAD_PARAMETER and opts.device == "cpu" else None
        return model_config(name, spec, opts, platform=platform, kind=kind, parameters=params)

    def write_layout(self, artifact: Artifact, spec: ModelSpec, workdir: Path) -> Path:
        self.check_format(artifact.format)
        fmt, name = artifact.format, self.model_name(spec)
        source = Path(artifact.path)
        if not source.exists():
            raise ConfigError("artifact.path", str(source), "must exist")
        layout = workdir / "triton"
        native = layout / NATIVE_DIR / name
        (native / MODEL_VERSION).mkdir(parents=True, exist_ok=True)
        target = native / MODEL_VERSION / NATIVE[fmt][1]
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
        (native / "config.pbtxt").write_text(self.config_text(spec, fmt))
        if fmt in PYTHON_ENGINES:
            python = layout / PYTHON_DIR / name
            (python / MODEL_VERSION).mkdir(parents=True, exist_ok=True)
            link_or_copy(target, python / MODEL_VERSION / NATIVE[fmt][1])
            shutil.copy2(self.runtime_dir / PYTHON_MODEL, python / MODEL_VERSION / "model.py")
            (python / "config.pbtxt").write_text(self.config_text(spec, fmt, python_backend=True))
        return layout

    def run_spec(self, layout: Path, spec: ModelSpec, ports: dict[str, int]) -> RunSpec:
        env = ensure_runtime(self.runtime)
        paths = runtime_paths(env)
        backends = prepare_backend_dir(paths, layout / BACKENDS_DIR)
        repository = layout / PYTHON_DIR if (layout / PYTHON_DIR).is_dir() else layout / NATIVE_DIR
        argv = (
            str(paths["tritonserver"]),
            f"--model-repository={repository.resolve()}",
            f"--backend-directory={backends}",
            "--http-address=127.0.0.1", f"--http-port={ports['http']}",
            "--grpc-address=127.0.0.1", f"--grpc-port={ports['grpc']}",
            "--metrics-address=127.0.0.1", f"--metrics-port={ports['metrics']}",
            "--allow-gpu-metrics=false", "--allow-cpu-metrics=true",
            "--pinned-memory-pool-byte-size=0",  # no CUDA here: do not try to pin host memory
            *self._common_flags(),
            # a per-server prefix (still under the launcher's cleanup prefix): its regions are told apart
            f"--backend-config=python,shm-region-prefix-name={SHM_PREFIX}p{ports['http']}_",
        )
        ld_path = [str(p) for p in (paths["python_lib"], paths["bundled_libs"]) if p]
        if os.environ.get("LD_LIBRARY_PATH"):
            ld_path.append(os.environ["LD_LIBRARY_PATH"])
        return RunSpec(
            runtime=self.runtime,
            argv=argv,
            ports=dict(ports),
            env={"LD_LIBRARY_PATH": os.pathsep.join(ld_path), "PYTHONDONTWRITEBYTECODE": "1",
                 **self.options.thread_env},
            image=self.image,
            container_argv=self.container_argv(),
            container_ports=dict(CONTAINER_PORTS),
            mounts={str(layout.resolve()): CONTAINER_ROOT},
            device=self.options.device,
            cleanup_globs=(PYTHON_ENV_GLOB,),
        )

    @property
    def image(self) -> str:
        return OFFICIAL_IMAGE if self.options.images == "official" else IMAGE

    def container_argv(self) -> tuple[str, ...]:
        """The container's command: the project image's entry point is its tritonserver with the backend folder
        made at build time, serving the python-backend repository; the official image serves the native one."""
        official = self.options.images == "official"
        return (
            *(("tritonserver",) if official else ()),
            f"--model-repository={CONTAINER_ROOT}/{NATIVE_DIR if official else PYTHON_DIR}",
            f"--http-port={CONTAINER_PORTS['http']}", f"--grpc-port={CONTAINER_PORTS['grpc']}",
            f"--metrics-port={CONTAINER_PORTS['metrics']}",
            *(("--allow-gpu-metrics=false", "--allow-cpu-metrics=true") if not official else ()),
            *(("--pinned-memory-pool-byte-size=0",) if self.options.device == "cpu" else ()),
            *self._common_flags(),
        )

    @staticmethod
    def _common_flags() -> tuple[str, ...]:
        return ("--exit-on-error=true",  # a model that fails to load ends the start-up (fail fast)
                "--strict-readiness=true", f"--exit-timeout-secs={EXIT_TIMEOUT_S}", "--log-verbose=0")

    def skip_reason(self, launcher: str, fmt: str | None = None, spec: ModelSpec | None = None) -> str | None:
        """Why this server cannot run under `launcher` (and, when given, for artifact format `fmt`) here."""
        if fmt == "tensorrt" and self.options.device != "gpu":
            return "device=cpu: a TensorRT plan needs an NVIDIA GPU (device=gpu, launcher=docker, images=official)"
        if launcher == "docker" and self.options.images == "official":
            return official_unavailable_reason(OFFICIAL_IMAGE)
        where = "the local triton runtime" if launcher == "process" else "the project's triton image"
        official = "launcher=docker with images=official (NVIDIA's image, where a registry serves it)"
        if self.options.device == "gpu":
            return (f"device=gpu: {where} is CPU-only (python backend with CPU builds of torch and onnxruntime); "
                    f"run with {official}")
        if fmt is not None and fmt not in PYTHON_ENGINES:
            prefix = "needs Docker: " if launcher == "process" else ""
            return (f"{prefix}format {fmt} needs Triton's native backend, which {where} (the nvidia-pytriton "
                    f"wheel's tritonserver) lacks; it serves {sorted(PYTHON_ENGINES)}; run with {official}")
        return None

    def server_side_counts(self, endpoint: Endpoint) -> dict[str, float]:
        """Triton's cumulative counters from /metrics, summed over models (take deltas around a window).

        `nv_inference_request_success`/`_failure` count requests, `nv_inference_count` counts samples (batch
        rows) and `nv_inference_exec_count` counts model executions, so count / exec_count is the average batch.
        """
        url = f"http://{endpoint.host}:{endpoint.ports[self.metrics_port]}{self.metrics_path}"
        with urllib.request.urlopen(url, timeout=HTTP_PROBE_TIMEOUT_S) as resp:
            return parse_counts(resp.read().decode())


    def server_timings(self, endpoint: Endpoint) -> dict[str, float]:
        """Cumulative sums from the statistics extension, over the model's versions (ns -> ms)."""
        url = f"http://{endpoint.host}:{endpoint.ports['http']}/v2/models/{endpoint.model_name}/stats"
        with urllib.request.urlopen(url, timeout=HTTP_PROBE_TIMEOUT_S) as resp:
            return parse_stats(json.load(resp))


def parse_counts(text: str) -> dict[str, float]:
    """Sum each of COUNT_METRICS over its label sets in Prometheus text."""
    found = samples(text)
    return {name: total(found, name) or 0.0 for name in COUNT_METRICS}


def parse_stats(stats: dict) -> dict[str, float]:
    """`requests` and the STATS_PARTS sums (ms) of a statistics extension answer, over every model version."""
    out = dict.fromkeys(("requests", *STATS_PARTS.values()), 0.0)
    for model in stats.get("model_stats", []):
        inference = model.get("inference_stats", {})
        out["requests"] += float(inference.get("success", {}).get("count", 0))
        for entry, part in STATS_PARTS.items():
            out[part] += float(inference.get(entry, {}).get("ns", 0)) / 1e6
    return out


def runtime_paths(env: RuntimeEnv) -> dict[str, Path | None]:
    """Where the wheel's server, python backend, stub and bundled libraries are inside the runtime venv."""
    site_packages = next((p for p in sorted(env.venv_dir.glob("lib/python3.*/site-packages"))
                          if (p / PYTRITON_DIR).is_dir()), None)
    if site_packages is None:
        raise ConfigError(f"runtime {env.name}: {PYTRITON_DIR}", str(env.venv_dir),
                          "must exist in the venv's site-packages (is nvidia-pytriton installed?)")
    py_version = site_packages.parent.name.removeprefix("python")
    root = site_packages / PYTRITON_DIR
    home = _pyvenv_home(env.venv_dir)
    python_lib = home.parent / "lib" if home else None
    paths: dict[str, Path | None] = {
        "tritonserver": root / "bin" / "tritonserver",
        "python_backend": root / "backends" / "python",
        "stub": root / "python_backend_stubs" / py_version / "triton_python_backend_stub",
        "bundled_libs": site_packages / BUNDLED_LIBS_DIR,
        # a pyenv/uv/conda Python ships libpython in its own lib; a system Python's is on the loader path
        "python_lib": python_lib if python_lib and (python_lib / f"libpython{py_version}.so.1.0").exists() else None,
    }
    for key in ("tritonserver", "python_backend", "stub", "bundled_libs"):
        if not paths[key].exists():
            raise ConfigError(f"runtime {env.name}: {key}", str(paths[key]), "must exist in the triton runtime venv")
    return paths


def prepare_backend_dir(paths: dict[str, Path | None], backends: Path) -> Path:
    """A private backend folder: the wheel's python backend plus the stub for the venv's Python next to it."""
    target = backends / "python"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(paths["python_backend"], target, ignore=shutil.ignore_patterns("__pycache__"))
    stub = target / "triton_python_backend_stub"
    shutil.copy2(paths["stub"], stub)
    stub.chmod(0o755)
    return backends.resolve()


def _pyvenv_home(venv_dir: Path) -> Path | None:
    cfg = venv_dir / "pyvenv.cfg"
    if not cfg.is_file():
        return None
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip())
    return None

