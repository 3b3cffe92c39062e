"""Faults with containers: a container killed during a load point fails that cell with the container's log tail
and no later cell passes as ok on the dead container; a run whose task died leaves containers that the next
run's sweep finds by their labels and removes; TF Serving's cells skip where its official image cannot be had."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime

import pytest

from tasks.convert import convert
from tasks.core.metadata import collect_code_metadata, collect_host_metadata
from tasks.core.results import SCHEMA_VERSION
from tasks.measure.session import measure_session
from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig
from tasks.serve.launchers.base import handles_dir
from tasks.serve.launchers.docker import LABEL_OWNER, LABEL_RUN_ID, DockerLauncher
from tests.dagrun import HOST_NOT_JUDGED, REPO

pytestmark = pytest.mark.integration

KILL_AFTER_S = 1.2  # into the first load point: past its warm-up, inside its measured windows


def run_context(run_id: str, run_dir) -> dict:
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).isoformat()
    return {"run_id": run_id, "logical_date": now, "started_at": now,
            "schema_version": SCHEMA_VERSION, "run_dir": str(run_dir), "host": collect_host_metadata(),
            "code": collect_code_metadata()}


def conversion(spec_name: str, fmt: str) -> dict:
    from tasks.core.spec import load_spec

    artifact = convert(load_spec(spec_name), fmt)
    return {"model": spec_name, "format": fmt, "artifact": artifact.to_dict(), "parity": None, "error": None,
            "skipped": None}


def test_container_killed_mid_load_fails_its_cell(tmp_path, monkeypatch, project_images, no_docker_leftovers):
    client = no_docker_leftovers
    run_id = f"test-docker-kill-{os.getpid()}"
    config = RunConfig.from_params({"servers": ["custom"], "launcher": "docker", "concurrencies": [1, 2, 4],
                                    "duration_s": 2.0, "warmup_s": 0.5, "window_s": 0.5, "ready_timeout_s": 60,
                                    "server_memory": "1g", **HOST_NOT_JUDGED})
    (session,) = make_plan(config).sessions
    import tasks.measure.point

    real_load_point = tasks.measure.point.run_load_point
    killed: list[str] = []

    def load_point_with_a_kill(*args, **kwargs):
        if not killed:  # the first load point: kill the session's container while it runs
            (container,) = client.containers.list(filters={"label": f"{LABEL_RUN_ID}={run_id}"})
            killed.append(container.id)
            threading.Timer(KILL_AFTER_S, container.kill).start()
        return real_load_point(*args, **kwargs)

    monkeypatch.setattr(tasks.measure.point, "run_load_point", load_point_with_a_kill)
    out = measure_session(session, [conversion("mlp", "onnx")], run_context(run_id, tmp_path / "run"), config)
    rows = sorted(out["rows"], key=lambda r: r["load"])
    assert killed and [r["load"] for r in rows] == [1.0, 2.0, 4.0]
    first, later = rows[0], rows[1:]
    assert first["status"] == "failed", first
    assert "exited with code 137" in first["reason"] and "log tail:" in first["reason"]
    for row in later:  # the integrator's outcome rules may restart the server once; never ok on a dead container
        assert row["status"] == "failed" or (row["status"] == "ok" and row.get("restarts")), row
    for row in rows:  # the budget is recorded in every row, also the failed ones
        assert row["server_cpus"] and row["server_memory"] == "1g"
    assert killed[0] not in {c.id for c in client.containers.list(all=True)}


CRASHING_TASK = """
import os, signal, sys
from pathlib import Path
from tasks.runtimes.images import ImageRef, ensure_base
from tasks.serve.base import RunSpec
from tasks.serve.launchers.base import handles_dir
from tasks.serve.launchers.docker import DockerLauncher
base = ensure_base()
spec = RunSpec(runtime="custom", argv=(), ports={}, image=base.ref, container_argv=("sleep", "600"))
launcher = DockerLauncher(resolve_image=lambda s: ImageRef(base.ref, base.image_id, "project"))
run_id, workdir = sys.argv[1], Path(sys.argv[2])
for cell, keep_handle in (("recorded", True), ("unrecorded", False)):
    handle = launcher.start(spec, run_id=run_id, cell_id=cell, workdir=workdir, log_path=workdir / f"{cell}.log")
    if not keep_handle:  # killed between creating the container and recording it: only the labels tell
        for path in handles_dir(run_id).glob(f"{cell}-*.json"):
            path.unlink()
