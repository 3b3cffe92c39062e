"""The reports page inside Airflow's UI: the published runs (status, suite, regression count), each suite's stacks'
record over the nights (the newest run's record.json) and each run's `report.html`, read from the result store
through the runs' manifests (nothing half-written is shown).

Where: *Browse → Serving eval reports* in the UI's navigation, shown in the UI's own frame at
`/plugin/serving-eval`; the pages themselves are served by this plugin's FastAPI app under `/serving-eval/`, a
run's report at `runs/dt=<date>/run=<id>/report.html`. Links from before results schema 1.4
(`runs/dt=<date>/run_id=<id>/report.html`) still open their run, moved or not (`tasks.report.run_index.read_report`).

Log-in: Airflow does not authenticate plugin apps, so every route here depends on Airflow's own check
(`requires_access_view(WEBSITE)`: the JWT of the UI's session cookie `_token`, or an `Authorization: Bearer`
token from `POST /auth/token`, validated by the configured auth manager). When Airflow requires a log-in
(`[core] simple_auth_manager_all_admins = False`, or any other auth manager) a request without a valid session
is refused: a browser is sent to Airflow's login page and comes back after it, other clients get 401 (403
for a forged or revoked token). With all-admins (the default of `make airflow`) the auth manager signs every
request in as admin, so the pages are open as the rest of that UI is.

Reports are served with a Content-Security-Policy that forbids scripts and every network fetch: they are
shown in Airflow's origin, next to the session, and must be self-contained (inline SVG and CSS).

The store is the one the nightly DAG publishes to by default; set `SERVING_EVAL_REPORTS_BUCKET`,
`SERVING_EVAL_REPORTS_PREFIX` and `SERVING_EVAL_REPORTS_CONN_ID` in the API server's environment to point it
elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from tasks.core.errors import StoreError
from tasks.report.run_index import ReportNotFound, latest_records, list_runs, read_report, render_run_list
from tasks.store.s3 import ConnectionFields, S3Store

URL_PREFIX = "/serving-eval"
URL_ROUTE = "serving-eval"  # the UI shows the page at /plugin/serving-eval
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; "
                               "img-src data:; font-src data:; form-action 'none'; base-uri 'none'; "
                               "frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def default_store() -> S3Store:
    from tasks.store.s3 import connection_from_env

    conn_id = os.environ.get("SERVING_EVAL_REPORTS_CONN_ID", "serving_eval_s3")
    conn = connection_from_env(conn_id)
    if conn.login is None and not conn.extra:  # not in the environment: ask Airflow's secrets backends
        from airflow.models.connection import Connection

        found = Connection.get_connection_from_secrets(conn_id)
        conn = ConnectionFields(conn_id, found.login, found.password, found.extra_dejson)
    return S3Store(os.environ.get("SERVING_EVAL_REPORTS_BUCKET", "serving-eval"),
                   os.environ.get("SERVING_EVAL_REPORTS_PREFIX", "serving-eval"), conn)


def airflow_access() -> list:
    """The dependency Airflow's own API routes use: a valid session (JWT) of a user allowed to see the UI."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return [Depends(requires_access_view(AccessView.WEBSITE))]


def airflow_login_url(next_url: str) -> str:
    """Airflow's login page, which comes back to `next_url` once logged in."""
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager().get_url_login(next_url=next_url)


def create_app(store_factory: Callable[[], S3Store] = default_store, access: list | None = None,
               login_url: Callable[[str], str] = airflow_login_url) -> FastAPI:
    """The pages; `access` are the dependencies every route needs (default: Airflow's session check)."""
    app = FastAPI(title="Serving eval reports", dependencies=airflow_access() if access is None else access,
                  docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(StarletteHTTPException)
    async def refused(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(login_url(str(request.url)), status_code=303)  # a browser: log in first
        return await http_exception_handler(request, exc)

    @contextmanager
    def store() -> Iterator[S3Store]:
        """The store; one that cannot be read is a 503 naming it, not a bare 500."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            where = store_factory()
        except StoreError as exc:
            raise HTTPException(503, str(exc)) from exc
        try:
            yield where
        except (BotoCoreError, ClientError) as exc:
            raise HTTPException(503, f"result store {where.describe()} cannot be read: {exc}") from exc

    @app.get("/", response_class=HTMLResponse)
    def runs() -> HTMLResponse:
        with store() as where:
            page = render_run_list(list_runs(where), f"s3://{where.bucket}/{where.prefix}", latest_records(where))
        return HTMLResponse(page, headers=PAGE_HEADERS)

    @app.get("/runs/{dt}/{run}/report.html", response_class=HTMLResponse)
    def report(dt: str, run: str) -> HTMLResponse:
        try:
            with store() as where:
                return HTMLResponse(read_report(where, dt, run), headers=PAGE_HEADERS)
        except ReportNotFound as exc:
            raise HTTPException(404, str(exc)) from exc

    return app


class ServingEvalReportsPlugin(AirflowPlugin):
    name = "serving_eval_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Serving eval reports"}]
    external_views = [{"name": "Serving eval reports", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
                       "category": "browse", "url_route": URL_ROUTE}]
