"""Shared fixtures: an isolated Airflow home, the embedded S3 (moto server), converted artifacts.

Runtime venvs are cached outside the repo (`$SERVING_EVAL_CACHE`, default ~/.cache/serving-eval) and reused
across runs; artifacts converted by the tests go to a per-session directory so cache behaviour is tested
from a known state.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="serving-eval-test-airflow-"))
_ARTIFACTS = Path(tempfile.mkdtemp(prefix="serving-eval-test-artifacts-"))
os.environ.update({
    "AIRFLOW_HOME": str(_AIRFLOW_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "GX_ANALYTICS_ENABLED": "false",
    "SERVING_EVAL_ARTIFACTS": str(_ARTIFACTS),
})
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

pytest_plugins = ["tests.docker_fixtures", "tests.prebuild"]  # the Docker engine, project images, leftover checks;
# the background builds and the suite's order under SERVING_EVAL_PREBUILD=1 (`make test`)


def pytest_sessionfinish(session, exitstatus) -> None:
    """The suite's private Airflow home and artifact cache go with it."""
    import shutil

    for path in (_AIRFLOW_HOME, _ARTIFACTS):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated SQLite metadata DB in a private AIRFLOW_HOME (what `airflow dags test` uses)."""
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return _AIRFLOW_HOME


@pytest.fixture(scope="session")
def embedded_s3():
    from tasks.store.embedded_s3 import start_embedded_s3

    s3 = start_embedded_s3()
    try:
        yield s3
    finally:
        s3.stop()


@pytest.fixture()
def bucket(embedded_s3, request) -> str:
    """A fresh bucket per test, so tests never see each other's runs."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    embedded_s3.create_bucket(name)
    return name


@pytest.fixture(scope="session")
def mlp_spec():
    from tasks.core.spec import load_spec

    return load_spec("mlp")


@pytest.fixture(scope="session")
def mlp_onnx(mlp_spec):
    from tasks.convert import convert

    return convert(mlp_spec, "onnx")


@pytest.fixture(scope="session")
def mlp_torchscript(mlp_spec):
    from tasks.convert import convert

    return convert(mlp_spec, "torchscript")


@pytest.fixture()
def log_dir(tmp_path) -> Path:
    path = tmp_path / "logs"
    path.mkdir()
    return path
