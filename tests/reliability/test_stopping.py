"""Ctrl-C or SIGTERM on `make airflow` (`python -m tasks.cli airflow`) and on `python -m tasks.cli run` stops every
process they started: the whole tree by PID, SIGKILL after a grace period for what ignores SIGTERM.

On the old code, Ctrl-C on `make airflow` left the scheduler, 32 LocalExecutor workers, the dag-processor and
the triggerer running (they ignore SIGTERM), twice in two tries; a SIGTERMed CLI run left its server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import psutil

from tasks.runtimes.ports import free_port
from tests.dagrun import REPO
from tests.reliability.faults import conf, load_started


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _alive(procs: list[psutil.Process]) -> list[str]:
    left = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(proc.cmdline())[:120])
        except psutil.Error:
            continue
    return left


def test_sigterm_on_make_airflow_stops_airflow_and_the_embedded_store(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRFLOW_HOME": str(tmp_path / "airflow")}
    cli = subprocess.Popen([sys.executable, "-m", "tasks.cli", "airflow", "--port", str(port)], cwd=REPO, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2):
                    break
            except OSError:
                assert cli.poll() is None, "the Airflow command ended on its own"
                time.sleep(1)
        time.sleep(5)  # let the scheduler start its executor's workers
        everything = _tree(cli.pid)
        names = " ".join(" ".join(p.cmdline()) for p in everything if p.is_running())
        assert "scheduler" in names and ("moto" in names or "embedded_s3" in names), names[:2000]
        executor_workers = [p for p in everything if "LocalExecutor" in " ".join(p.cmdline())]
        assert len(executor_workers) <= max(2, os.cpu_count() or 2)  # parallelism follows the host's cores
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=60) == 0
        time.sleep(1)
        assert _alive(everything) == [], "left running after SIGTERM"
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()


def test_sigterm_on_a_cli_run_stops_its_server_and_exits_130(embedded_s3, bucket):
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO)}
    run_id = "reliability-sigterm"
    cli = subprocess.Popen([sys.executable, "-m", "tasks.cli", "run", "--run-id", run_id, "--conf",
                            json.dumps(conf(bucket, concurrencies=[1], duration_s=30.0))], cwd=REPO, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        load_started(run_id)
        everything = _tree(cli.pid)
        assert any("app.py" in " ".join(p.cmdline()) for p in everything if p.is_running())  # the server is up
        cli.send_signal(signal.SIGTERM)
        _, err = cli.communicate(timeout=60)
        assert cli.returncode == 130 and "interrupted" in err, f"exit {cli.returncode}:\n{err[-3000:]}"
        assert _alive(everything) == []
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
