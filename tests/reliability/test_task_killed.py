"""The Airflow task measuring a session is killed (OOM killer, a lost worker): its server, detached on purpose so
a setup/teardown split can hold it, survives the task. The run's teardown, or else the next run's setup sweep,
stops it and removes what it left.

Real Airflow: `airflow dags test` runs the DAG's tasks in its own process, which is SIGKILLed mid-measure.
Already handled before this suite (handles recorded with their owner, sweeps in setup and teardown); the
run's work folder and the load generator's processes were left behind, now they go too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tasks.pipeline import cleanup_run_dir, run_dir, sweep_leftovers
from tasks.plan.deadline_alert import DEADLINE_ENV, DEADLINE_OFF
from tasks.serve.launchers.base import LaunchHandle, recorded_handles
from tests.dagrun import REPO
from tests.reliability.faults import conf, load_started

AIRFLOW = os.path.join(os.path.dirname(sys.executable), "airflow")


@pytest.fixture()
def dags_test(airflow_db, embedded_s3):
    # `dags test` evaluates no deadline and cannot finish a run of a DAG with one (tasks/plan/deadline_alert.py)
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO),
           DEADLINE_ENV: DEADLINE_OFF}
    started: list[subprocess.Popen] = []

    def run(params: dict) -> subprocess.Popen:
        proc = subprocess.Popen([AIRFLOW, "dags", "test", "nightly_serving_eval", "-c", json.dumps(params)],
                                env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _kill_while_measuring(proc: subprocess.Popen) -> LaunchHandle:
    """Wait until the task process has a server up and load running, then SIGKILL the task process alone."""
    deadline = time.monotonic() + 300
    handle = None
    while handle is None and time.monotonic() < deadline:
        handle = next((h for h in recorded_handles() if h.owner_pid == proc.pid), None)
        time.sleep(0.1)
    assert handle is not None, "the DAG run never started a server"
    load_started(handle.run_id)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    assert psutil.pid_exists(handle.pid), "the detached server died with its task (it should outlive it)"
    return handle


def _gone(handle: LaunchHandle) -> None:
    assert not psutil.pid_exists(handle.pid) or psutil.Process(handle.pid).status() == psutil.STATUS_ZOMBIE
    assert handle.run_id not in {h.run_id for h in recorded_handles()}
    assert not os.path.exists(handle.workdir)
    loaders = [p for p in psutil.process_iter(["cmdline"])
               if "tasks.loadgen.worker" in " ".join(p.info["cmdline"] or [])
               and str(run_dir(handle.run_id)) in " ".join(p.info["cmdline"] or [])]
    assert loaders == [], "the killed task's load generator workers still run"


def test_the_runs_teardown_stops_the_server_of_a_killed_task(dags_test, bucket):
    handle = _kill_while_measuring(dags_test(conf(bucket, duration_s=30.0)))
    # what the DAG's teardown task (`sweep_run_leftovers`) runs for its run id, after the failed measure task
    assert sweep_leftovers(handle.run_id) == 1
    cleanup_run_dir(handle.run_id)
    _gone(handle)
    assert not run_dir(handle.run_id).exists()


def test_the_next_runs_setup_sweep_stops_the_server_of_a_killed_task(dags_test, bucket):
    handle = _kill_while_measuring(dags_test(conf(bucket, duration_s=30.0)))
    # the next run: its setup task sweeps leftovers whose task is gone, before its plan step (which fails here)
    next_run = dags_test(conf("no-such-bucket-typo"))
    assert next_run.wait(timeout=300) != 0
    _gone(handle)
    assert not run_dir(handle.run_id).exists()
