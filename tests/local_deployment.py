"""Airflow's own scheduler, DAG processor and triggerer on one machine, as `airflow standalone` runs them: the
LocalExecutor on a SQLite metadata DB in a temp AIRFLOW_HOME, each component in its own process group and stopped
by PID (SIGTERM, SIGKILL after a grace period); the temp dir goes with them.

No API server: the triggerer answers its triggers' requests (connections, variables) in-process, so a test whose
run starts no task needs none.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.airflow_server import stop_group
from tests.celery_cluster import log_tail
from tests.dagrun import REPO

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
COMPONENTS = ("dag-processor", "scheduler", "triggerer")


@dataclass
class Deployment:
    """The running components: their environment, their processes (name -> Popen) and their logs."""

    env: dict[str, str]
    home: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def airflow(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
        out = subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if out.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                               f"{out.stderr[-3000:]}")
        return out

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(self.home / "airflow.db", timeout=30) as db:
            return db.execute(sql, params).fetchall()

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{log_tail(self.home / f'{name}.log', 3000)}" for name in self.processes)

    def start(self, name: str) -> subprocess.Popen:
        with open(self.home / f"{name}.log", "wb") as out:
            proc = subprocess.Popen([AIRFLOW, name], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.home)
        self.processes[name] = proc
        return proc


@contextmanager
def local_deployment(extra_env: dict[str, str], pools: dict[str, int] | None = None):
    """The components of COMPONENTS running over a fresh migrated DB with `pools` (name -> slots) set first."""
    home = Path(tempfile.mkdtemp(prefix="serving-eval-test-local-airflow-"))
    try:
        with ExitStack() as stack:
            env = {
                **os.environ, **extra_env,
                "AIRFLOW_HOME": str(home), "PYTHONPATH": str(REPO),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "2",
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",  # only the triggered run, never the 02:00 one
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "GX_ANALYTICS_ENABLED": "false",
            }
            env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
            deployment = Deployment(env, home)
            stack.callback(lambda: [stop_group(p) for p in reversed(list(deployment.processes.values()))])
            deployment.airflow("db", "migrate", timeout_s=600)
            for pool, slots in (pools or {}).items():
                deployment.airflow("pools", "set", pool, str(slots), f"{slots} slots (tests/local_deployment.py)")
            for name in COMPONENTS:
                deployment.start(name)
            yield deployment
    finally:
        shutil.rmtree(home, ignore_errors=True)
