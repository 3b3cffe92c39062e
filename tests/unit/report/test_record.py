"""Each stack's record over the nights (tasks/report/record.py): the share of its planned cells ok, failed and missing
counted, contended apart, skips not counted; the report's section with the reasons behind a click."""

from __future__ import annotations

from tasks.report.record import RecordNight, cell_coverage, record_section, stack_record

CELL = {"model": "mlp", "format": "onnx", "launcher": "process", "device": "cpu", "batch_size": 1,
        "mode": "concurrency", "protocol": None, "wire": None}


def sessions(*servers: str) -> list[dict]:
    return [{"session_id": s, "model": "mlp", "format": "onnx", "server": s,
             "cells": [{**CELL, "server": s, "load": 1.0}, {**CELL, "server": s, "load": 2.0}]} for s in servers]


def rows(server: str, *statuses: str) -> list[dict]:
    return [{**CELL, "server": server, "load": float(i + 1), "status": s, "reason": f"{s} at {i + 1}"}
            for i, s in enumerate(statuses)]


def test_the_share_counts_ok_failed_and_missing_cells_contended_apart():
    nights = [RecordNight("n1", "2026-02-01T02:00:00+00:00", "complete", sessions("custom", "triton"),
                          rows("custom", "ok", "ok") + rows("triton", "ok", "skipped"), []),
              RecordNight("n2", "2026-02-02T02:00:00+00:00", "partial", sessions("custom"),
                          rows("custom", "failed", "contended"),
                          [{"kind": "missing", "verdict": "missing", "model": "mlp", "format": "onnx",
                            "server": "triton", "cell_id": "mlp.onnx.triton.process.cpu.b1.concurrency1",
                            "reason": "not in tonight's plan"}])]
    record = stack_record(nights)
    custom, triton = record["stacks"]
    assert (custom["stack"], custom["ok"], custom["failed"], custom["contended"], custom["ok_pct"]) == \
        ("custom/onnx", 2, 1, 1, 66.7)
    assert (triton["ok"], triton["missing"], triton["skipped"], triton["ok_pct"]) == (1, 1, 1, 50.0)
    assert custom["failures"][0]["reason"] == "failed at 1" and custom["contended_cells"][0]["run_id"] == "n2"
    page = str(record_section({**record, "suite": "smoke", "nights_asked": 14}))
    assert "2 of 3 (66.7 %)" in page and "<details><summary>1 not ok, 1 contended</summary>" in page
    assert "not in tonight&#39;s plan" in page
    assert str(record_section(None)) == ""


def test_a_deferred_cell_counts_nowhere_within_its_k_and_as_missing_past_it():
    deferred = {"cell_id": "mlp.onnx.triton.process.cpu.b1.concurrency2", "model": "mlp", "format": "onnx",
                "server": "triton", "age": 1, "last_run_id": "n1", "last_logical_date": "2026-02-01T02:00:00+00:00"}
    tonight = RecordNight("n2", "2026-02-02T02:00:00+00:00", "complete", sessions("triton"),
                          rows("triton", "ok"), [], {"deferred": [deferred]})
    (triton,) = stack_record([tonight])["stacks"]
    assert (triton["ok"], triton["failed"], triton["missing"], triton["deferred"], triton["ok_pct"]) == \
        (1, 0, 0, 1, 100.0)
    overdue = {"kind": "missing", "verdict": "overdue", "model": "mlp", "format": "onnx", "server": "triton",
               "cell_id": deferred["cell_id"], "reason": "deferred past its coverage K"}
    late = RecordNight("n3", "2026-02-03T02:00:00+00:00", "complete", sessions("triton"), rows("triton", "ok"),
                       [overdue], {"deferred": [{**deferred, "overdue": True}]})
    (triton,) = stack_record([late])["stacks"]
    assert (triton["missing"], triton["ok_pct"], triton["failures"][0]["status"]) == (1, 50.0, "overdue")
    (_, later) = cell_coverage(tonight)
    assert (later["status"], later["measured_run_id"], later["nights_ago"]) == ("deferred", "n1", 1)
