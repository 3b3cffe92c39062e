"""Digest of each published serving evaluation: best stack per model and regressions, next to the run.

Scheduled on the `serving_eval_published_runs` asset: every run that `nightly_serving_eval` publishes
triggers it, with the run's location in the asset event's extra. The example a reporting team copies.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import Asset, Param, dag, task

from tasks.store.publish import PUBLISHED_RUNS_ASSET

PUBLISHED_RUNS = Asset(name=PUBLISHED_RUNS_ASSET)


@dag(
    dag_id=Path(__file__).stem,
    schedule=[PUBLISHED_RUNS],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["serving", "reporting"],
    doc_md=__doc__,
    params={
        "manifest": Param(None, type=["null", "string"], title="Manifest key (manual runs only)",
                          description="Without an asset event, the run whose manifest this is; else latest.json"),
        "s3_bucket": Param("serving-eval", type="string", minLength=3, title="S3 bucket (manual runs only)"),
        "s3_prefix": Param("serving-eval", type="string", title="S3 prefix (manual runs only)"),
        "aws_conn_id": Param("serving_eval_s3", type="string", minLength=1,
                             title="AWS connection id (manual runs only)"),
    },
)
def serving_eval_digest():
    @task
    def locate(triggering_asset_events=None, params=None) -> dict:
        events = list(triggering_asset_events[PUBLISHED_RUNS]) if triggering_asset_events else []
        if events:
            extra = events[-1].extra
            return {k: extra[k] for k in ("bucket", "manifest", "aws_conn_id")} | {"prefix": extra.get("s3_prefix", "")}
        return {"bucket": params["s3_bucket"], "prefix": params["s3_prefix"], "aws_conn_id": params["aws_conn_id"],
                "manifest": params["manifest"]}

    @task
    def write(location: dict) -> dict:
        from airflow.sdk import Connection

        from tasks.report.digest import write_digest
        from tasks.store.s3 import ConnectionFields, S3Store

        conn = Connection.get(location["aws_conn_id"])
        store = S3Store(location["bucket"], location["prefix"],
                        ConnectionFields(location["aws_conn_id"], conn.login, conn.password, conn.extra_dejson))
        key = location["manifest"] or store.get_json(store.key("latest.json"))["manifest"]
        if key.startswith("s3://"):
            key = key.split("/", 3)[3]
        digest = write_digest(store, key)
        return {k: digest[k] for k in ("run_id", "best", "regressions", "written")}

    write(locate())


serving_eval_digest_dag = serving_eval_digest()
