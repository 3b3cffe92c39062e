"""Comparing two runs (tasks/regress/compare.py): changes beyond the noise, status changes; contended rows
not judged."""

from __future__ import annotations

from tasks.regress.compare import beyond_noise, compare_rows
from tests.unit.report.test_page import _row


def test_margin_within_noise_uses_intervals_then_cv():
    a, b = _row("a", 1000.0, 1.0, cv=0.05), _row("b", 1040.0, 1.0, cv=0.05)
    assert beyond_noise("throughput_rps", a, b) is False  # 40 < 2 * hypot(50, 52)
    assert beyond_noise("throughput_rps", _row("a", 1000.0, 1.0, cv=0.001), _row("b", 1040.0, 1.0, cv=0.001))
    assert beyond_noise("throughput_rps", _row("a", 1000.0, 1.0, cv=None), b) is None
    ci_a = _row("a", 1000.0, 1.0, cv=0.5, throughput_rps_ci_low=990.0, throughput_rps_ci_high=1010.0)
    ci_b = _row("b", 1040.0, 1.0, cv=0.5, throughput_rps_ci_low=1020.0, throughput_rps_ci_high=1060.0)
    assert beyond_noise("throughput_rps", ci_a, ci_b) is True  # intervals do not overlap, whatever the CV
    assert beyond_noise("throughput_rps", ci_a, ci_b, min_rel_change=0.05) is False  # below the minimum change


def test_compare_rows_marks_changes_beyond_noise_and_status_changes():
    before = [_row("triton", 3000.0, 1.5, cv=0.01), _row("custom", 2000.0, 2.5, cv=0.01),
              _row("bentoml", 500.0, 9.0), _row("kserve", 900.0, 5.0)]
    after = [_row("triton", 2500.0, 1.5, cv=0.01), _row("custom", 2010.0, 2.5, cv=0.01),
             _row("bentoml", 0.0, 0.0, "failed", "boom"), _row("torchserve", 250.0, 25.0)]
    verdicts = {r["server"]: r for r in compare_rows(before, after)}
    assert verdicts["triton"]["verdict"] == "worse"
    assert verdicts["triton"]["metrics"]["throughput_rps"]["direction"] == "worse"
    assert verdicts["custom"]["verdict"] == "same"
    assert verdicts["bentoml"]["verdict"] == "worse" and "was ok, now failed" in verdicts["bentoml"]["notes"][0]
    assert verdicts["kserve"]["verdict"] == "gone" and verdicts["torchserve"]["verdict"] == "new"


def test_compare_does_not_judge_a_contended_row():
    before = [_row("triton", 3000.0, 1.5, cv=0.01)]
    after = [_row("triton", 300.0, 15.0, "contended", "other work used 70 % of the host's CPU", cv=0.01)]
    (record,) = compare_rows(before, after)
    assert record["verdict"] == "contended" and record["notes"][0].startswith("not compared: B was contended")
    assert record["metrics"]["throughput_rps"]["beyond_noise"] is None
