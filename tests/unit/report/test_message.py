"""The night's message (tasks/report/message.py): the run, its status, a line per finding, the report's link in the
reports page; the HTML escapes what it carries; the watchdog's for a night that never published."""

from __future__ import annotations

from tasks.report.findings import Finding
from tasks.report.message import late_night_message, night_message, report_link, run_link, watchdog_message

RUN = {"run_id": "scheduled__2026-02-02T02:00:00+00:00", "logical_date": "2026-02-02T02:00:00+00:00",
       "status": "partial", "suite": "smoke"}


def test_the_link_is_the_reports_page_of_the_ui_else_the_store():
    prefix = "eval/runs/dt=2026-02-02/run=night2"
    assert report_link("http://127.0.0.1:8080/", "b", "eval", prefix) == \
        "http://127.0.0.1:8080/serving-eval/runs/dt=2026-02-02/run=night2/report.html"
    assert report_link(None, "b", "eval", prefix) == f"s3://b/{prefix}/report.html"


def test_one_message_new_findings_first_then_the_open_ones():
    findings = [Finding("regression", "r", "mlp/onnx/custom", "Throughput", "-20.0 %", since="2026-02-01",
                        new=False),
                Finding("failed", "f", "mlp/onnx/kserve", reason="<b>server died</b>")]
    message = night_message(RUN, findings, "http://ui/serving-eval/runs/x/report.html")
    assert message.subject == "serving-eval 2026-02-02 (smoke): partial, 1 new finding, 1 still open"
    lines = message.text.splitlines()
    assert lines[2].startswith("- NEW failed") and lines[3].startswith("- OPEN since 2026-02-01 regression")
    assert lines[-1] == "Report: http://ui/serving-eval/runs/x/report.html"
    assert "&lt;b&gt;server died&lt;/b&gt;" in message.html and "<b>server died" not in message.html
    assert night_message(RUN, [], "l").subject.endswith("all well, no finding")


def test_the_watchdogs_message_names_the_missing_night_and_the_newest_run():
    message = watchdog_message({"night": "2026-02-03T02:00:00+00:00", "age_h": 31.5, "max_age_h": 30,
                                "latest": {"run_id": "night2", "logical_date": "2026-02-02T02:00:00+00:00"},
                                "where": "s3://b/eval"})
    assert message.subject == "serving-eval: no run published for 2026-02-03"
    assert "night2" in message.text and "31.5 h ago" in message.text


def test_the_late_nights_message_links_the_run_in_the_ui_and_escapes_what_it_carries():
    assert run_link(None, "nightly_serving_eval", "r") is None
    assert run_link("http://ui/", "nightly_serving_eval", "manual__a+b") == \
        "http://ui/dags/nightly_serving_eval/runs/manual__a%2Bb"
    late = {"run_id": "<r1>", "suite": "nightly", "state": "queued", "queued_at": "2026-03-02T02:00:05+00:00",
            "running_s": 75.0, "budget_s": 60.0, "deadline_s": 66.0}
    message = late_night_message(late, "http://ui/dags/d/runs/r1")
    assert message.subject == "serving-eval: night <r1> running long (75 s since queued)"
    assert "it is still queued, not started, 75 s after it was queued; its budget is 60 s" in message.text
    assert "Run &lt;r1&gt;" in message.html and "<r1>" not in message.html
    assert "Run: <a href='http://ui/dags/d/runs/r1'>" in message.html
