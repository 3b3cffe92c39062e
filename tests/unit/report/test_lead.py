"""What a night found, first (tasks/report/lead.py): the regressions with their size, interval and cause ahead of
everything else, then what is not settled and the failed cells; a quiet night says how many cells it judged."""

from __future__ import annotations

from tasks.report.lead import LEAD_ITEMS, judged_cells, night_lead

CELL = {"model": "mlp", "format": "onnx", "server": "custom", "mode": "concurrency", "load": 1.0,
        "protocol": "kserve_v2_rest", "reference_run_id": "night1"}
REGRESSION = {**CELL, "kind": "duet", "metric": "throughput_rps", "verdict": "regression", "duet_ratio": 0.8,
              "duet_ratio_ci": [0.75, 0.85], "change_pct": -12.5, "change_ci": [-16.0, -9.0], "cause": "model",
              "changes": ["mlp: model sha256 aaaa… → bbbb…"]}
UNCHANGED = {**CELL, "kind": "inputs", "metric": "inputs", "verdict": "no_change", "server": "triton"}
FIRST = {**CELL, "kind": "inputs", "metric": "inputs", "verdict": "no_history", "server": "kserve"}
FAILED = {"model": "mlp", "format": "onnx", "server": "bentoml", "mode": "concurrency", "load": 2.0,
          "status": "failed", "reason": "server died"}


def test_the_regressions_lead_with_their_size_interval_and_cause_before_a_failed_cell():
    undecided = {**REGRESSION, "metric": "latency_ms_p50", "verdict": "undecided", "change_pct": 4.0,
                 "change_ci": [-1.0, 9.0]}
    regressions = {"records": [undecided, REGRESSION, UNCHANGED, FIRST]}
    lead = night_lead([FAILED], regressions, {"success": True})
    assert lead.headline == ("1 regression, 1 change not settled, 1 failed cell; 2 cells judged against their "
                             "reference night, 1 on its first night.")
    assert lead.items[0] == ("regression: mlp/onnx/custom concurrency 1 (kserve_v2_rest): Throughput -12.5 % "
                             "[-16.0, -9.0] %; cause: model; mlp: model sha256 aaaa… → bbbb…")
    assert lead.items[1].startswith("not settled: mlp/onnx/custom") and "undecided" in lead.items[1]
    assert lead.items[2] == "failed: mlp/onnx/bentoml concurrency 2; server died" and lead.more == 0


def test_a_quiet_night_says_no_change_found_and_how_many_cells_it_judged():
    lead = night_lead([], {"records": [UNCHANGED, {**UNCHANGED, "server": "custom"}, FIRST]}, {"success": True})
    assert lead.headline == ("No change found: 2 cells judged against their reference night, 1 on its first "
                             "night.") and lead.items == ()
    failed = night_lead([FAILED], {"records": [UNCHANGED]}, {"success": True})
    assert failed.headline == ("No change found: 1 cell judged against its reference night; 1 failed cell.")


def test_a_changed_cell_is_judged_once_whatever_its_metrics_and_the_rest_are_counted_not_listed():
    duets = [{**REGRESSION, "metric": m} for m in ("throughput_rps", "latency_ms_p50", "latency_ms_p99")]
    assert judged_cells({"records": duets}) == (1, 0)
    rows = [{**FAILED, "load": float(n)} for n in range(LEAD_ITEMS + 3)]
    lead = night_lead(rows, {"records": []}, {})
    assert len(lead.items) == LEAD_ITEMS and lead.more == 3
    assert lead.lines()[-1] == "  ... and 3 more (the report's sections list them all)"
