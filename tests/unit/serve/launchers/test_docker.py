"""DockerLauncher without an engine: container parameters for every server, the unreachable-engine error, and
start/stop/sweep against a small in-memory fake of the docker SDK's client (only the calls the launcher makes),
which checks that the launcher records, labels, saves logs and removes what it created.

The same paths against a real engine: tests/integration/test_docker_servers.py, test_docker_faults.py and
the others.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from tasks.convert import Artifact
from tasks.core.errors import ConfigError, ConversionError, ServerStartError
from tasks.runtimes.docker_engine import docker_client
from tasks.runtimes.images import ImageRef
from tasks.runtimes.proctree import create_time_of
from tasks.serve.base import RunSpec
from tasks.serve.launchers import LAUNCHERS, get_launcher
from tasks.serve.launchers.base import recorded_handles
from tasks.serve.launchers.docker import (
    LABEL_CELL_ID,
    LABEL_OWNER,
    LABEL_RUN_ID,
    DockerLauncher,
    LauncherUnavailable,
    container_params,
    owner_gone,
)
from tasks.serve.options import ServingOptions
from tasks.serve.servers import SERVERS, get_server
from tasks.serve.servers.custom import CustomServer
from tasks.serve.servers.tfserving import IMAGE_CPU, IMAGE_GPU

FIRST_HOST_PORT = 18000  # never bound here: container_params only writes the numbers down


def run_id(label: str) -> str:
    """A run id of this test alone: recorded handles live in the shared cache, next to real runs'."""
    return f"test-docker-{label}-{uuid.uuid4().hex[:8]}"


def fake_savedmodel(root: Path) -> Path:
    """A directory shaped like a SavedModel (saved_model.pb + variables/) with placeholder bytes: the
    orchestrator has no TensorFlow, and these tests only need the layout; real SavedModels come from the
    converters issue (convert-tf runtime)."""
    root.mkdir(parents=True)
    (root / "saved_model.pb").write_bytes(b"\x08\x01fake-saved-model")
    (root / "variables").mkdir()
    (root / "variables" / "variables.index").write_bytes(b"fake-index")
    (root / "variables" / "variables.data-00000-of-00001").write_bytes(b"fake-data")
    return root


def fake_artifact(fmt: str, path: Path) -> Artifact:
    return Artifact(model="mlp", format=fmt, path=str(path), sha256="0" * 64, key="fake", cache_hit=False,
                    record={"parity": []})


def server_ports(server) -> dict[str, int]:
    return {name: FIRST_HOST_PORT + i for i, name in enumerate(server.port_names)}


def tfserving_spec(tmp_path, mlp_spec, device: str = "cpu", dynamic_batching: bool = False) -> RunSpec:
    server = get_server("tfserving", ServingOptions(device=device, dynamic_batching=dynamic_batching))
    artifact = fake_artifact("savedmodel", fake_savedmodel(tmp_path / "saved"))
    layout = server.write_layout(artifact, mlp_spec, tmp_path / "work")
    return server.run_spec(layout, mlp_spec, server_ports(server))


def test_launcher_is_registered():
    assert LAUNCHERS["docker"] is DockerLauncher
    assert isinstance(get_launcher("docker"), DockerLauncher)


def test_custom_server_params(tmp_path, mlp_spec):
    layout = tmp_path / "model"
    layout.mkdir()
    spec = CustomServer().run_spec(layout, mlp_spec, {"http": 18000})
    params = container_params(spec, "run-1", "cell-a", cpus=(2, 3), device="cpu", memory="4g")
    assert params["image"] == "serving-eval/custom"  # the project image's repository; `image=` gives its tag
    assert container_params(spec, "r", "c", image="serving-eval/custom:0123")["image"] == "serving-eval/custom:0123"
    assert params["command"] == list(spec.container_argv)
    assert params["ports"] == {"8000/tcp": ("127.0.0.1", 18000)}
    assert params["volumes"] == {str(layout): {"bind": "/models", "mode": "ro"}}
    assert params["labels"] == {LABEL_RUN_ID: "run-1", LABEL_CELL_ID: "cell-a"}
    assert params["cpuset_cpus"] == "2,3"
    assert params["mem_limit"] == params["memswap_limit"] == "4g"  # no swap beyond the limit
    assert params["detach"] is True
    assert "device_requests" not in params
    # exposure: the default bridge network, never privileged, no capabilities, no privilege gain, no socket
    assert params["network_mode"] == "bridge" and params["privileged"] is False
    assert params["cap_drop"] == ["ALL"] and params["security_opt"] == ["no-new-privileges:true"]
    assert not any("docker.sock" in host for host in params["volumes"])


