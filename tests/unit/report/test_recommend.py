"""The recommendation weighs the dimensions (issue 26, item 5): beside the fastest stack within the bound, the cheapest
within it and the one that degrades best under overload, each with its margin, in one short table first."""

from __future__ import annotations

import re

import pytest

from tasks.core.cost import Prices, cost_fields
from tasks.core.results import to_frame, to_parquet_bytes
from tasks.report.page import PublishedRun, render_report
from tasks.report.recommend import degrades_per_stack, efficiency, group_by_answer, recommend
from tests.claims import decided_claims
from tests.unit.report.test_page import _row

RUN = {"run_id": "r", "logical_date": "2026-12-02T02:00:00+00:00", "status": "complete",
       "provenance": {"config": {"p99_bound_ms": 50.0}}}


def steady(server: str, rps: float, p99: float, cpu_pct: float) -> dict:
    row = {"run_id": "r", "model": "mlp", "format": "onnx", "server": server, "launcher": "process", "device": "cpu",
           "batch_size": 1, "mode": "concurrency", "load": 4.0, "throughput_rps": rps, "throughput_sps": rps,
           "latency_ms_p50": p99 / 2, "latency_ms_p99": p99, "error_rate": 0.0, "server_cpu_pct": cpu_pct,
           "stable": True, "cv": 0.02, "status": "ok", "schema_version": "1.7", "wire": "json",
           "server_cpu_us_per_request": cpu_pct / 100.0 / rps * 1e6, **decided_claims(p99)}
    row.update(cost_fields(row, Prices()))
    return row


def burst(server: str, factor: float, overload_class: str, goodput_pct: float, recovery_s: float | None,
          status: str = "ok") -> dict:
    return {"run_id": "r", "model": "mlp", "format": "onnx", "server": server, "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "overload", "load": factor, "overload_factor": factor, "status": status,
            "reason": None if status == "ok" else "server exited with code 137", "schema_version": "1.7",
            "wire": "json", "capacity_rps": 1000.0, "overload_class": overload_class, "goodput_pct": goodput_pct,
            "goodput_rps": 10.0 * goodput_pct, "burst_p99_ms": 800.0, "pre_burst_p99_ms": 3.0,
            "recovery_s": recovery_s, "recovered": recovery_s is not None, "requests": 3000, "errors": 0,
            "timeouts": 0, "overload": '{"recovery": "did not recover within 16 s"}'}


def rows() -> list[dict]:
    return [steady("triton", 2000.0, 40.0, 200.0), steady("custom", 1000.0, 30.0, 50.0),
            steady("kserve", 900.0, 45.0, 108.0),
            burst("triton", 3.0, "queues", 100.0, None), burst("custom", 3.0, "sheds", 95.0, 0.5),
            burst("kserve", 3.0, "queues", 98.0, 2.0), burst("custom", 1.5, "holds", 150.0, 0.0)]


def test_each_dimension_has_its_own_winner_and_margin():
    (record,) = recommend(rows(), (50.0,))
    assert record["best"]["stack"] == "triton/onnx" and record["margin_pct"] == pytest.approx(100.0)
    # core-s per 1,000: custom 0.5, triton 1.0, kserve 1.2
    assert record["cheapest"]["stack"] == "custom/onnx"
    assert record["cheapest_runner_up"]["stack"] == "triton/onnx"
    assert record["cheapest_margin_pct"] == pytest.approx(100.0)
    # at 3x: custom recovered 0.5 s after the burst, kserve 2.0 s, triton not at all
    assert record["degrades_best"]["stack"] == "custom/onnx" and record["degrades_best"]["overload_factor"] == 3.0
    assert record["degrades_runner_up"]["stack"] == "kserve/onnx"
    assert record["overload_margin"] == {"kind": "recovery_s", "value": pytest.approx(1.5)}


def test_without_a_recovery_the_goodput_decides_and_a_dead_server_is_never_best():
    ranked = degrades_per_stack([burst("triton", 3.0, "queues", 100.0, None),
                                 burst("kserve", 3.0, "queues", 60.0, None),
                                 burst("custom", 3.0, "fails", 0.0, None, status="failed")])
    assert [r["server"] for r in ranked] == ["triton", "kserve"]
    (record,) = recommend([steady("triton", 2000.0, 40.0, 200.0), steady("kserve", 900.0, 45.0, 90.0),
                           burst("triton", 3.0, "queues", 100.0, None), burst("kserve", 3.0, "queues", 60.0, None)],
                          (None,))
    assert record["overload_margin"] == {"kind": "goodput_pct", "value": pytest.approx(40.0)}
    one_recovered = recommend([steady("triton", 2000.0, 40.0, 200.0), steady("kserve", 900.0, 45.0, 90.0),
                               burst("triton", 3.0, "queues", 100.0, None), burst("kserve", 3.0, "sheds", 60.0, 1.0)],
                              (None,))[0]
    assert one_recovered["degrades_best"]["stack"] == "kserve/onnx"
    assert one_recovered["overload_margin"]["kind"] == "not_recovered"


def test_overload_rows_are_never_ranked_as_load_points():
    records = recommend(rows(), (None,))
    assert all(r["best"]["stack"] != "custom/onnx" or r["best"]["load"] != 1.5 for r in records)
    # the overload answer is the same for every bound: it does not split the rows of one answer
    assert len(group_by_answer(recommend(rows(), (10.0, 50.0, None)))) == 2  # <= 10 ms: nobody; else one answer


