"""Every stack in its container on a real engine: ready, its version, correct outputs through its own protocol,
its budget applied, nothing left; and one running container inspected for its exposure."""

from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest

from tasks.convert.parity import load_reference
from tasks.loadgen.resources import read_footprint
from tasks.serve.launchers.docker import LOOPBACK, DockerLauncher
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.session import SessionSettings, server_session
from tests.helpers import assert_probes_pass, infer_and_check, probe_live_capabilities

pytestmark = pytest.mark.integration

# (server, format, version it reports): the five stacks, each on a format its project image serves
STACKS = [
    ("triton", "onnx", "triton 2.51.0"),
    ("triton", "torchscript", "triton 2.51.0"),
    ("torchserve", "torchscript", "torchserve 0.12.0"),
    ("bentoml", "onnx", "bentoml 1.4.40"),
    ("kserve", "onnx", "kserve 0.21.0"),
    ("custom", "onnx", "serving-eval-custom 0.1.0"),
    ("custom", "torchscript", "serving-eval-custom 0.1.0"),
]


def source_references(artifact, spec) -> dict[int, dict]:
    """The source model's own outputs kept beside the artifact (batch size -> {output name: array})."""
    outputs = load_reference(Path(artifact.path).parent, spec)
    return {bs: {t.name: out for t, out in zip(spec.outputs, outs, strict=True)} for bs, outs in outputs.items()}


@pytest.mark.parametrize(("server_name", "fmt", "version"), STACKS, ids=[f"{s}-{f}" for s, f, _ in STACKS])
def test_stack_serves_from_its_image(server_name, fmt, version, request, mlp_spec, log_dir, project_images,
                                     no_docker_leftovers):
    client = no_docker_leftovers
    artifact = request.getfixturevalue(f"mlp_{fmt}")
    server = get_server(server_name, ServingOptions(cpus=1))
    launcher = DockerLauncher()
    cell_id = f"docker-{server_name}-{fmt}"
    with server_session(server, artifact, mlp_spec, launcher,
                        SessionSettings(run_id="test-docker-servers", session_id=cell_id, log_dir=log_dir,
                                        ready_timeout_s=120, cpus=(psutil.cpu_count() - 1,), memory="2g")) as live:
        assert server.is_ready(live.endpoint)
        assert live.server_version == version
        image = project_images[server.runtime]
        assert live.runtime_image == image.label and live.runtime_image_kind == "project"
        infer_and_check(live, mlp_spec, source_references(artifact, mlp_spec))
        attrs = client.containers.get(live.handle.container_id).attrs
        assert attrs["Image"] == image.image_id
        assert attrs["HostConfig"]["CpusetCpus"] == str(psutil.cpu_count() - 1)
        assert attrs["HostConfig"]["Memory"] == 2 * 2**30 == attrs["HostConfig"]["MemorySwap"]
        size = launcher.runtime_size(live.run_spec)  # the image's size as the engine reports it
        assert size.size_bytes == client.images.get(image.ref).attrs["Size"] > 0 and image.ref in size.what
        footprint = read_footprint(live.handle, client)  # the container's cgroup: its init and the server
        assert footprint.rss_mb > 0 and footprint.processes >= 2 and footprint.threads >= footprint.processes
        assert_probes_pass(probe_live_capabilities(live, mlp_spec, artifact))  # through the published ports
        container_id = live.handle.container_id
    assert container_id not in {c.id for c in client.containers.list(all=True)}
    assert (log_dir / f"{cell_id}.log").is_file(), "the container's log was not saved into the cell's log"


def host_addresses() -> list[str]:
    """This host's IPv4 addresses other than loopback (where a port published on 0.0.0.0 would answer)."""
    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")]


def refused(address: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((address, port)) != 0


def test_running_container_exposure(mlp_onnx, mlp_spec, log_dir, project_images, no_docker_leftovers):
    """Ports on 127.0.0.1 only, not privileged, no host network, no Docker socket inside, model mount read-only."""
    client = no_docker_leftovers
    launcher = DockerLauncher()
    with server_session(get_server("custom"), mlp_onnx, mlp_spec, launcher,
                        SessionSettings(run_id="test-docker-exposure", session_id="docker-exposure", log_dir=log_dir,
                                        ready_timeout_s=120)) as live:
        container = client.containers.get(live.handle.container_id)
        attrs = container.attrs
        host = attrs["HostConfig"]
        published = [b for bindings in attrs["NetworkSettings"]["Ports"].values() for b in bindings or []]
        assert published and all(b["HostIp"] == LOOPBACK for b in published), published
        assert all(b["HostIp"] == LOOPBACK for bs in host["PortBindings"].values() for b in bs)
        for address in host_addresses():  # not reachable from another interface of the host
            assert refused(address, live.endpoint.port), f"port {live.endpoint.port} answers on {address}"
        assert host["Privileged"] is False
        assert host["NetworkMode"] == "bridge" and "host" not in attrs["NetworkSettings"]["Networks"]
        assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
        assert "no-new-privileges:true" in host["SecurityOpt"]
        mounts = attrs["Mounts"]
        assert mounts and all(m["RW"] is False and m["Mode"] == "ro" for m in mounts), mounts
        assert not any("docker.sock" in m["Source"] or "docker.sock" in m["Destination"] for m in mounts)
        code, out = container.exec_run(["sh", "-c", "test -e /var/run/docker.sock || test -e /run/docker.sock"])
        assert code != 0, "a Docker socket is visible inside the container"
        code, out = container.exec_run(["sh", "-c", "touch /models/written 2>&1"])
        assert code != 0 and b"Read-only file system" in out


@pytest.mark.parametrize("cpus", [1, 2])
def test_threads_follow_the_cpus(cpus, mlp_onnx, mlp_spec, tmp_path):
    """The custom service's thread count (and its OpenMP pools) follow the CPUs the server is given."""
    server = get_server("custom", ServingOptions(cpus=cpus))
    layout = server.write_layout(mlp_onnx, mlp_spec, tmp_path)
    spec = server.run_spec(layout, mlp_spec, {"http": 18000})
    assert spec.container_argv[spec.container_argv.index("--threads") + 1] == str(cpus)
    assert spec.env["OMP_NUM_THREADS"] == str(cpus)