def test_tfserving_params_cpu(tmp_path, mlp_spec):
    spec = tfserving_spec(tmp_path, mlp_spec)
    params = container_params(spec, "run-1", "cell-tf", device=spec.device)
    assert params["image"] == IMAGE_CPU
    assert params["ports"] == {"8501/tcp": ("127.0.0.1", 18000), "8500/tcp": ("127.0.0.1", 18001)}
    assert "--model_config_file=/models/models.config" in params["command"]
    assert "--rest_api_port=8501" in params["command"] and "--port=8500" in params["command"]
    assert not any(a.startswith("--enable_batching") for a in params["command"])
    (host, bind), = params["volumes"].items()
    assert bind == {"bind": "/models", "mode": "ro"} and (Path(host) / "models.config").is_file()
    assert "device_requests" not in params and "cpuset_cpus" not in params and "mem_limit" not in params


def test_tfserving_params_gpu_with_batching(tmp_path, mlp_spec):
    spec = tfserving_spec(tmp_path, mlp_spec, device="gpu", dynamic_batching=True)
    assert spec.device == "gpu"
    params = container_params(spec, "run-1", "cell-tf", device=spec.device)
    assert params["image"] == IMAGE_GPU and IMAGE_GPU.endswith("-gpu")
    (request,) = params["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    assert "--enable_batching=true" in params["command"]
    assert "--batching_parameters_file=/models/batching.config" in params["command"]


def test_host_only_env_is_not_passed(tmp_path):
    spec = RunSpec(runtime="x", argv=("x",), ports={"http": 1}, image="img", container_ports={"http": 80},
                   env={"PATH": "/host/venv/bin", "LD_LIBRARY_PATH": "/host/lib", "OMP_NUM_THREADS": "2"})
    assert container_params(spec, "r", "c")["environment"] == {"OMP_NUM_THREADS": "2"}
    own = RunSpec(runtime="x", argv=("x",), ports={}, image="img", env={"BENTOML_HOME": "/host/home"},
                  container_env={"BENTOML_DO_NOT_TRACK": "true"})
    assert container_params(own, "r", "c")["environment"] == {"BENTOML_DO_NOT_TRACK": "true"}


@pytest.mark.parametrize("change, field", [
    ({"image": ""}, "RunSpec.image"),
    ({"container_ports": {"grpc": 8001}}, "RunSpec.ports['grpc']"),
])
def test_bad_specs_name_the_field(change, field):
    spec = RunSpec(**{"runtime": "x", "argv": ("x",), "ports": {"http": 1}, "image": "img",
                      "container_ports": {"http": 80}, **change})
    with pytest.raises(ConfigError) as info:
        container_params(spec, "r", "c")
    assert info.value.field == field


def test_bad_device_is_refused():
    spec = RunSpec(runtime="x", argv=("x",), ports={}, image="img")
    with pytest.raises(ConfigError, match="device='tpu'"):
        container_params(spec, "r", "c", device="tpu")


def _artifact_for(fmt: str, request, tmp_path: Path) -> Artifact | None:
    if fmt == "savedmodel":
        return fake_artifact(fmt, fake_savedmodel(tmp_path / "saved"))
    fixture = {"onnx": "mlp_onnx", "torchscript": "mlp_torchscript"}.get(fmt)
    if fixture is None:
        return None
    try:
        return request.getfixturevalue(fixture)
    except ConversionError as exc:  # the converters' own tests report this; here it only blocks the layout
        pytest.skip(f"no {fmt} artifact: {exc}"[:500])


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("server_name", sorted(SERVERS))
def test_every_server_has_container_params(server_name, device, tmp_path, mlp_spec, request):
    """Every registered server (at test time) describes a container: image, command, loopback ports, GPU."""
    server = get_server(server_name, ServingOptions(device=device))
    fmt = server.formats[0]
    artifact = _artifact_for(fmt, request, tmp_path)
    if artifact is None:
        pytest.skip(f"server {server_name}: no test artifact for format {fmt!r} on this machine")
    layout = server.write_layout(artifact, mlp_spec, tmp_path / "work")
    ports = server_ports(server)
    spec = server.run_spec(layout, mlp_spec, ports)
    # servers that do not set RunSpec.device yet still get the GPU from the launcher's argument
    params = container_params(spec, "run-all", f"cell-{server_name}", cpus=(1,), device=device)
    assert params["image"], f"server {server_name}: no image"
    assert params["ports"], f"server {server_name}: no container port published"
    for container_port, (host_ip, host_port) in params["ports"].items():
        assert host_ip == "127.0.0.1", f"{server_name}: {container_port} published on {host_ip}"
        assert host_port in ports.values()
    assert all(v["mode"] == "ro" for v in params["volumes"].values())
    assert params["labels"] == {LABEL_RUN_ID: "run-all", LABEL_CELL_ID: f"cell-{server_name}"}
    assert params["cpuset_cpus"] == "1"
    assert ("device_requests" in params) == (device == "gpu")


def closed_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when this returns: nothing listens there


@pytest.mark.parametrize("docker_host", ["tcp", "unix"])
def test_unreachable_engine_suggests_process_launcher(docker_host, tmp_path, monkeypatch, mlp_spec):
    host = f"tcp://127.0.0.1:{closed_port()}" if docker_host == "tcp" else f"unix://{tmp_path / 'no-docker.sock'}"
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(LauncherUnavailable) as info:
        docker_client(timeout_s=2)
    assert isinstance(info.value, ServerStartError)
    assert "launcher=process" in str(info.value) and host in str(info.value)
    spec = tfserving_spec(tmp_path, mlp_spec)
    with pytest.raises(LauncherUnavailable, match="launcher=process"):
        DockerLauncher().start(spec, run_id="r", cell_id="c", workdir=tmp_path, log_path=tmp_path / "c.log")
    assert DockerLauncher().sweep("r") == []  # a run-level sweep on a host without Docker passes


# --- start / stop / sweep against an in-memory fake of the docker SDK client --------------------------------

class FakeContainer:
    def __init__(self, engine: FakeEngine, cid: str, params: dict) -> None:
        self.engine, self.id, self.params = engine, cid, params
        self.labels = params.get("labels", {})
        self.status = "created"
        self.attrs = {"State": {"ExitCode": 0}}

    def start(self) -> None:
        self.status = "running"

    def reload(self) -> None:
        pass

    def stop(self, timeout: int = 10) -> None:
        if self.status == "running":
            self.status, self.attrs = "exited", {"State": {"ExitCode": 143}}

    def logs(self, stdout: bool = True, stderr: bool = True, tail: int | str = "all") -> bytes:
        return f"log of {self.id}\n".encode()

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.engine.containers.items.pop(self.id, None)


class FakeContainers:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine, self.items = engine, {}

    def create(self, **params) -> FakeContainer:
        container = FakeContainer(self.engine, f"{len(self.items) + 1:064x}", params)
        self.items[container.id] = container
        return container

    def get(self, cid: str) -> FakeContainer:
        from docker.errors import NotFound

        if cid not in self.items:
            raise NotFound(f"No such container: {cid}")
        return self.items[cid]

    def list(self, all: bool = False, filters: dict | None = None) -> list[FakeContainer]:  # noqa: A002
        key, _, value = (filters or {}).get("label", "").partition("=")
        return [c for c in self.items.values() if key in c.labels and (not value or c.labels[key] == value)]


def fake_image(spec: RunSpec) -> ImageRef:
    return ImageRef(f"{spec.image}:fake", "sha256:" + "f" * 64, "official" if "/serving:" in spec.image else "project")


class FakeEngine:
    def __init__(self) -> None:
        self.containers = FakeContainers(self)


def test_start_stop_with_fake_engine(tmp_path, mlp_spec):
    engine = FakeEngine()
    launcher = DockerLauncher(memory="2g", client=engine, resolve_image=fake_image)
    spec = tfserving_spec(tmp_path, mlp_spec, device="gpu")
    log_path = tmp_path / "logs" / "cell-tf.log"
    run = run_id("f")
    handle = launcher.start(spec, run_id=run, cell_id="cell-tf", workdir=tmp_path, log_path=log_path, cpus=(0,))
    (container,) = engine.containers.items.values()
    assert handle.container_id == container.id and handle.ports == spec.ports
    assert container.params["name"].startswith("serving-eval-cell-tf-")
    assert container.params["mem_limit"] == "2g" and "device_requests" in container.params
    assert container.params["image"] == f"{spec.image}:fake"
    assert json.loads(container.params["labels"][LABEL_OWNER])["pid"] == os.getpid()
    assert launcher.runtime_label(spec) == f"{spec.image}:fake@sha256:{'f' * 64}"
    assert launcher.runtime_kind(spec) == "official"
    assert [h.container_id for h in recorded_handles(run)] == [container.id]
    assert launcher.exit_code(handle) is None
    assert "log of" in launcher.log_tail(handle)
    launcher.stop(handle, grace_s=1)
    assert engine.containers.items == {}, "the container was not removed"
    assert log_path.read_text() == f"log of {container.id}\n", "the container log was not saved"
    assert recorded_handles(run) == []
    assert launcher.exit_code(handle) == -1  # gone
    assert "log of" in launcher.log_tail(handle)  # from the saved file now
    launcher.stop(handle)  # idempotent


def test_sweep_removes_recorded_and_labelled_leftovers(tmp_path, mlp_spec):
    engine = FakeEngine()
    launcher = DockerLauncher(client=engine, resolve_image=fake_image)
    spec = tfserving_spec(tmp_path, mlp_spec)
    run, other_run = run_id("s"), run_id("other")
    recorded = launcher.start(spec, run_id=run, cell_id="a", workdir=tmp_path, log_path=tmp_path / "a.log")
    orphan = engine.containers.create(image="x", labels={LABEL_RUN_ID: run, LABEL_CELL_ID: "b"})
    other = engine.containers.create(image="x", labels={LABEL_RUN_ID: other_run, LABEL_CELL_ID: "c"})
    swept = launcher.sweep(run)
    assert {h.container_id for h in swept} == {recorded.container_id, orphan.id}
    assert set(engine.containers.items) == {other.id}
    assert [h.container_id for h in launcher.sweep(other_run)] == [other.id] and engine.containers.items == {}


def owner(pid: int, create_time: float, host: str | None = None) -> str:
    return json.dumps({"host": host or socket.gethostname(), "pid": pid, "create_time": create_time})


def test_sweep_without_run_id_removes_containers_whose_owner_is_gone(tmp_path):
    """A crashed run's containers are found by their labels alone (no recorded handle) once their owner died;
    a live owner's, or another host's, are left alone."""
    import psutil

    engine = FakeEngine()
    me = psutil.Process()
    run = run_id("crashed")
    dead = engine.containers.create(image="x", labels={LABEL_RUN_ID: run, LABEL_CELL_ID: "a",
                                                       LABEL_OWNER: owner(me.pid, create_time_of(me.pid) - 100)})
    live = engine.containers.create(image="x", labels={LABEL_RUN_ID: run, LABEL_CELL_ID: "b",
                                                       LABEL_OWNER: owner(me.pid, create_time_of(me.pid))})
    elsewhere = engine.containers.create(image="x", labels={LABEL_RUN_ID: run, LABEL_CELL_ID: "c",
                                                            LABEL_OWNER: owner(1, 0.0, host="another-host")})
    assert owner_gone(dead.labels) and not owner_gone(live.labels) and not owner_gone(elsewhere.labels)
    assert not owner_gone({LABEL_RUN_ID: run})  # no owner label: unknown, left alone
    swept = DockerLauncher(client=engine).sweep()
    assert [h.container_id for h in swept] == [dead.id]
    assert set(engine.containers.items) == {live.id, elsewhere.id}


def test_a_containers_image_size_without_an_engine_says_why(monkeypatch):
    from tasks.serve.base import RunSpec
    from tasks.serve.launchers.docker import DockerLauncher
    from tasks.serve.launchers.process import ProcessLauncher

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    size = DockerLauncher().runtime_size(RunSpec("custom", ("python",), {}, image="serving-eval/custom"))
    assert size.size_bytes is None and "no Docker engine answered" in size.what
    # a venv's size on disk: the converter's, which the unit tests' conversions build anyway
    venv = ProcessLauncher().runtime_size(RunSpec("convert-torch", ("python",), {}))
    assert venv.size_bytes > 100 * 2**20 and venv.what.startswith("venv convert-torch-")
