"""A budgeted night in its report (tasks/report/coverage.py): the budget's use in words, each deferred cell's night,
and the carried rows the answers rank a deferred cell on."""

from __future__ import annotations

from tasks.core.results import to_frame, to_parquet_bytes
from tasks.plan.cells import Cell
from tasks.report.coverage import aged, budget_line, carried_rows, coverage_section
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store

CELL = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency", 1.0, "kserve_v2_rest", "json")
ROW = {"model": "mlp", "format": "onnx", "server": "custom", "batch_size": 1, "mode": "concurrency", "load": 1.0,
       "protocol": "kserve_v2_rest", "status": "ok", "throughput_rps": 100.0}
NIGHT = {"budget_s": 3600.0, "elapsed_s": 3300.0, "classes": {CELL.cell_id: "sweeps", "x": "answers"},
         "coverage": {"K": 4, "note": "1 cells deferred, coverage every 4 nights"},
         "stages": {"measure": {"planned_s": 2400.0, "actual_s": 2500.0, "source": "last nights: r1"}},
         "deferred": [{"cell_id": CELL.cell_id, "class": "sweeps", "age": 2, "last_run_id": "r1",
                       "last_logical_date": "2026-12-05T02:00:00+00:00", "reason": "the night's budget",
                       "cell": CELL.to_dict(), "overdue": False}]}


def test_the_budget_line_says_the_time_taken_what_was_deferred_and_k():
    assert budget_line(NIGHT) == ("The night took 55.0 min of its 60.0 min budget (92 %); 1 cells deferred, "
                                  "coverage every 4 nights.")
    assert "over its budget" in budget_line({**NIGHT, "elapsed_s": 4000.0})
    assert budget_line(None) == "" and budget_line({}) == ""


def test_a_carried_row_knows_how_many_nights_ago_it_was_measured():
    carried = [{**ROW, "run_id": "r1"}, {**ROW, "run_id": "r0"}]  # only its own last night's row counts
    assert [r["nights_ago"] for r in aged(carried, NIGHT)] == [2]


def test_the_section_lists_each_deferred_cell_with_its_night():
    page = str(coverage_section(NIGHT, [ROW]))
    assert "measured 2 nights ago (2026-12-05)" in page and CELL.cell_id in page and "41.7 min" in page
    assert str(coverage_section(None, [])) == ""


def test_carried_rows_come_from_each_cells_last_night(embedded_s3, bucket):
    store = S3Store(bucket, "eval", embedded_s3.connection("s3"))
    other = {**ROW, "server": "triton"}
    publish_run(store, run_id="r1", logical_date="2026-12-05T02:00:00+00:00",
                files={"results.parquet": to_parquet_bytes(to_frame([{**ROW, "run_id": "r1"},
                                                                       {**other, "run_id": "r1"}]))},
                status="complete", provenance={})
    rows = carried_rows(store, NIGHT["deferred"])
    assert [(r["server"], r["run_id"]) for r in rows] == [("custom", "r1")]
    assert carried_rows(store, [{**NIGHT["deferred"][0], "last_run_id": "gone"}]) == []  # its night was deleted
