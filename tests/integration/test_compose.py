"""docker/compose.yaml: the file validates (`docker compose config`, or Debian's `docker-compose` v1), and its
database, broker, store (with its bucket) and a Celery worker come up on the engine the tests start and answer;
everything is torn down after (containers, networks, volumes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest

from tasks.core.paths import DOCKER_DIR
from tasks.runtimes.ports import free_ports
from tests.dagrun import HOST_NOT_JUDGED

COMPOSE_FILE = DOCKER_DIR / "compose.yaml"
UP_TIMEOUT_S = 300
CELERY_APP = "airflow.providers.celery.executors.celery_executor.app"


def compose_command() -> list[str] | None:
    """`docker compose` (v2 plugin) where it exists, else Debian's `docker-compose` (v1), else None."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.fixture(scope="module")
def compose():
    command = compose_command()
    if command is None:
        if os.environ.get("CI") or os.environ.get("SERVING_EVAL_CI"):
            pytest.fail("no docker compose / docker-compose (.ci/run installs Debian's docker-compose)", pytrace=False)
        pytest.skip("needs docker compose or Debian's docker-compose")
    return command


def _run(compose: list[str], env: dict[str, str], *args: str, timeout_s: float = 600, check: bool = True):
    out = subprocess.run([*compose, "-f", str(COMPOSE_FILE), *args], env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=timeout_s)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(compose)} {' '.join(args)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n"
                             f"{out.stderr[-3000:]}")
    return out


def test_the_compose_file_validates_with_every_component(compose):
    import yaml

    env = {"SERVING_EVAL_AIRFLOW_IMAGE": "serving-eval/airflow:test", "AIRFLOW_JWT_SECRET": "test",
           "SERVING_EVAL_HOSTS": "cpu-a,gpu-a"}
    config = yaml.safe_load(_run(compose, env, "--profile", "gpu", "config").stdout)
    services = config["services"]
    assert {"postgres", "redis", "store", "store-init", "airflow-init", "airflow-api-server", "airflow-scheduler",
            "airflow-dag-processor", "airflow-triggerer", "airflow-worker", "airflow-worker-host",
            "airflow-worker-gpu"} <= set(services)
    gpu = services["airflow-worker-gpu"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    for name in ("airflow-worker-host", "airflow-worker-gpu"):  # the Docker launcher's socket and host network
        assert services[name]["network_mode"] == "host"
        assert any(":/var/run/docker.sock" in str(v) or (isinstance(v, dict) and v.get("target") ==
                   "/var/run/docker.sock") for v in services[name]["volumes"])
        assert services[name]["environment"]["SERVING_EVAL_HOSTS"] == "cpu-a,gpu-a"
    assert services["airflow-worker-gpu"]["environment"]["SERVING_EVAL_HOST"] == "gpu-a"
    assert "--queues default" in " ".join(services["airflow-worker"]["command"])
    missing = _run(compose, {"AIRFLOW_JWT_SECRET": "test"}, "config", check=False)
    assert missing.returncode != 0 and "SERVING_EVAL_AIRFLOW_IMAGE" in missing.stderr


@pytest.mark.integration
def test_database_broker_store_and_a_worker_come_up_and_answer(compose, no_docker_leftovers, tmp_path):
    from tasks.runtimes.images import compose_env
    from tasks.store.s3 import ConnectionFields, S3Store

    images = compose_env(log=lambda line: print(f"  {line}"))
    ports = free_ports(("db", "broker", "store", "api"))
    env = {**images, "AIRFLOW_JWT_SECRET": uuid.uuid4().hex, "SERVING_EVAL_DB_PORT": str(ports["db"]),
           "SERVING_EVAL_BROKER_PORT": str(ports["broker"]), "SERVING_EVAL_STORE_PORT": str(ports["store"]),
           "AIRFLOW_PORT": str(ports["api"]), "SERVING_EVAL_BUCKET": "smoke"}
    project = ["-p", f"serving-eval-test-{uuid.uuid4().hex[:8]}"]
    started = time.monotonic()
    try:
        _run(compose, env, *project, "up", "-d", "postgres", "redis", "store", "store-init", "airflow-worker",
             timeout_s=UP_TIMEOUT_S)
        deadline = time.monotonic() + UP_TIMEOUT_S

        def answers(*args: str, expect: str) -> bool:
            out = _run(compose, env, *project, "exec", "-T", *args, check=False, timeout_s=120)
            return expect in out.stdout

        checks = {
            "postgres": ("postgres", "pg_isready", "-h", "127.0.0.1", "-U", "airflow", "-d", "airflow"),
            "redis": ("redis", "redis-cli", "ping"),
            "worker": ("airflow-worker", "celery", "--app", CELERY_APP, "inspect", "ping", "--timeout", "10"),
        }
        expected = {"postgres": "accepting connections", "redis": "PONG", "worker": "pong"}
        pending = dict(checks)
        while pending:
            for name, args in list(pending.items()):
                if answers(*args, expect=expected[name]):
                    print(f"{name} answered after {time.monotonic() - started:.0f} s")
                    pending.pop(name)
            if pending and time.monotonic() > deadline:
                logs = _run(compose, env, *project, "logs", "--tail", "40", check=False).stdout
                raise AssertionError(f"not answering after {UP_TIMEOUT_S} s: {sorted(pending)}\n{logs[-6000:]}")
            time.sleep(3)
        store = S3Store("smoke", "", ConnectionFields("store", "testing", "testing", {
            "endpoint_url": f"http://127.0.0.1:{ports['store']}", "region_name": "us-east-1"}))
        while True:  # the store answers, with the bucket store-init created at start
            try:
                store.check()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        print(f"database, broker, store and worker answered in {time.monotonic() - started:.0f} s")
    finally:
        _run(compose, env, *project, "down", "-v", "--remove-orphans", "--timeout", "20", check=False)


E2E_ENV = "SERVING_EVAL_COMPOSE_E2E"


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get(E2E_ENV) != "1", reason=f"{E2E_ENV}=1 runs the whole deployment (about 10 minutes: "
                    "the workers build the converter and server venvs inside their containers on first use)")
