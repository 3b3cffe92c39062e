"""How a server life lives, from readings made here: its figures, the validation of their shape, and the report's two
sections (lifecycle, and features with a finding)."""

from __future__ import annotations

import json
import re

from tasks.core.results import empty_row, to_frame, to_parquet_bytes
from tasks.loadgen.resources import Footprint
from tasks.measure.capabilities import CapabilityCheck
from tasks.measure.lifecycle import ServerLifeProfile, feature_fields
from tasks.report.page import PublishedRun, render_report
from tasks.serve.launchers.base import RuntimeSize
from tasks.serve.lines import CountedFile, LineCount
from tasks.validate.expectations import validate_run

RUN = {"run_id": "r", "logical_date": "2026-11-29T02:00:00+00:00", "status": "complete", "provenance": {}}


def _profile() -> ServerLifeProfile:
    checks = [CapabilityCheck("metrics", True, "Prometheus text", "GET /metrics on port http", "passed", "5 samples"),
              CapabilityCheck("grpc", True, "KServe v2 gRPC", "gRPC /x/Ready on port grpc", "failed",
                              "/x/Ready: gRPC UNAVAILABLE: connection refused"),
              CapabilityCheck("hot_reload", False, "not offered", "", "not probed", "not offered: nothing to probe")]
    lines = LineCount(13, 75, (CountedFile("runtime:m.py", "code", 75), CountedFile("c.pbtxt", "config", 13)))
    return ServerLifeProfile(2.0, 2.5, Footprint(100.0, 2, 40, "process tree"), RuntimeSize(3 * 2**20, "venv"),
                             lines, checks)


def _row(**fields) -> dict:
    row = empty_row()
    row.update(run_id="r", schema_version="1.6", model="mlp", format="onnx", server="triton", launcher="process",
               device="cpu", batch_size=1, mode="concurrency", load=1.0, config_id="default",
               protocol="kserve_v2_rest", wire="json", status="ok", throughput_rps=100.0, latency_ms_p50=1.0,
               latency_ms_p90=1.0, latency_ms_p95=1.0, latency_ms_p99=2.0, latency_ms_max=3.0, error_rate=0.0,
               startup_s=2.0, host_state="{}", server_rss_mb=120.0)
    row.update(fields)
    return row


def test_a_lifes_figures_from_its_readings_go_on_every_row_it_measured():
    profile = _profile()
    rows = [_row(load=1.0, server_rss_mb=120.0), _row(load=2.0, server_rss_mb=150.0)]
    profile.after_point(rows[0], Footprint(104.0, 2, 41, "process tree"))
    profile.after_point(rows[1], Footprint(110.5, 2, 41, "process tree"))
    profile.apply()
    assert rows[0]["first_correct_s"] == rows[1]["first_correct_s"] == 2.5
    assert rows[0]["idle_rss_mb"] == 100.0 and rows[0]["session_rss_peak_mb"] == 150.0
    assert rows[1]["rss_growth_mb"] == 6.5 and rows[0]["runtime_size_mb"] == 3.0
    assert (rows[0]["server_processes"], rows[0]["server_threads"]) == (2, 40)
    assert rows[0]["capability_findings"] == 1 and (rows[0]["config_lines"], rows[0]["code_lines"]) == (13, 75)
    assert json.loads(rows[0]["capabilities"])["grpc"]["result"] == "failed"
    record = profile.record()
    assert [p["after"]["rss_mb"] for p in record["points"]] == [104.0, 110.5]
    assert [f["capability"] for f in record["findings"]] == ["grpc"]
    lone = _profile()
    lone.after_point(_row(), Footprint(104.0, 2, 41, "process tree"))
    assert lone.rss_growth_mb() is None  # one point: no growth to read


def test_validation_checks_the_figures_shape():
    good = [_row(first_correct_s=2.5, idle_rss_mb=100.0, session_rss_peak_mb=150.0, server_processes=2,
                 server_threads=40, capabilities="{}", capability_findings=0, config_lines=1, code_lines=2)]
    bad = [_row(first_correct_s=1.5, idle_rss_mb=100.0, session_rss_peak_mb=90.0, server_processes=0,
                server_threads=40, capabilities=None, capability_findings=0, config_lines=1, code_lines=2)]

    def lifecycle_failures(rows: list[dict]) -> set[str]:
        failed = validate_run(to_frame(rows), [], len(rows))["failed_expectations"]
        return {f for f in failed if any(c in f for c in ("first_correct", "rss", "server_processes",
                                                          "capabilit", "_lines"))}

    assert lifecycle_failures(good) == set()
    assert lifecycle_failures(bad) == {
        "results: expect_column_pair_values_a_to_be_greater_than_b first_correct_s >= startup_s",
        "results: expect_column_pair_values_a_to_be_greater_than_b session_rss_peak_mb >= idle_rss_mb",
        "results: expect_column_pair_values_a_to_be_greater_than_b session_rss_peak_mb >= server_rss_mb",
        "results: expect_column_values_to_be_between server_processes",
        "results: expect_column_values_to_not_be_null capabilities",
    }


def test_the_report_shows_each_life_and_one_features_table_with_its_findings():
    profile = _profile()
    triton = [_row(load=1.0), _row(load=2.0)]
    for row in triton:
        profile.after_point(row, Footprint(101.0, 2, 41, "process tree"))
    profile.apply()
    custom = _row(server="custom", load=1.0, first_correct_s=0.7, startup_s=0.6, idle_rss_mb=88.0,
                  **feature_fields([CapabilityCheck("metrics", True, "its own", "GET /metrics on port http",
                                                    "passed", "5 samples")], LineCount(0, 254)))
    files = {"results.parquet": to_parquet_bytes(to_frame([*triton, custom])), "validation.json": b'{"success": true}'}
    page = render_report(PublishedRun.from_files(files, RUN))
    lifecycle = re.search(r"<table class=lifecycle>.*?</table>", page, re.S).group(0)
    assert lifecycle.count("<tr><td") == 2  # one row per server life, not per load point
    assert "<td>2.50</td>" in lifecycle and "<td>40</td>" in lifecycle
    assert "data-plot='lifecycle-first-correct'" in page and "data-plot='lifecycle-idle-memory'" in page
    features = re.search(r"<table class=features>.*?</table>", page, re.S).group(0)
    assert re.findall(r"<th class=l>(\w+)</th>", features)[:2] == ["custom", "triton"]  # stacks as columns
    grpc = re.search(r"<tr data-capability='grpc'>.*?</tr>", features).group(0)
    assert "<b>finding</b>" in grpc and "gRPC UNAVAILABLE" in grpc and "mlp/onnx (process)" in grpc
    metrics = re.search(r"<tr data-capability='metrics'>.*?</tr>", features).group(0)
    assert metrics.count("probed ✓") == 2
    assert "<th class=l>lines of code</th><td>254</td><td>75</td>" in features
    assert "<h3>Findings (1)</h3>" in page and "triton: gRPC is declared but its probe" in page
