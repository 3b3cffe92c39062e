"""Regression detection on synthetic histories: sensitive to a real step, quiet on noise, host-aware."""

from __future__ import annotations

import numpy as np

from tasks.regress import detect_parity_regressions, detect_regressions, judge

CV = 0.03  # nightly noise of a throughput figure on a shared machine


def nights(rng, level: float, n: int) -> list[float]:
    return list(level * (1 + CV * rng.standard_normal(n)))


def test_a_10pct_throughput_step_after_10_stable_nights_is_found():
    """Nightly, as the pipeline runs: the step is flagged on one of the first three nights at the new level."""
    rng = np.random.default_rng(2026)
    found, first_night = 0, []
    for _ in range(100):
        series = nights(rng, 1000, 10) + nights(rng, 900, 3)
        flagged = [judge("throughput_rps", series[:night], series[night]).verdict == "regression"
                   for night in range(10, 13)]
        found += any(flagged)
        if any(flagged):
            first_night.append(flagged.index(True) + 1)
    print(f"\n10% step found in {found}/100 histories; on night {np.mean(first_night):.1f} after the step on average")
    assert found >= 85, f"the step was found in {found}/100 histories"


def test_step_verdict_reports_baseline_change_and_method():
    rng = np.random.default_rng(1)
    verdict = judge("throughput_rps", nights(rng, 1000, 10) + [900.0, 901.0], 899.0)
    assert verdict.verdict == "regression"
    assert 950 < verdict.baseline < 1050
    assert -13 < verdict.change_pct < -7
    assert verdict.p_value < 0.02 and verdict.unit == "req/s" and verdict.better == "higher"


def test_latency_up_is_a_regression_and_down_an_improvement():
    rng = np.random.default_rng(3)
    base = nights(rng, 10.0, 12)
    assert judge("latency_ms_p99", base + [13.0, 13.1], 13.2).verdict == "regression"
    assert judge("latency_ms_p99", base + [7.0, 7.1], 7.0).verdict == "improvement"


def test_false_alarm_rate_on_200_aa_histories_is_under_1pct():
    """Measured on 10,000 A/A histories: 0.6 % false alarms; here the issue's 200, seeded."""
    rng = np.random.default_rng(20261129)
    alarms = sum(judge("throughput_rps", nights(rng, 1000, 10), nights(rng, 1000, 1)[0]).verdict == "regression"
                 for _ in range(200))
    print(f"\n{alarms} false alarms in 200 A/A histories")
    assert alarms / 200 < 0.01, f"{alarms} false alarms in 200 A/A histories"


def test_short_history_uses_the_noise_band_and_none_says_no_history():
    rng = np.random.default_rng(5)
    short = nights(rng, 1000, 5)
    assert judge("throughput_rps", short, 700.0).method == "noise_band"
    assert judge("throughput_rps", short, 700.0).verdict == "regression"
    assert judge("throughput_rps", short, 1005.0).verdict == "no_change"
    assert judge("throughput_rps", [1000.0], 500.0).verdict == "no_history"


def _row(run: int, value: float, cpu_model: str = "EPYC", **key) -> dict:
    cell = {"model": "mlp", "format": "onnx", "server": "custom", "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": 1.0}
    cell.update(key)
    return {**cell, "status": "ok", "logical_date": f"2026-01-{run + 1:02d}", "run_id": f"r{run}",
            "cpu_model": cpu_model, "cpu_count": 2, "gpu_name": None, "throughput_rps": value}


def test_a_change_on_another_host_is_not_compared():
    rng = np.random.default_rng(9)
    history = [_row(i, v) for i, v in enumerate(nights(rng, 1000, 12))]
    other_host = _row(20, 500.0, cpu_model="Xeon")  # half the throughput, on a different machine
    records = detect_regressions([other_host], history, metrics=("throughput_rps",))
    assert [r["verdict"] for r in records] == ["no_history"]
    same_host = _row(20, 500.0)
    records = detect_regressions([same_host], history, metrics=("throughput_rps",))
    assert [r["verdict"] for r in records] == ["regression"]


def test_cells_are_matched_on_their_whole_key():
    rng = np.random.default_rng(11)
    history = [_row(i, v, load=4.0) for i, v in enumerate(nights(rng, 1000, 12))]
    records = detect_regressions([_row(20, 500.0, load=1.0)], history, metrics=("throughput_rps",))
    assert records[0]["verdict"] == "no_history"


def test_parity_error_growth_is_a_regression():
    host = {"cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None}
    history = [{"model": "mlp", "format": "onnx", "max_abs_err": 1e-7, **host} for _ in range(5)]
    current = [{"model": "mlp", "format": "onnx", "max_abs_err": 5e-3}]
    assert detect_parity_regressions(current, history, host)[0]["verdict"] == "regression"
