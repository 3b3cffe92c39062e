"""Whole DAG runs (`dag.test()`, real servers, moto S3): a validation failure, and the digest downstream."""

from __future__ import annotations

import pytest

from tasks.store.layout import safe_run_id
from tasks.store.s3 import S3Store
from tests.dagrun import (
    DAG_FILE,
    fast_conf,
    load_dag_module,
    read_json_object,
    read_run,
    results_frame,
    verify_manifest,
)

pytestmark = pytest.mark.integration
DIGEST_DAG_FILE = DAG_FILE.with_name("serving_eval_digest.py")


@pytest.fixture()
def s3_env(airflow_db, embedded_s3, monkeypatch):
    for key, value in embedded_s3.airflow_conn_env("serving_eval_s3").items():
        monkeypatch.setenv(key, value)
    return embedded_s3


def test_a_validation_failure_publishes_the_evidence_then_fails(s3_env, bucket, monkeypatch):
    import tasks.pipeline

    real_collect = tasks.pipeline.collect_results

    def collect_with_a_bad_row(planned, outputs):
        collected = real_collect(planned, outputs)
        collected["rows"][0]["latency_ms_p50"] = collected["rows"][0]["latency_ms_p99"] + 5.0  # p50 > p99
        return collected

    monkeypatch.setattr(tasks.pipeline, "collect_results", collect_with_a_bad_row)
    dag_run = load_dag_module().serving_eval_dag.test(run_conf=fast_conf(bucket, concurrencies=[1]))
    assert dag_run.state == "failed"

    store = S3Store(bucket, "eval", s3_env.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    assert manifest["status"] == "failed"
    verify_manifest(store, manifest)
    validation = read_json_object(store, manifest, "validation.json")
    assert validation["success"] is False
    assert any("latency_ms" in failed for failed in validation["failed_expectations"])
    task_states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert task_states["publish"] == "success" and task_states["check"] == "failed"


def test_the_digest_dag_reads_the_run_named_by_the_asset_event(s3_env, bucket):
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    dag_run = load_dag_module().serving_eval_dag.test(run_conf=fast_conf(bucket, concurrencies=[1]))
    assert dag_run.state == "success"
    store = S3Store(bucket, "eval", s3_env.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    assert read_json_object(store, manifest, "regressions.json")["records"]  # judged (no history yet)

    with create_session() as session:
        asset = session.query(AssetModel).filter_by(name="serving_eval_published_runs").one()
        events = session.query(AssetEvent).filter_by(asset_id=asset.id).order_by(AssetEvent.timestamp).all()
        extra = events[-1].extra
    assert extra["manifest"].endswith(f"{manifest['prefix']}/manifest.json")
    assert extra["bucket"] == bucket and extra["status"] == "complete"

    digest_module = load_dag_module(DIGEST_DAG_FILE)
    assert "serving_eval_published_runs" in repr(digest_module.serving_eval_digest_dag.timetable.asset_condition)
    digest_run = digest_module.serving_eval_digest_dag.test(run_conf={
        "manifest": extra["manifest"], "s3_bucket": extra["bucket"], "s3_prefix": extra["s3_prefix"],
        "aws_conn_id": extra["aws_conn_id"]})
    assert digest_run.state == "success"
    digest_name = f"run_id={safe_run_id(manifest['run_id'])}"  # digests keep their key: a file, not a partition
    digest = store.get_json(f"eval/digests/dt={manifest['logical_date'][:10]}/{digest_name}.json")
    frame = results_frame(store, manifest)
    assert digest["best"][0]["server"] == "custom"
    assert digest["best"][0]["throughput_rps"] == pytest.approx(frame["throughput_rps"].max())
    markdown = store.get(f"eval/digests/dt={manifest['logical_date'][:10]}/{digest_name}.md").decode()
    assert "| mlp | 1 | custom/onnx over json |" in markdown  # the best stack and its wire


def test_a_bucket_typo_fails_the_plan_step_before_any_conversion_or_server(s3_env, bucket):
    dag_run = load_dag_module().serving_eval_dag.test(
        run_conf=fast_conf("no-such-bucket-typo", concurrencies=[1]))
    assert dag_run.state == "failed"
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["plan"] == "failed"
    assert all(states.get(task) in (None, "upstream_failed", "skipped")
               for task in ("convert", "measure_local", "publish"))
    # the plan step fails alone: no other task fails with a secondary error
    assert [task for task, state in states.items() if state == "failed"] == ["plan"], states
    assert states["collect"] == "skipped"
