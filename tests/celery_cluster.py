"""A real Airflow 3 CeleryExecutor deployment on loopback for the multi-host test: Debian's PostgreSQL (metadata DB
and Celery result backend) and Redis (broker), each in a temp dir on a free port; `airflow db migrate`; the pools;
the API server (UI and execution API), scheduler and DAG processor; and one `airflow celery worker` per simulated
host, each with its own queues, `SERVING_EVAL_HOST` and artifact cache. Every process is started in its own process
group and stopped by PID (SIGTERM, SIGKILL after a grace period); the temp dir goes with them.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tasks.runtimes.ports import free_port
from tests.airflow_server import stop_group
from tests.dagrun import REPO

PG_BIN = Path("/usr/lib/postgresql")
START_TIMEOUT_S = 180
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin folder (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(PG_BIN.glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)) if PG_BIN.is_dir() else []
    return found[-1].parent if found else None


def missing_services() -> list[str]:
    """The Debian packages this deployment needs that are not installed (.ci/run installs them)."""
    missing = []
    if postgres_bin() is None:
        missing.append("postgresql")
    if shutil.which("redis-server") is None:
        missing.append("redis-server")
    return missing


def wait_until(check, what: str, proc: subprocess.Popen | None, log: Path | None, timeout_s: float = START_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}:\n{log_tail(log)}")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - not answering yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout_s:.0f} s:\n{log_tail(log)}")
        time.sleep(0.5)


def log_tail(log: Path | None, size_bytes: int = 4000) -> str:
    if log is None or not log.is_file():
        return ""
    return log.read_bytes()[-size_bytes:].decode(errors="replace")


def _as_postgres_user() -> dict:
    """Popen arguments that run a PostgreSQL program as the `postgres` user when we are root (it refuses root)."""
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam("postgres")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@contextmanager
def postgres(workdir: Path):
    """A PostgreSQL server on 127.0.0.1:<free port> with a trusted superuser `airflow` and database `airflow`."""
    bindir = postgres_bin()
    data, sockets, log = workdir / "pg-data", workdir / "pg-sockets", workdir / "postgres.log"
    for path in (data, sockets):
        path.mkdir(mode=0o700)
    as_user = _as_postgres_user()
    if as_user:
        for path in (workdir, data, sockets):
            os.chown(path, as_user["user"], as_user["group"])
        os.chmod(workdir, 0o755)
    subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "airflow", "--auth=trust", "-E", "UTF8",
                    "--no-sync"], check=True, capture_output=True, timeout=120, **as_user)
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port),
                                 "-k", str(sockets), "-c", "fsync=off", "-c", "max_connections=200"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, **as_user)
    try:
        import psycopg2

        def ready() -> bool:
            psycopg2.connect(host="127.0.0.1", port=port, user="airflow", dbname="postgres").close()
            return True

        wait_until(ready, "postgres", proc, log)
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="airflow", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE airflow")
        conn.close()
        yield f"airflow@127.0.0.1:{port}/airflow"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def redis(workdir: Path):
    """A Redis server on 127.0.0.1:<free port>, nothing persisted."""
    port, log = free_port(), workdir / "redis.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", str(workdir)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        def ready() -> bool:
            import socket

            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")

        wait_until(ready, "redis-server", proc, log)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_group(proc)


@dataclass
class Cluster:
    """The running deployment: its environment, its processes (name -> Popen) and their logs."""

    env: dict[str, str]
    workdir: Path
    api_url: str
    db_url: str
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    worker_env: dict[str, dict[str, str]] = field(default_factory=dict)

    def airflow(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
        out = subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout_s)
        if out.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                               f"{out.stderr[-3000:]}")
        return out

    def query(self, sql: str, *params) -> list[tuple]:
        import psycopg2

        user_host, dbname = self.db_url.rsplit("/", 1)
        user, hostport = user_host.split("@")
        host, port = hostport.split(":")
        with psycopg2.connect(host=host, port=int(port), user=user, dbname=dbname) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def task_logs(self, dag_id: str, run_id: str, states: tuple[str, ...] = ("failed", "upstream_failed")) -> str:
        """The log files of the run's task instances in `states` (the workers write them under AIRFLOW_HOME)."""
        rows = self.query("SELECT task_id, map_index FROM task_instance WHERE dag_id = %s AND run_id = %s AND state IN "
                          f"({', '.join(['%s'] * len(states))})", dag_id, run_id, *states)
        parts = []
        for task_id, map_index in rows:
            folder = Path(self.env["AIRFLOW_HOME"]) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / \
                f"task_id={task_id}"
            if map_index >= 0:
                folder = folder / f"map_index={map_index}"
            for log in sorted(folder.glob("attempt=*.log")):
                parts.append(f"--- {task_id}[{map_index}] {log.name} ---\n{log_tail(log, 6000)}")
        return "\n".join(parts)

    def logs(self) -> str:
        parts = []
        for name in self.processes:
            parts.append(f"--- {name} ---\n{log_tail(self.workdir / f'{name}.log', 3000)}")
        return "\n".join(parts)


