"""Watchdog of missing nights: every hour, is the result store's `latest.json` older than the nightly schedule
allows? Then the missing night's message goes to the notifiers, once per missing night.

The nightly's own notify step cannot report a night that never published (its tasks after publishing never run), and
the digest DAG runs only when a run publishes. This DAG reads the store alone; what it cannot see (Airflow itself down)
and how to watch from outside: docs/notifications.md#missing-nights.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import Param, dag, task

from tasks.plan.config import RunConfig

D = RunConfig()  # the nightly's store and its connection, by default


@dag(
    dag_id=Path(__file__).stem,
    schedule="30 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["serving", "reporting"],
    doc_md=__doc__,
    params={
        "notify": Param([], type="array", uniqueItems=True, items={"type": "string", "minLength": 1},
                        title="Notifiers (Airflow connection ids)",
                        description="smtp, slackwebhook or apprise connections, as the nightly's Param notify"),
        "max_age_h": Param(30.0, type="number", minimum=1, maximum=336, title="Oldest latest.json allowed, h",
                           description="a night is due every period_h and may publish up to max_age_h - period_h "
                                       "late"),
        "period_h": Param(24.0, type="number", exclusiveMinimum=0, maximum=336, title="A night is due every, h"),
        "ui_base_url": Param(None, type=["null", "string"], pattern="^https?://", title="Airflow UI's address",
                             description="the message links the reports page there"),
        "s3_bucket": Param(D.s3_bucket, type="string", minLength=3, title="S3 bucket"),
        "s3_prefix": Param(D.s3_prefix, type="string", title="S3 prefix"),
        "aws_conn_id": Param(D.aws_conn_id, type="string", minLength=1, title="AWS connection id"),
    },
)
def serving_eval_watchdog():
    @task
    def watch(params=None) -> dict:
        from airflow.sdk import Connection
        from serving_eval_notifiers import notifier_senders  # plugins/: Airflow's notifier classes

        from tasks.report.watchdog import watch_latest
        from tasks.store.s3 import ConnectionFields, S3Store

        conn = Connection.get(params["aws_conn_id"])
        store = S3Store(params["s3_bucket"], params["s3_prefix"],
                        ConnectionFields(params["aws_conn_id"], conn.login, conn.password, conn.extra_dejson))
        return watch_latest(store, notifier_senders(params["notify"], strict=False), dict(params))

    watch()


serving_eval_watchdog_dag = serving_eval_watchdog()
