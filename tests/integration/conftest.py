"""The integration folder: every test here starts something real (a serving stack, a container, an Airflow run,
the browser, the moto S3 server), so the whole folder is `integration` and `make test-fast` leaves it out."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture()
def store_env(embedded_s3, bucket, monkeypatch):
    """The CLI's view of a fresh bucket: the store connection in the environment, the store, and its CLI flags."""
    from tasks.store.s3 import S3Store

    monkeypatch.setenv("AIRFLOW_CONN_SERVING_EVAL_S3", embedded_s3.airflow_conn_env("serving_eval_s3")[
        "AIRFLOW_CONN_SERVING_EVAL_S3"])
    conn = embedded_s3.connection("serving_eval_s3")
    return conn, S3Store(bucket, "eval", conn), ["--bucket", bucket, "--prefix", "eval"]


@pytest.fixture()
def run_dag(airflow_db, embedded_s3, monkeypatch):
    """Runs the nightly DAG once (`dag.test()`, fresh from its file) with the given conf, against the embedded S3."""
    for key, value in embedded_s3.airflow_conn_env("serving_eval_s3").items():
        monkeypatch.setenv(key, value)

    def run(conf: dict):
        from tests.dagrun import load_dag_module

        module = load_dag_module()
        return module.serving_eval_dag.test(run_conf=conf)

    return run


@pytest.fixture()
def store_for(embedded_s3):
    """A bucket's store (prefix `eval`) on the embedded S3, as fast_conf's runs publish to it."""
    from tasks.store.s3 import S3Store

    def make(bucket: str) -> S3Store:
        return S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))

    return make