def test_the_report_opens_with_one_table_of_the_three_answers_then_the_overload_section():
    files = {"results.parquet": to_parquet_bytes(to_frame(rows())), "validation.json": b'{"success": true}'}
    page = render_report(PublishedRun.from_files(files, RUN))
    first_table = re.search(r"<table[^>]*>.*?</table>", page, re.S).group(0)
    assert "class=recommendation" in first_table
    heads = re.findall(r"<th class=l>([^<]+)</th>", first_table)
    assert {"fastest stack", "cheapest stack", "degrades best under overload"} <= set(heads)
    assert "1.50 s sooner" in first_table and "than kserve/onnx" in first_table
    section = re.search(r"<table class=overload>.*?</table>", page, re.S).group(0)
    assert section.count("<tr><td") == 4  # every burst of every stack, the 1.5x one too
    assert "did not recover within 16 s" in section
    assert "<a href='#overload'>Overload</a>" in page
    model_table = re.search(r"<section id='model-mlp'>.*?</section>", page, re.S).group(0)
    assert "overload" not in model_table  # the bursts have their own section, not rows of dashes here


def test_a_run_without_overload_keeps_the_table_as_it_was():
    steady_only = [r for r in rows() if r["mode"] != "overload"]
    files = {"results.parquet": to_parquet_bytes(to_frame(steady_only)), "validation.json": b'{"success": true}'}
    page = render_report(PublishedRun.from_files(files, RUN))
    assert "degrades best" not in re.search(r"<table class=recommendation>.*?</table>", page, re.S).group(0)
    assert "id=overload" not in page


def test_the_digest_never_names_a_burst_as_a_runner_up():
    import pandas as pd

    from tasks.report.digest import best_stacks

    # kserve's steady points all failed; its only ok row is a burst, which has no throughput to rank
    frame = pd.DataFrame([steady("triton", 2000.0, 40.0, 200.0), burst("kserve", 3.0, "queues", 90.0, 1.0)])
    (best,) = best_stacks(frame)
    assert best["server"] == "triton" and best["runner_up"] is None


def test_the_first_screen_shows_every_stacks_behaviour_at_its_highest_burst_before_the_explanations():
    dead = burst("torchserve", 3.0, "fails", 0.0, None, status="failed")
    files = {"results.parquet": to_parquet_bytes(to_frame([*rows(), dead])), "validation.json": b'{"success": true}'}
    page = render_report(PublishedRun.from_files(files, RUN))
    start = page.index("id=recommendation")
    glance = re.search(r"<table class=overload-glance>.*?</table>", page, re.S)
    note = page.index("<p class=note>", start)
    # the answers come first: the recommendation's table, then every stack's burst, then what the columns mean
    assert start < page.index("<table class=recommendation>") < glance.start() < note
    stacks = re.findall(r"<th class=l>([a-z]+/onnx)</th>", glance.group(0))
    cells = dict(zip(stacks, re.findall(r"<td class=l><b>([a-z]+)</b><br>", glance.group(0)), strict=True))
    # each stack at the highest burst it ran (custom's 1.5x "holds" is not its answer), a dead server included
    assert cells == {"custom/onnx": "sheds", "kserve/onnx": "queues", "torchserve/onnx": "fails",
                     "triton/onnx": "queues"}
    assert "<h3>Under 3 × overload, every stack</h3>" in page  # each stack's highest burst was 3x: said once
    assert "server died" in glance.group(0) and "recovered in 0.500 s" in glance.group(0)


def test_efficiency_is_throughput_per_busy_core_at_each_stacks_peak():
    rows = [_row("triton", 3000.0, 1.5, load=4.0, server_cpu_pct=150.0), _row("triton", 1000.0, 1.0, load=1.0)]
    (eff,) = efficiency(rows)
    assert eff["throughput_rps_per_core"] == 2000.0 and eff["server_cpu_pct"] == 150.0


def test_a_stack_whose_points_are_undecided_is_named_with_what_would_decide_it_not_ranked():
    from tests.claims import decided_claims

    few = steady("kserve", 3000.0, 8.0, 100.0)
    few.update(decided_claims(8.0, samples=30))  # 30 requests, none slower than 50 ms: too few to hold the bound
    (record,) = recommend([*rows()[:2], few], (50.0,))
    assert record["best"]["stack"] == "triton/onnx"  # faster kserve is not ranked on 30 requests
    (undecided,) = record["undecided"]
    assert undecided["stack"] == "kserve/onnx" and undecided["requests"] == 30 and undecided["exceed"] == 0
    assert undecided["more_requests"] == 299 - 30
    files = {"results.parquet": to_parquet_bytes(to_frame([*rows()[:2], few])), "validation.json": b'{"success": true}'}
    page = render_report(PublishedRun.from_files(files, RUN))
    table = re.search(r"<table class=recommendation>.*?</table>", page, re.S).group(0)
    assert "kserve/onnx: 0 of 30 requests slower at concurrency 4, about 269 more would decide it" in table
    assert "triton/onnx costs 100.0 % more" in table  # the next cheapest, in % of the cheapest
