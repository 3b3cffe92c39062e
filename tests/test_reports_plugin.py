"""The Airflow UI page of reports, against the moto S3 server: runs listed through manifests only."""

from __future__ import annotations

import importlib.util

from fastapi.testclient import TestClient

from tasks.publish import publish_run
from tasks.store import S3Store
from tests.dagrun import REPO


def load_plugin():
    spec = importlib.util.spec_from_file_location("serving_eval_reports", REPO / "plugins" / "serving_eval_reports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lists_published_runs_and_serves_their_report(embedded_s3, bucket):
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    publish_run(store, run_id="night1", logical_date="2026-11-28T02:00:00+00:00",
                files={"report.html": b"<h1>night one</h1>"}, status="complete", provenance={})
    store.put_bytes("eval/runs/dt=2026-11-29/run_id=half/report.html", b"<h1>half</h1>")  # no manifest
    plugin = load_plugin()
    assert plugin.ServingEvalReportsPlugin.fastapi_apps[0]["url_prefix"] == "/serving-eval"
    client = TestClient(plugin.create_app(lambda: store))
    page = client.get("/").text
    assert "night1" in page and "half" not in page
    assert client.get("/runs/dt=2026-11-28/run_id=night1/report.html").text == "<h1>night one</h1>"
    assert client.get("/runs/dt=2026-11-29/run_id=half/report.html").status_code == 404