os.kill(os.getpid(), signal.SIGKILL)  # the task dies without stopping anything
"""


def test_next_runs_sweep_removes_a_crashed_runs_containers(tmp_path, project_images, no_docker_leftovers):
    client = no_docker_leftovers
    run_id = f"test-docker-crashed-{os.getpid()}"
    proc = subprocess.run([sys.executable, "-c", CRASHING_TASK, run_id, str(tmp_path)], cwd=REPO, timeout=120,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == -9, proc.stderr[-2000:]
    left = client.containers.list(all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"})
    assert len(left) == 2 and all(c.status == "running" for c in left)
    assert all(json.loads(c.labels[LABEL_OWNER])["pid"] != os.getpid() for c in left)
    assert len(list(handles_dir(run_id).glob("*.json"))) == 1  # one recorded handle, one container only labelled
    swept = DockerLauncher().sweep()  # what the next run's setup task does: the leftovers of any dead owner
    assert {h.container_id for h in swept} >= {c.id for c in left}
    assert client.containers.list(all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"}) == []
    assert not handles_dir(run_id).exists() or not list(handles_dir(run_id).glob("*.json"))


def test_tfserving_cells_skip_without_its_official_image(tmp_path, docker_engine):
    """No registry serves tensorflow/serving here and the engine lacks it: the cells are skipped, saying so."""
    from tasks.runtimes.images import official_unavailable_reason
    from tasks.serve.servers.tfserving import IMAGE_CPU

    official_unavailable_reason.cache_clear()
    reason = official_unavailable_reason(IMAGE_CPU)
    if reason is None:
        pytest.skip(f"{IMAGE_CPU} is on this engine or a registry serves it: TF Serving cells run here")
    config = RunConfig.from_params({"models": ["tiny-cnn-tf"], "formats": ["savedmodel"], "servers": ["tfserving"],
                                    "launcher": "docker", "concurrencies": [1], "control_cell": "none",
                                    **HOST_NOT_JUDGED})
    (session,) = make_plan(config).sessions
    from tasks.core.paths import artifacts_root

    folder = artifacts_root() / "tiny-cnn-tf" / "savedmodel" / "fake-tfserving-skip"  # on this host, as converted
    folder.mkdir(parents=True, exist_ok=True)
    fake = {"model": "tiny-cnn-tf", "format": "savedmodel", "skipped": None, "error": None, "parity": None,
            "artifact": {"model": "tiny-cnn-tf", "format": "savedmodel", "path": str(folder), "sha256": "0" * 64,
                         "key": "fake", "cache_hit": False, "record": {"parity": [{"allclose": True}]}}}
    (row,) = measure_session(session, [fake], run_context("test-docker-tfserving", tmp_path / "run"), config)["rows"]
    assert row["status"] == "skipped"
    assert f"needs the official image {IMAGE_CPU}" in row["reason"] and "could not be pulled" in row["reason"]


def test_a_server_over_its_memory_limit_fails_saying_so(mlp_onnx, mlp_spec, log_dir, project_images,
                                                        no_docker_leftovers):
    """The memory budget is the container's limit: a server that needs more is killed at start, and the reason says
    by what. (24 MB, given to the launcher directly: the custom service starts even within the Param's 64m floor.)"""
    from tasks.core.errors import ServerStartError
    from tasks.serve.servers import get_server
    from tasks.serve.session import SessionSettings, server_session

    with pytest.raises(ServerStartError, match="OOM killer: memory limit 24 MB, Param server_memory"):
        with server_session(get_server("custom"), mlp_onnx, mlp_spec, DockerLauncher(),
                            SessionSettings(run_id="test-docker-oom", session_id="docker-oom", log_dir=log_dir,
                                            memory="24m", ready_timeout_s=60)):
            pass
