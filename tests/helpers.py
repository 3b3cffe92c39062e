"""Helpers shared by the server tests: reference outputs, and checks that a session left nothing behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import psutil

from tasks.convert import Artifact
from tasks.core.spec import ModelSpec
from tasks.runtimes.venvs import ensure_runtime, runtime_env_vars

REFERENCE_TIMEOUT_S = 300
# Runs in the convert-torch runtime: eager TorchScript on make_inputs(spec, batch_size), outputs as JSON.
_REFERENCE_SCRIPT = """
import json, sys
import torch
from tasks.core.spec import ModelSpec, make_inputs
spec = ModelSpec.from_dict(json.loads(sys.argv[2]))
model = torch.jit.load(sys.argv[1], map_location="cpu").eval()
inputs = make_inputs(spec, int(sys.argv[3]))
with torch.inference_mode():
    out = model(*[torch.from_numpy(inputs[t.name]) for t in spec.inputs])
out = list(out) if isinstance(out, (tuple, list)) else [out]
print(json.dumps({t.name: o.tolist() for t, o in zip(spec.outputs, out)}))
"""


def reference_outputs(artifact: Artifact, spec: ModelSpec, batch_size: int) -> dict[str, np.ndarray]:
    """The TorchScript artifact's outputs on `make_inputs(spec, batch_size)`, computed in the convert-torch
    runtime (the orchestrator has no torch). Pass the TorchScript artifact: eager TorchScript is the reference."""
    if artifact.format != "torchscript":
        raise ValueError(f"artifact.format={artifact.format!r}: the reference is computed from TorchScript")
    env = ensure_runtime("convert-torch")
    proc = subprocess.run(
        [str(env.python), "-c", _REFERENCE_SCRIPT, artifact.path, spec.to_json(), str(batch_size)],
        capture_output=True, text=True, env=runtime_env_vars(env), timeout=REFERENCE_TIMEOUT_S,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"reference run failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}")
    return {name: np.asarray(value) for name, value in json.loads(proc.stdout.splitlines()[-1]).items()}


def post(url: str, body: bytes, timeout_s: float = 30.0) -> tuple[int, bytes]:
    """POST JSON bytes; (status, body) also for HTTP errors."""
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def split_request(raw: bytes) -> tuple[str, bytes]:
    """(path, body) of an HTTP request encoded by a codec's `request_bytes`."""
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].split()[1].decode(), body


def infer_and_check(live, spec: ModelSpec, references: dict[int, dict]) -> None:
    """Each reference batch through the server's own codec; outputs equal the source model's within parity."""
    from tasks.core.spec import make_inputs
    from tasks.loadgen.protocols import get_codec
    from tasks.loadgen.worker import output_shapes

    for batch_size, expected in references.items():
        codec = get_codec(live.server.protocol)(live.endpoint.host, live.endpoint.port, live.endpoint.model_name,
                                                make_inputs(spec, batch_size), output_shapes(spec, batch_size))
        path, body = split_request(codec.request_bytes())
        status, response = post(live.endpoint.base_url + path, body)
        assert codec.check(status, response) == 0, (status, response[:500])
        outputs = codec.decode(response)
        for name, want in expected.items():
            np.testing.assert_allclose(outputs[name], want, atol=spec.parity_atol, rtol=spec.parity_rtol)


def tree_pids(pid: int, pgid: int) -> set[int]:
    """Live (non-zombie) processes in the group `pgid` or below `pid`."""
    found = set()
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.add(proc.pid)
        except (OSError, psutil.Error):
            continue
    try:
        found |= {c.pid for c in psutil.Process(pid).children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE}
        if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            found.add(pid)
    except psutil.Error:
        pass
    return found


def listening_addresses(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket those processes listen on."""
    found = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        found += [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return found


def is_loopback(address: str) -> bool:
    address = address.removeprefix("::ffff:")
    return address == "::1" or address.startswith("127.")


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the client's TIME_WAITs don't count
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def shm_entries(prefix: str = "triton") -> set[str]:
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir() if p.name.startswith(prefix)} if shm.is_dir() else set()


def probe_live_capabilities(live, spec: ModelSpec, artifact: Artifact, capabilities=None) -> list:
    """The capability probes of a live server (tasks/measure/capabilities.py), its wire probes answered by the
    served-output check over that wire, as a session makes them."""
    from tasks.measure.capabilities import probe_capabilities
    from tasks.measure.served_check import check_served_outputs

    def wire_check(kind: str) -> tuple[bool, str]:
        codec = live.server.wires[kind].codec
        check = check_served_outputs(codec, live.server.wire_endpoint(live.endpoint, codec), spec, artifact, 4)
        return check.passed, check.detail

    return probe_capabilities(live.server, live.endpoint, capabilities=capabilities, wire_check=wire_check)


def assert_probes_pass(checks: list) -> None:
    """Every declared capability with a probe was probed and passed (no finding), each with its evidence."""
    probed = [c for c in checks if c.probe]
    assert probed, "no capability was probed"
    assert all(c.result == "passed" and c.evidence for c in probed), [c.to_dict() for c in probed
                                                                      if c.result != "passed"]


def serve_and_check(server, artifact: Artifact, spec: ModelSpec, log_dir: Path, references: dict[int, dict],
                    expected_version: str, ready_timeout_s: float = 90.0, wrong_probes: dict | None = None) -> dict:
    """One real session: ready, version, batch 1 and 4 through the server's codec against `references`
    (batch size -> outputs), its capability probes all passing (and, with `wrong_probes`, a declaration pointed
    wrong probed too: `seen["wrong_probes"]`), loopback-only listeners; then nothing left: processes, ports, workdir,
    shm."""
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.session import SessionSettings, server_session

    shm_before = shm_entries()
    seen: dict = {}
    cell_id = f"{server.name}-{artifact.format}"
    with server_session(server, artifact, spec, ProcessLauncher(),
                        SessionSettings(run_id="test", session_id=cell_id, log_dir=log_dir,
                                        ready_timeout_s=ready_timeout_s)) as live:
        seen.update(handle=live.handle, ports=dict(live.endpoint.ports), startup_s=live.startup_s)
        assert server.is_ready(live.endpoint)
        assert live.server_version == expected_version
        infer_and_check(live, spec, references)
        seen["capabilities"] = probe_live_capabilities(live, spec, artifact)
        assert_probes_pass(seen["capabilities"])
        if wrong_probes:
            pointed_wrong = {**server.capabilities, **wrong_probes}
            seen["wrong_probes"] = probe_live_capabilities(live, spec, artifact, pointed_wrong)
        pids = tree_pids(live.handle.pid, live.handle.pgid)
        listeners = listening_addresses(pids)
        assert {port for _, port in listeners} >= set(live.endpoint.ports.values())
        assert all(is_loopback(address) for address, _ in listeners), listeners
        seen["pids"] = pids
        seen["outside_group"] = {pid for pid in pids if _pgid(pid) not in (live.handle.pgid, None)}
    handle = seen["handle"]
    left = tree_pids(handle.pid, handle.pgid) | {pid for pid in seen["pids"] if _running(pid)}
    assert not left, f"left running: {left}"
    assert all(port_free(port) for port in seen["ports"].values()), seen["ports"]
    assert not Path(handle.workdir).exists()
    assert shm_entries() <= shm_before
    return seen


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
