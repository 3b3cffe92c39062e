"""A night's findings (tasks/report/findings.py): one per regression or improvement (both record shapes: the duet's
own figures, or the change sized alone beside them), failed, contended, missing cell and failed validation; a
regression already announced is open since that night, not new."""

from __future__ import annotations

from tasks.report.findings import is_news, mark_announced, night_findings, size_of

DUET = {"kind": "duet", "model": "mlp", "format": "onnx", "server": "custom", "mode": "concurrency", "load": 1.0,
        "protocol": "kserve_v2_rest", "metric": "throughput_rps", "reference_run_id": "night1",
        "changes": ["mlp: model sha256 aaaa… → bbbb…"]}


def test_the_size_is_the_one_measured_alone_where_the_record_has_it_else_the_duets():
    old = {**DUET, "verdict": "regression", "ratio": 0.8, "ratio_ci": [0.75, 0.85], "change_pct": -20.0}
    assert size_of(old) == "-20.0 % [-25.0, -15.0] % in duet units"
    alone = {**DUET, "verdict": "regression", "duet_ratio": 0.8, "duet_ratio_ci": [0.75, 0.85],
             "duet_change_pct": -20.0, "change_pct": -12.5, "change_ci": [-16.0, -9.0]}
    assert size_of(alone) == "-12.5 % [-16.0, -9.0] %"
    unsized = {**alone, "verdict": "regression_uncertain", "change_pct": None, "change_ci": None}
    assert size_of(unsized) == "size uncertain (duet ×0.800 [×0.750, ×0.850])"


def test_every_kind_of_finding_with_its_cell_metric_size_and_cause():
    regressions = {"records": [
        {**DUET, "verdict": "regression_uncertain", "duet_ratio": 0.8, "duet_ratio_ci": [0.7, 0.9],
         "change_pct": None, "cause": "model"},
        {**DUET, "metric": "latency_ms_p50", "verdict": "improvement", "ratio": 0.9, "change_pct": -10.0},
        {**DUET, "metric": "latency_ms_p99", "verdict": "no_change"},
        {"kind": "environment", "verdict": "environment", "metric": "throughput_rps"},
        {"kind": "missing", "verdict": "missing", "cell_id": "mlp.onnx.triton.process.cpu.b1.concurrency1",
         "since": "2026-02-02T02:00:00+00:00", "reason": "not in tonight's plan"}]}
    rows = [{"model": "mlp", "format": "onnx", "server": "kserve", "mode": "concurrency", "load": 2.0,
             "status": "failed", "reason": "server died"},
            {"model": "mlp", "format": "onnx", "server": "kserve", "mode": "concurrency", "load": 8.0,
             "status": "failed", "beyond_capacity": True, "reason": "timeouts"},
            {"model": "mlp", "format": "onnx", "server": "bentoml", "mode": "concurrency", "load": 2.0,
             "status": "contended", "reason": "other work took 60 %"}]
    found = night_findings(rows, regressions, {"success": False, "failed_expectations": ["rows_expected"]})
    assert [f.kind for f in found] == ["regression", "improvement", "missing", "failed", "contended", "validation"]
    line = found[0].line()
    assert line.startswith("NEW regression: mlp/onnx/custom concurrency 1 (kserve_v2_rest): Throughput")
    assert "size uncertain" in line and "cause: model" in line and "model sha256" in line
    assert "server died" in found[3].line() and "rows_expected" in found[5].line()
    assert is_news(found)


def test_a_regression_announced_before_is_open_since_that_night():
    regressions = {"records": [{**DUET, "verdict": "regression", "ratio": 0.8, "change_pct": -20.0}]}
    (finding,) = night_findings([], regressions, {"success": True})
    (marked,) = mark_announced([finding], {finding.key: "2026-02-02T02:00:00+00:00"})
    assert not marked.new and marked.line().startswith("OPEN since 2026-02-02 regression")
    assert not is_news([marked])
    other_reference = {"records": [{**DUET, "verdict": "regression", "reference_run_id": "night5"}]}
    (fresh,) = mark_announced(night_findings([], other_reference, {}), {finding.key: "2026-02-02"})
    assert fresh.new  # measured against another reference: another regression


def test_a_change_not_settled_is_its_own_finding_with_its_interval_and_what_is_left():
    """The night that published a p50 `no_change` beside a size of +17.4 % [+9.3, +26.2]: undecided and disputed
    records are findings "not settled", never no change, and open until settled."""
    undecided = {**DUET, "metric": "latency_ms_p50", "verdict": "undecided", "duet_verdict": "undecided",
                 "duet_ratio": 1.03, "change_pct": 17.4, "change_ci": [-2.0, 40.1],
                 "size": {"verdict_confidence_pct": 99.6875},
                 "left": "left for the next night: left its size (4 of up to 12 rounds, look 1 of 4)"}
    disputed = {**DUET, "verdict": "disputed", "duet_verdict": "no_change", "duet_ratio": 1.0, "change_pct": -8.0,
                "change_ci": [-11.0, -6.0], "size": {"verdict_confidence_pct": 98.75}}
    found = night_findings([], {"records": [undecided, disputed]}, {"success": True})
    assert [f.kind for f in found] == ["not_settled", "not_settled"]
    first, second = (f.line() for f in found)
    assert first.startswith("NEW not settled: mlp/onnx/custom concurrency 1 (kserve_v2_rest): Latency p50")
    assert "+17.4 % [-2.0, +40.1] % at 99.69 %" in first and "undecided: neither the duet" in first
    assert "left for the next night" in first
    assert "-8.0 % [-11.0, -6.0] % at 98.75 %" in second and "disputed: the duet decided no change" in second
    (marked, _) = mark_announced(found, {found[0].key: "2026-02-02"})
    assert not marked.new  # open, like a regression, until a night settles it
