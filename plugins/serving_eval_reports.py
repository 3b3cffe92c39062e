"""An Airflow UI page for the published runs: the list of runs and each run's `report.html`, read from the
result store through the runs' manifests (nothing half-written is shown).

It appears under the *Browse* menu as "Serving eval reports" (`/serving-eval/`). The store is the one the
nightly DAG publishes to by default; set `SERVING_EVAL_REPORTS_BUCKET`, `SERVING_EVAL_REPORTS_PREFIX` and
`SERVING_EVAL_REPORTS_CONN_ID` in the API server's environment to point it elsewhere. Like every plugin
FastAPI app it is not behind Airflow's log-in: expose the API server only where the reports may be read.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from tasks.store import ConnectionFields, S3Store

URL_PREFIX = "/serving-eval"


def default_store() -> S3Store:
    from tasks.store import connection_from_env

    conn_id = os.environ.get("SERVING_EVAL_REPORTS_CONN_ID", "serving_eval_s3")
    conn = connection_from_env(conn_id)
    if conn.login is None and not conn.extra:  # not in the environment: ask Airflow's secrets backends
        from airflow.models.connection import Connection

        found = Connection.get_connection_from_secrets(conn_id)
        conn = ConnectionFields(conn_id, found.login, found.password, found.extra_dejson)
    return S3Store(os.environ.get("SERVING_EVAL_REPORTS_BUCKET", "serving-eval"),
                   os.environ.get("SERVING_EVAL_REPORTS_PREFIX", "serving-eval"), conn)


def create_app(store_factory: Callable[[], S3Store] = default_store) -> FastAPI:
    app = FastAPI(title="Serving eval reports")

    @app.get("/", response_class=HTMLResponse)
    def runs() -> str:
        from tasks.history import list_manifests

        store = store_factory()
        manifests = list_manifests(store, statuses=("complete", "partial", "failed"))
        items = "".join(
            f"<li><a href='runs/{html.escape(m['prefix'].split('/runs/', 1)[1])}/report.html'>"
            f"{html.escape(m['logical_date'][:19])} — {html.escape(m['run_id'])}</a> ({html.escape(m['status'])})</li>"
            for m in reversed(manifests))
        return (f"<!doctype html><html><body style='font-family:system-ui'><h1>Serving evaluations</h1>"
                f"<p>s3://{html.escape(store.bucket)}/{html.escape(store.prefix)}</p><ul>{items or '<li>none yet</li>'}"
                f"</ul></body></html>")

    @app.get("/runs/{dt}/{run}/report.html", response_class=HTMLResponse)
    def report(dt: str, run: str) -> str:
        store = store_factory()
        prefix = store.key("runs", dt, run)
        try:
            manifest = store.get_json(f"{prefix}/manifest.json")
        except Exception as exc:  # noqa: BLE001 - no manifest: the run is not (yet) published
            raise HTTPException(404, f"no published run at {prefix}") from exc
        keys = {o["name"]: o["key"] for o in manifest["objects"]}
        if "report.html" not in keys:
            raise HTTPException(404, f"run {manifest['run_id']} has no report.html")
        return store.get(keys["report.html"]).decode()

    return app


class ServingEvalReportsPlugin(AirflowPlugin):
    name = "serving_eval_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Serving eval reports"}]
    external_views = [{"name": "Serving eval reports", "href": "serving-eval/", "destination": "nav",
                       "category": "browse", "url_route": "serving-eval"}]
