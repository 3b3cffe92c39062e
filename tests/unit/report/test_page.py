"""The HTML report (tasks/report/page.py) from rows made here: best values, plots, the recommendation table,
the change section, parity, contended rows, provenance."""

from __future__ import annotations

import json
import re

from tasks.core.results import to_frame, to_parquet_bytes
from tasks.regress.compare import compare_rows
from tasks.report.page import PublishedRun, render_report
from tasks.report.recommend import recommend
from tests.claims import decided_claims

RUN = {"run_id": "r2", "logical_date": "2026-11-29T02:00:00+00:00", "status": "partial",
       "provenance": {"git_sha": "abc123", "pipeline_version": "0.1.0", "config": {"models": ["mlp"], "suite": "smoke"},
                      "host": {"hostname": "h", "cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None}}}


def _row(server: str, rps: float, p99: float, status: str = "ok", reason: str | None = None, *, fmt: str = "onnx",
         load: float = 4.0, cv: float | None = 0.02, model: str = "mlp", **extra) -> dict:
    return {"run_id": "r2", "model": model, "format": fmt, "server": server, "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": load, "throughput_rps": rps, "latency_ms_p50": p99 / 2,
            "latency_ms_p99": p99, "error_rate": 0.0, "server_cpu_pct": 90.0, "server_rss_mb": 100.0,
            "startup_s": 1.0, "stable": True, "cv": cv, "status": status, "reason": reason, "cpu_model": "EPYC",
            "cpu_count": 2, "gpu_name": None, "server_version": "1", "schema_version": "1.3",
            **decided_claims(p99, bounds=(0.1, 2.0)),
            **extra}


def _sweep_rows() -> list[dict]:
    rows = []
    for server, fmt, top in (("triton", "onnx", 3000.0), ("custom", "onnx", 2000.0), ("custom", "torchscript", 1900.0)):
        for c in (1, 2, 4, 8):
            rows.append(_row(server, top * min(c, 4) / 4, 1.0 * c * 3000 / top, fmt=fmt, load=float(c)))
    rows.append(_row("torchserve", 0.0, 0.0, "failed", "server exited with code 1 <boom>", fmt="torchscript", load=1.0))
    return rows


def _plan(rows: list[dict]) -> dict:
    sessions = {}
    for r in rows:
        cell = {k: r[k] for k in ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load")}
        cell.update(protocol="kserve_v2_rest", cell_id=f"{r['model']}.{r['format']}.{r['server']}.c{r['load']:g}")
        sessions.setdefault(f"{r['model']}.{r['format']}.{r['server']}", []).append(cell)
    return {"sessions": [{"session_id": k, "cells": v} for k, v in sorted(sessions.items())]}


def _published(rows: list[dict], trend: dict | None = None, plan: dict | None = None, **files: object) -> PublishedRun:
    data = {"results.parquet": to_parquet_bytes(to_frame(rows)), "plan.json": json.dumps(plan or _plan(rows)).encode(),
            "validation.json": b'{"success": true, "failed_expectations": []}',
            "regressions.json": b'{"records": []}', "parity.json": b"[]"}
    if trend is not None:
        data["trend.json"] = json.dumps(trend).encode()
    data.update({k.replace("_", "."): json.dumps(v).encode() for k, v in files.items()})
    return PublishedRun.from_files(data, RUN)


def _series_of(page: str, plot: str) -> list[str]:
    svg = re.search(rf"<svg[^>]*data-plot='{plot}'.*?</svg>", page, re.S)
    assert svg, f"no {plot} plot"
    return re.findall(r"data-series='([^']*)'", svg.group(0))


def test_report_marks_the_best_value_by_direction_and_shows_failures():
    rows = [_row("triton", 3000.0, 1.5), _row("custom", 2000.0, 2.5),
            _row("torchserve", 0.0, 0.0, status="failed", reason="server exited with code 1 <boom>")]
    page = render_report(_published(rows))
    assert "<td class='best'>3,000.00</td>" in page  # throughput: higher is better
    assert "<td class='best'>1.50</td>" in page  # p99: lower is better
    assert "server exited with code 1 &lt;boom&gt;" in page  # reasons are shown, escaped
    assert "status <b>partial</b>" in page and "<h2>mlp</h2>" in page


def test_report_draws_a_line_per_stack_and_is_self_contained_and_deterministic():
    rows = _sweep_rows()
    page = render_report(_published(rows))
    # same input, same bytes, whatever the order of the rows (cells are listed in the plan's order)
    assert page == render_report(_published(list(reversed(rows)), plan=_plan(rows)))
    stacks = ["custom/onnx", "custom/torchscript", "triton/onnx"]
    assert _series_of(page, "latency-p99") == stacks and _series_of(page, "latency-p50") == stacks
    assert _series_of(page, "scaling-concurrency") == stacks
    assert _series_of(page, "efficiency-cpu") == stacks and _series_of(page, "efficiency-memory") == stacks
    svg = re.search(r"<svg[^>]*data-plot='latency-p99'.*?</svg>", page, re.S).group(0)
    assert svg.count("<circle") == 12  # every ok point drawn (the failed cell is not)
    for forbidden in ("<script", "<link", "@import", "url(", "https://"):
        assert forbidden not in page
    assert re.findall(r"https?://[^'\"]*", page) == ["http://www.w3.org/2000/svg"] * page.count("<svg")
    for cell in (c["cell_id"] for s in _plan(rows)["sessions"] for c in s["cells"]):
        assert f"<code>{cell}</code>" in page  # every planned cell, with its rows
    assert "suite <b>smoke</b>" in page and "abc123" in page  # provenance


def test_recommendation_table_per_bound_with_margin_and_noise():
    rows = _sweep_rows()
    records = {r["p99_bound_ms"]: r for r in recommend(rows)}
    assert set(records) == {10.0, 50.0, 200.0, None}
    best = records[None]
    assert best["best"]["stack"] == "triton/onnx" and best["runner_up"]["stack"] == "custom/onnx"
    assert round(best["margin_pct"]) == 50 and best["beyond_noise"] is True
    # under 2 ms p99 only triton's and custom's first points qualify
    tight = recommend(rows, bounds=(2.0,))[0]
    assert tight["best"]["stack"] == "triton/onnx" and tight["best"]["throughput_rps"] == 1500.0
    assert recommend(rows, bounds=(0.1,))[0]["best"] is None
    page = render_report(_published(rows))
    assert "class=recommendation" in page and "≤ 10 ms" in page and "no bound" in page and "+50.0 %" in page


def test_change_section_shows_previous_run_changes_regressions_and_trend():
    rows = [_row("triton", 2500.0, 1.5, cv=0.01), _row("custom", 2000.0, 2.5, cv=0.01)]
    previous = [_row("triton", 3000.0, 1.5, cv=0.01), _row("custom", 2000.0, 2.5, cv=0.01)]
    night = {"models": {"mlp": {"best_throughput_rps": 3000.0, "best_throughput_stack": "triton/onnx",
                                "best_p99_ms": 1.5, "best_p99_stack": "triton/onnx"}}}
    trend = {"schema_version": "1.0", "comparable_on": {"suite": "smoke", "host": "EPYC|2|None",
                                                        "versions": {"pipeline_version": "0.1.0", "servers": {}}},
             "previous": {"run_id": "r1", "logical_date": "2026-11-28T02:00:00", "status": "complete", "git_sha": "0f"},
             "previous_note": None, "changes": compare_rows(previous, rows),
             "nights": [{"run_id": "r1", "logical_date": "2026-11-28T02:00:00", **night},
                        {"run_id": "r2", "logical_date": "2026-11-29T02:00:00", **night}]}
    regression = {"model": "mlp", "format": "onnx", "server": "triton", "load": 4.0, "metric": "throughput_rps",
                  "kind": "duet", "unit": "req/s", "duet_ratio": 0.84, "duet_ratio_ci": [0.81, 0.87],
                  "change_pct": -9.5, "change_ci": [-12.0, -7.1], "size": {"rounds": 12}, "duet": {"pairs": 3},
                  "verdict": "regression", "reference_run_id": "r1", "cause": "model",
                  "changes": ["triton: onnxruntime 1.31.0 → 1.32.0"]}
    unchanged = {"model": "mlp", "format": "onnx", "server": "custom", "load": 4.0, "kind": "inputs",
                 "metric": "inputs", "verdict": "no_change"}
    aa = {"noise": {"throughput_rps": 0.011}, "measured": {"pairs": [{}, {}, {}, {}]}}
    page = render_report(_published(rows, trend, regressions_json={"records": [regression, unchanged], "aa": aa,
                                                                   "duets": [{}]}))
    assert "Previous comparable run: <code>r1</code>" in page
    assert "1 of 2 cells changed beyond noise" in page and "class='worse'" in page
    assert "Regressions, measured side by side (1)" in page and "×0.840 (0.810–0.870)" in page
    assert "-9.5 %" in page and "-12.0 to -7.1 %" in page and "<td class=l>model</td>" in page  # size alone, cause
    assert "triton: onnxruntime 1.31.0 → 1.32.0 (r1)" in page
    assert "1 cell(s) ran with the same inputs as their reference night" in page
    assert "throughput_rps 1.1 %" in page  # tonight's A/A duet: the noise floor
    assert _series_of(page, "trend-throughput_rps") == ["mlp"] and _series_of(page, "trend-latency_ms_p99") == ["mlp"]
    disputed = {**regression, "metric": "latency_ms_p50", "verdict": "disputed", "duet_verdict": "no_change",
                "change_pct": 8.0, "change_ci": [6.0, 11.0], "size": {"rounds": 6, "verdict_confidence_pct": 98.75},
                "reason": "the duet decided no change, but +8.0 % [+6.0, +11.0] alone lies wholly beyond"}
    page = render_report(_published(rows, trend, regressions_json={"records": [regression, disputed], "aa": aa,
                                                                   "duets": [{}]}))
    assert "Regressions, measured side by side (1; 1 not settled)" in page  # not counted as a regression
    assert "not settled: disputed (the duet said no change)" in page and "+6.0 to +11.0 % (98.75 %)" in page


def test_parity_shows_the_error_ratio_and_reference_when_recorded():
    parity = [{"model": "mlp", "format": "onnx", "max_abs_err": 1e-7, "max_rel_err": 1e-6, "atol": 1e-4,
               "rtol": 1e-3, "passed": True, "max_err_ratio": 0.031, "reference": "torch eager on CPU"},
              {"model": "mlp", "format": "torchscript", "max_abs_err": 2e-4, "max_rel_err": 1e-3, "atol": 1e-4,
               "rtol": 1e-3, "passed": False}]
    rows = [_row("custom", 2000.0, 2.5, served_err_ratio=0.2), _row("custom", 1000.0, 2.5, fmt="torchscript")]
    page = render_report(_published(rows, parity_json=parity))
    assert "torch eager on CPU" in page and "0.0310" in page and "pass ≤ 1" in page
    assert "max |a-b| ≤ atol 0.0001" in page and "<span class=bad>no</span>" in page
    assert "Served outputs before load" in page and "<td>0.200</td>" in page


def test_contended_rows_are_counted_first_and_never_ranked_or_plotted():
    rows = _sweep_rows()
    hog = {"neighbour_cpu_pct": 62.0, "server_cpu_share_pct": 31.0, "steal_pct": 3.0}
    rows.append(_row("kserve", 9000.0, 1.0, "contended", "other work used 62 % of the host's CPU during the point "
                     "(more than max_neighbour_pct 25); re-measured after waiting 20 s: still other work 58 %",
                     remeasured=True, **hog))
    for r in rows[:-1]:
        r.update(neighbour_cpu_pct=4.0, server_cpu_share_pct=88.0, steal_pct=1.0)
    assert all(r["best"]["stack"] != "kserve/onnx" for r in recommend(rows) if r["best"])
    page = render_report(_published(rows))
    first = page[page.index("<p>Run "):page.index("</p>", page.index("<p>Run "))]
    assert "1 contended" in first and "1 of 14 rows was contended" in first and "used 62 % of the host's CPU" in first
    assert "as little as 31" in first
    assert "kserve" not in "".join(_series_of(page, "scaling-concurrency"))
    assert "Contended, failed and skipped cells (2)" in page and "re-measured after waiting 20 s" in page
    assert "title='other work on the host 62.0 %" in page  # each row's host state on hover in the table of rows
    quiet = render_report(_published(rows[:-1]))
    assert "No row was contended: other work used 4 % of the host's CPU during a point" in quiet


def test_one_recommendation_row_per_answer_listing_its_bounds_with_the_runs_own_bound():
    rows = [_row("triton", 3000.0, 1.5, cv=0.01), _row("custom", 2000.0, 2.5, cv=0.01)]
    run = {**RUN, "provenance": {**RUN["provenance"], "config": {"p99_bound_ms": 1000.0}}}
    data = {"results.parquet": to_parquet_bytes(to_frame(rows)), "plan.json": json.dumps(_plan(rows)).encode(),
            "validation.json": b'{"success": true}', "regressions.json": b'{"records": []}', "parity.json": b"[]"}
    page = render_report(PublishedRun.from_files(data, run))
    table = page[page.index("<table class=recommendation>"):page.index("</table>", page.index("class=recommendation"))]
    assert table.count("<tr>") == 2  # the header and one answer: triton/onnx under every bound
    assert "≤ 10 ms, ≤ 50 ms, ≤ 200 ms, ≤ 1,000 ms and no bound" in table
    assert "own p99_bound_ms, 1,000 ms" in page
    assert "yes: the difference 1,000 req/s against 2·sqrt" in table and "(CVs 1 % and 1 %)" in table


def test_beyond_noise_states_the_intervals_it_was_judged_on():
    wide = dict(throughput_rps_ci_low=1500.0, throughput_rps_ci_high=6000.0)
    rows = [_row("triton", 4120.0, 1.5, **wide), _row("custom", 2000.0, 2.5, throughput_rps_ci_low=900.0,
                                                        throughput_rps_ci_high=3100.0)]
    (record,) = [r for r in recommend(rows) if r["p99_bound_ms"] is None]
    assert round(record["margin_pct"]) == 106 and record["beyond_noise"] is False
    page = render_report(_published(rows))
    assert ("no, within noise: the 95 % intervals 1,500–6,000 (best) and 900–3,100 req/s (runner-up) overlap"
            in page)
    assert "A large margin can still be within noise" in page


def test_the_provenance_shows_the_plan_steps_host_check():
    finding = {"name": "hw_counters", "severity": "note", "value": "no hardware performance counters (ENOENT)",
               "effect": "every figure here is a time"}
    run = {**RUN, "provenance": {**RUN["provenance"], "host_check": [finding]}}
    rows = [_row("triton", 3000.0, 1.5)]
    data = {"results.parquet": to_parquet_bytes(to_frame(rows)), "plan.json": json.dumps(_plan(rows)).encode(),
            "validation.json": b'{"success": true}', "regressions.json": b'{"records": []}', "parity.json": b"[]"}
    page = render_report(PublishedRun.from_files(data, run))
    assert "Host check" in page and "no hardware performance counters (ENOENT)" in page
