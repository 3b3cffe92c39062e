"""The reliability suite: every fault tried for real (real server processes, the real moto S3 server, real
Airflow runs where the fault is about Airflow), and after each case nothing of the run is left: no server
process, no session temp dir, no Triton shared-memory region, no recorded server handle, no container."""

from __future__ import annotations

import subprocess

import pytest

from tasks.serve.launchers.base import recorded_handles
from tests.dagrun import serving_processes, session_temp_dirs
from tests.helpers import shm_entries


def pytest_collection_modifyitems(config, items) -> None:
    """Every case here starts real processes: the whole folder is `integration` (make test-fast skips it)."""
    for item in items:
        if "/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


def project_containers() -> set[str]:
    """Containers of this suite's runs (run ids start with "reliability") that a Docker engine, when one
    answers, still has (other sessions on the machine may have containers of their own)."""
    try:
        proc = subprocess.run(["docker", "ps", "-a", "--filter", "label=serving-eval.run_id", "--format",
                               '{{.ID}} {{.Label "serving-eval.run_id"}}'], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if proc.returncode != 0:
        return set()
    return {line.split()[0] for line in proc.stdout.splitlines() if " reliability" in line}


def case_handles() -> set[str]:
    """Recorded server handles of this suite's runs (run ids start with "reliability"; other sessions on the
    machine may have their own)."""
    return {str(h) for h in recorded_handles() if h.run_id.startswith("reliability")}


@pytest.fixture(autouse=True)
def nothing_left_behind():
    temp_before, shm_before, handles_before = session_temp_dirs(), shm_entries(), case_handles()
    containers_before = project_containers()
    yield
    assert serving_processes() == [], "a server process of the case is still running"
    assert session_temp_dirs() - temp_before == set(), "a server session's temp dir is left"
    assert shm_entries() <= shm_before, "a Triton shared-memory region is left in /dev/shm"
    assert case_handles() <= handles_before, "a recorded server handle is left"
    assert project_containers() <= containers_before, "a container of the case is left"
