"""The Airflow UI page of reports, against the moto S3 server: runs listed through manifests only, with their
status, suite and regression count; every route behind Airflow's session check."""

from __future__ import annotations

import io
import json

import pandas as pd
from fastapi.testclient import TestClient

from tasks.report.run_index import list_runs
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store
from tests.dagrun import load_reports_plugin


def publish_three_runs(store: S3Store) -> None:
    """A run whose suite is in its provenance, one whose suite is only in its results (schema 1.3), one old
    run with neither and no regression record; and a half-written run with no manifest."""
    publish_run(store, run_id="night1", logical_date="2026-11-27T02:00:00+00:00",
                files={"report.html": b"<h1>night one</h1>"}, status="complete", provenance={})
    results = io.BytesIO()
    pd.DataFrame({"suite": ["nightly", "nightly"], "status": ["ok", "failed"]}).to_parquet(results)
    publish_run(store, run_id="night2", logical_date="2026-11-28T02:00:00+00:00",
                files={"report.html": b"<h1>night two</h1>", "results.parquet": results.getvalue(),
                       "regressions.json": json.dumps({"regressions": 2, "records": []}).encode()},
                status="partial", provenance={"config": {}})
    publish_run(store, run_id="manual__3", logical_date="2026-11-29T09:30:00+00:00",
                files={"report.html": b"<h1>three</h1>",
                       "regressions.json": json.dumps({"regressions": 0, "records": []}).encode()},
                status="failed", provenance={"config": {"suite": "smoke"}})
    store.put_bytes("eval/runs/dt=2026-11-30/run=half/report.html", b"<h1>half</h1>")


def test_run_index_has_status_suite_and_regressions_newest_first(embedded_s3, bucket):
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    publish_three_runs(store)
    runs = list_runs(store)
    assert [(r.run_id, r.status, r.suite, r.regressions) for r in runs] == [
        ("manual__3", "failed", "smoke", 0), ("night2", "partial", "nightly", 2), ("night1", "complete", None, None)]
    assert runs[0].report_path == "runs/dt=2026-11-29/run=manual__3/report.html"


def test_lists_published_runs_and_serves_their_report(embedded_s3, bucket):
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    publish_three_runs(store)
    plugin = load_reports_plugin()
    assert plugin.ServingEvalReportsPlugin.fastapi_apps[0]["url_prefix"] == "/serving-eval"
    view = plugin.ServingEvalReportsPlugin.external_views[0]
    assert (view["destination"], view["url_route"], view["href"]) == ("nav", "serving-eval", "serving-eval/")
    client = TestClient(plugin.create_app(lambda: store, access=[]))
    page = client.get("/")
    assert page.status_code == 200 and "script-src 'none'" in page.headers["content-security-policy"]
    assert "night1" in page.text and "night2" in page.text and "half" not in page.text
    assert "nightly" in page.text and "smoke" in page.text
    assert "href='runs/dt=2026-11-28/run=night2/report.html'" in page.text
    report = client.get("/runs/dt=2026-11-28/run=night2/report.html")
    assert report.text == "<h1>night two</h1>" and "default-src 'none'" in report.headers["content-security-policy"]
    # a link from before schema 1.4 (the run_id= folder) still opens the run, which is now under run=
    assert client.get("/runs/dt=2026-11-28/run_id=night2/report.html").text == "<h1>night two</h1>"
    assert client.get("/runs/dt=2026-11-30/run=half/report.html").status_code == 404
    assert client.get("/runs/dt=2026-11-30/run_id=half/report.html").status_code == 404
    assert client.get("/runs/dt=2026-11-30/..%2F..%2Fsecret/report.html").status_code == 404


def test_every_route_needs_an_airflow_session(embedded_s3, bucket):
    """With Airflow's own dependency and no token: 401 for a client, Airflow's login page for a browser."""
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    publish_three_runs(store)
    plugin = load_reports_plugin()
    app = plugin.create_app(lambda: store, login_url=lambda next_url: f"/auth/login?next={next_url}")
    client = TestClient(app, follow_redirects=False)
    for path in ("/", "/runs/dt=2026-11-28/run=night2/report.html", "/runs/dt=1/run=x/report.html"):
        assert client.get(path).status_code == 401, path
        browser = client.get(path, headers={"Accept": "text/html,application/xhtml+xml"})
        assert browser.status_code == 303 and browser.headers["location"].startswith("/auth/login?next="), path
        assert "night two" not in browser.text
    assert client.get("/docs").status_code == 404 and client.get("/openapi.json").status_code == 404


def test_an_unreadable_store_is_named(embedded_s3):
    store = S3Store("no-such-bucket", "eval", embedded_s3.connection("serving_eval_s3"))
    client = TestClient(load_reports_plugin().create_app(lambda: store, access=[]))
    answer = client.get("/")
    assert answer.status_code == 503 and "s3://no-such-bucket/eval" in answer.json()["detail"], answer.text
    answer = client.get("/runs/dt=2026-11-28/run=night2/report.html")
    assert answer.status_code == 404 and "s3://no-such-bucket/eval/runs/" in answer.json()["detail"], answer.text