def test_a_run_through_the_whole_compose_deployment(compose, no_docker_leftovers, tmp_path):
    """Every component in containers (init, api-server, scheduler, dag-processor, triggerer, the default-queue worker
    and a measuring-host worker on the host network), the smoke suite triggered for host cpu-a, published complete."""
    import json

    from tasks.runtimes.images import compose_env
    from tasks.store.s3 import ConnectionFields, S3Store

    images = compose_env(log=lambda line: print(f"  {line}"))
    ports = free_ports(("db", "broker", "store", "api"))
    cache = tmp_path / "host-cache"
    cache.mkdir()
    env = {**images, "AIRFLOW_JWT_SECRET": uuid.uuid4().hex, "SERVING_EVAL_DB_PORT": str(ports["db"]),
           "SERVING_EVAL_BROKER_PORT": str(ports["broker"]), "SERVING_EVAL_STORE_PORT": str(ports["store"]),
           "AIRFLOW_PORT": str(ports["api"]), "SERVING_EVAL_HOSTS": "cpu-a", "SERVING_EVAL_HOST": "cpu-a",
           "SERVING_EVAL_HOST_CACHE": str(cache), "SERVING_EVAL_SCHEDULE": "False"}
    project = ["-p", f"serving-eval-e2e-{uuid.uuid4().hex[:8]}"]
    started = time.monotonic()
    try:
        _run(compose, env, *project, "up", "-d", timeout_s=UP_TIMEOUT_S * 2)
        deadline = time.monotonic() + UP_TIMEOUT_S * 2
        while "nightly_serving_eval" not in _run(compose, env, *project, "exec", "-T", "airflow-api-server", "airflow",
                                                 "dags", "list", check=False).stdout:
            assert time.monotonic() < deadline, _run(compose, env, *project, "logs", "--tail", "60").stdout[-8000:]
            time.sleep(5)
        print(f"deployment up, DAG parsed after {time.monotonic() - started:.0f} s")
        conf = {"suite": "smoke", "concurrencies": [1], "duration_s": 3.0, "warmup_s": 1.0, "window_s": 1.0,
                "hosts": ["cpu-a"], "ready_timeout_s": 300, **HOST_NOT_JUDGED}
        trigger = ("dags", "trigger", "nightly_serving_eval", "--run-id", "compose-e2e", "--conf", json.dumps(conf))
        for args in (("dags", "unpause", "nightly_serving_eval"), trigger):
            _run(compose, env, *project, "exec", "-T", "airflow-api-server", "airflow", *args)
        store = S3Store("serving-eval", "serving-eval", ConnectionFields("store", "testing", "testing", {
            "endpoint_url": f"http://127.0.0.1:{ports['store']}", "region_name": "us-east-1"}))
        deadline = time.monotonic() + 1500
        while not store.exists(store.key("latest.json")):
            if time.monotonic() > deadline:
                raise AssertionError(_run(compose, env, *project, "logs", "--tail", "80", check=False).stdout[-12000:])
            time.sleep(10)
        pointer = store.get_json(store.key("latest.json"))
        manifest = store.get_json(pointer["manifest"])
        print(f"published {manifest['status']} after {time.monotonic() - started:.0f} s: {pointer['manifest']}")
        assert manifest["status"] == "complete" and manifest["provenance"]["hosts"].keys() == {"cpu-a"}
    finally:
        _run(compose, env, *project, "down", "-v", "--remove-orphans", "--timeout", "20", check=False)