def _start(cluster: Cluster, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(cluster.workdir / f"{name}.log", "wb") as out:
        proc = subprocess.Popen(argv, env=env or cluster.env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=cluster.workdir)
    cluster.processes[name] = proc
    return proc


@contextmanager
def celery_cluster(hosts: dict[str, dict], extra_env: dict[str, str]):
    """Airflow with the CeleryExecutor and one worker per entry of `hosts`: name -> {"queues": [...],
    "concurrency": n, "env": {...}} (each worker's own environment on top of the deployment's)."""
    workdir = Path(tempfile.mkdtemp(prefix="serving-eval-test-celery-"))
    try:
        with ExitStack() as stack:
            db = stack.enter_context(postgres(workdir))
            broker = stack.enter_context(redis(workdir))
            api_port = free_port()
            env = {
                **os.environ, **extra_env,
                "AIRFLOW_HOME": str(workdir / "airflow-home"), "PYTHONPATH": str(REPO),
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://{db}",
                "AIRFLOW__CELERY__BROKER_URL": broker,
                "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql+psycopg2://{db}",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
                "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",  # only the triggered run, never the 02:00 one
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "GX_ANALYTICS_ENABLED": "false",
            }
            env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
            cluster = Cluster(env, workdir, f"http://127.0.0.1:{api_port}", db)
            stack.callback(lambda: [stop_group(p) for p in reversed(list(cluster.processes.values()))])
            cluster.airflow("db", "migrate", timeout_s=600)
            from tasks.cli.local import create_pools

            create_pools(env)
            api = _start(cluster, "api-server", [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port",
                                                 str(api_port), "--workers", "1"])

            def healthy() -> bool:
                with urllib.request.urlopen(f"{cluster.api_url}/api/v2/monitor/health", timeout=5) as resp:
                    return resp.status == 200

            wait_until(healthy, "airflow api-server", api, workdir / "api-server.log")
            _start(cluster, "dag-processor", [AIRFLOW, "dag-processor"])
            _start(cluster, "scheduler", [AIRFLOW, "scheduler"])
            for name, spec in hosts.items():
                worker_env = {**env, **spec.get("env", {})}
                cluster.worker_env[name] = worker_env
                _start(cluster, f"worker-{name}", [
                    AIRFLOW, "celery", "worker", "--queues", ",".join(spec["queues"]),
                    "--concurrency", str(spec.get("concurrency", 1)), "--celery-hostname", f"{name}@%h",
                    "--pid", str(workdir / f"worker-{name}.pid"), "--skip-serve-logs", "--without-mingle",
                    "--without-gossip"], worker_env)
            for name in hosts:
                log = workdir / f"worker-{name}.log"
                wait_until(lambda log=log: b"ready." in log.read_bytes(), f"celery worker {name}",
                      cluster.processes[f"worker-{name}"], log)
            yield cluster
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
