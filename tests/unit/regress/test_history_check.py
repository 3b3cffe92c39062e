"""The history detector (tasks/regress/history_check.py; what judges the environment on the control cell,
tasks/regress/check.py): its statistics on synthetic nights, and overload rows never judged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tasks.regress.history_check import (
    MIN_HISTORY,
    PERSIST_NIGHTS,
    build_histories,
    comparison_key,
    detect_parity_regressions,
    detect_regressions,
    holm,
)
from tasks.regress.noise import PRIOR_DF

CV = 0.03  # a quiet host's nightly noise, for the synthetic series


def _row(night: int, value: float, cpu_model: str = "EPYC", **key) -> dict:
    cell = {"model": "mlp", "format": "onnx", "server": "custom", "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": 1.0, "protocol": "kserve_v2_rest"}
    cell.update(key)
    return {**cell, "status": "ok", "logical_date": f"2026-01-{night + 1:02d}T02:00:00+00:00", "run_id": f"r{night}",
            "cpu_model": cpu_model, "cpu_count": 2, "gpu_name": None, "throughput_rps": value,
            "latency_ms_p50": 1000.0 / value, "cv": 0.02, "windows": 5, "requests": int(value * 5), "errors": 0,
            "error_rate": 0.0}


def _series(rng, level: float, n: int, start: int = 0, **key) -> list[dict]:
    return [_row(start + i, level * math.exp(CV * rng.standard_normal()), **key) for i in range(n)]


def _verdict(records: list[dict], metric: str = "throughput_rps", **key) -> dict:
    return next(r for r in records if r["metric"] == metric and all(r[k] == v for k, v in key.items()))


# --- the detector's statistics on synthetic series ----------------------------------------------------------

def test_a_10pct_step_on_a_quiet_host_is_found_within_three_nights():
    rng = np.random.default_rng(2026)
    found = 0
    for _ in range(100):
        history = _series(rng, 1000, 10) + _series(rng, 1000, 10, model="mlp2")
        step = [_row(10 + i, 900 * math.exp(CV * rng.standard_normal())) for i in range(3)]
        flagged = False
        for i, tonight in enumerate(step):
            records = detect_regressions([tonight], history + step[:i])
            if _verdict(records)["verdict"] == "regression":
                flagged = True
                break
        found += flagged
    assert found >= 90, f"the step was found in {found}/100 histories"


def test_a_quiet_hosts_suite_of_36_cells_x_10_metrics_raises_no_alarm_on_most_nights():
    rng = np.random.default_rng(20261130)
    loud = 0
    for night in range(20):
        history, tonight = [], []
        for c in range(36):
            series = _series(rng, 1000 + 50 * c, 11, load=float(c + 1))
            history += series[:-1]
            tonight.append({**series[-1], "run_id": f"tonight{night}"})
        loud += any(r["verdict"] == "regression" for r in detect_regressions(tonight, history))
    assert loud <= 1


def test_a_verdict_states_tonight_the_baseline_its_nights_the_method_and_the_interval():
    rng = np.random.default_rng(1)
    history = _series(rng, 1000, 10)
    record = _verdict(detect_regressions([_row(10, 700.0)], history))
    assert record["verdict"] == "regression" and record["current"] == 700.0
    assert 950 < record["baseline"] < 1050
    assert [n["run_id"] for n in record["baseline_nights"]] == [f"r{i}" for i in range(10)]
    assert record["change_pct"] == pytest.approx(100 * (700.0 / record["baseline"] - 1))  # tonight vs baseline
    low, high = record["change_ci_pct"]
    assert low < record["change_pct"] < high < 0
    assert "segment t-test" in record["method"] and record["unit"] == "req/s" and record["better"] == "higher"
    assert record["noise"]["df"] > PRIOR_DF


def test_latency_up_is_a_regression_and_down_an_improvement():
    rng = np.random.default_rng(3)
    history = _series(rng, 1000, 12)
    assert _verdict(detect_regressions([_row(12, 700.0)], history), "latency_ms_p50")["verdict"] == "regression"
    assert _verdict(detect_regressions([_row(12, 1400.0)], history), "latency_ms_p50")["verdict"] == "improvement"


def test_a_small_change_is_no_change_however_significant():
    rng = np.random.default_rng(4)
    history = [_row(i, 1000.0 * (1 + 0.001 * rng.standard_normal())) for i in range(14)]
    assert _verdict(detect_regressions([_row(14, 970.0)], history))["verdict"] == "no_change"  # -3 % < 5 %


def test_a_start_up_one_old_poll_step_slower_is_no_change():
    """Readiness used to be polled every 0.1 s: a 0.33 s start-up read 0.44 s on a night a poll came late, +33 %
    beyond any spread of the steady nights. A start-up change needs 0.15 s as well as 20 %."""
    history = [{**_row(i, 1000.0), "startup_s": 0.33} for i in range(12)]
    one_step = _verdict(detect_regressions([{**_row(12, 1000.0), "startup_s": 0.44}], history), "startup_s")
    assert one_step["verdict"] == "no_change" and one_step["change_pct"] > 30 and one_step["min_abs_change"] == 0.15
    slower = _verdict(detect_regressions([{**_row(12, 1000.0), "startup_s": 0.9}], history), "startup_s")
    assert slower["verdict"] == "regression"


def test_short_history_says_no_history():
    rng = np.random.default_rng(5)
    records = detect_regressions([_row(5, 500.0)], _series(rng, 1000, MIN_HISTORY - 1))
    assert _verdict(records)["verdict"] == "no_history"
    assert _verdict(detect_regressions([_row(5, 500.0)], _series(rng, 1000, MIN_HISTORY)))["verdict"] == "regression"


def test_a_change_on_another_host_is_not_compared():
    rng = np.random.default_rng(9)
    history = _series(rng, 1000, 12)
    assert _verdict(detect_regressions([_row(20, 500.0, cpu_model="Xeon")], history))["verdict"] == "no_history"
    assert _verdict(detect_regressions([_row(20, 500.0)], history))["verdict"] == "regression"


def test_cells_are_matched_on_their_whole_key():
    rng = np.random.default_rng(11)
    history = _series(rng, 1000, 12, load=4.0)
    assert _verdict(detect_regressions([_row(20, 500.0, load=1.0)], history))["verdict"] == "no_history"


def test_a_regressed_night_stays_out_of_the_baseline_until_it_persists():
    rng = np.random.default_rng(12)
    history = _series(rng, 1000, 10) + [_row(10 + i, 600.0 * math.exp(CV * rng.standard_normal())) for i in range(4)]
    key = comparison_key(history[0])
    regressed = {(f"r{10 + i}", key) for i in range(4)}
    # night 10 regressed and was reverted: night 11 is normal; the low night is never a baseline night
    hist = build_histories(history[:10] + [history[10], _row(11, 1001.0)], {("r10", key)})[key]
    assert hist.held == {"r10"} and hist.start == 0
    record = _verdict(detect_regressions([_row(12, 990.0)], history[:10] + [history[10], _row(11, 1001.0)],
                                         regressed={("r10", key)}))
    assert "r10" not in [n["run_id"] for n in record["baseline_nights"]] and record["verdict"] == "no_change"
    # a regression seen PERSIST_NIGHTS nights in a row becomes the new baseline
    hist = build_histories(history[:10 + PERSIST_NIGHTS], regressed)[key]
    assert hist.start == 10 and not hist.held
    record = _verdict(detect_regressions([_row(10 + PERSIST_NIGHTS, 600.0)], history[:10 + PERSIST_NIGHTS],
                                         regressed=regressed))
    assert record["verdict"] == "no_change" and 550 < record["baseline"] < 650


def test_an_improvement_seen_three_nights_in_a_row_becomes_the_baseline():
    rng = np.random.default_rng(19)
    history = _series(rng, 1000, 10) + [_row(10 + i, 1500.0) for i in range(PERSIST_NIGHTS)]
    key = comparison_key(history[0])
    improved = {(f"r{10 + i}", key) for i in range(PERSIST_NIGHTS)}
    assert build_histories(history, improved=improved)[key].start == 10
    back = _verdict(detect_regressions([_row(20, 1000.0)], history, improved=improved))
    assert back["verdict"] == "regression" and back["baseline"] == pytest.approx(1500.0)  # back to the old level


def test_a_segment_finds_a_step_no_single_night_shows():
    """Two nights 8 % down on a 3 % host: tonight alone is not enough, the two together are."""
    history = [_row(i, 1000.0 * (1 + CV * z)) for i, z in enumerate([0.3, -1, 1, 0.5, -0.5, 0, 1.2, -1.2, 0.2, -0.2])]
    record = _verdict(detect_regressions([_row(11, 915.0)], [*history, _row(10, 925.0)]))
    assert record["verdict"] == "regression" and "newest 2 nights" in record["method"]
    assert [n["run_id"] for n in record["segment_nights"]] == ["r10"]


def test_holm_controls_the_night_and_rejects_in_step_down_order():
    assert holm([0.01, 0.04, 0.03, 0.5], 0.05) == [True, False, False, False]
    assert holm([0.001, 0.012, 0.02], 0.05) == [True, True, True]
    assert holm([], 0.05) == []


def test_a_noisy_run_needs_a_larger_change():
    rng = np.random.default_rng(14)
    history = _series(rng, 1000, 12)
    calm = _verdict(detect_regressions([_row(12, 860.0)], history))
    noisy = _verdict(detect_regressions([{**_row(12, 860.0), "cv": 0.6}], history))
    assert noisy["p_value"] > calm["p_value"]


def test_error_rate_and_parity():
    rng = np.random.default_rng(15)
    history = _series(rng, 1000, 8)
    failing = {**_row(8, 1000.0), "errors": 100, "requests": 5000, "error_rate": 0.02}
    assert _verdict(detect_regressions([failing], history), "error_rate")["verdict"] == "regression"
    host = {"cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None}
    past = [{"model": "mlp", "format": "onnx", "max_abs_err": 1e-7, "passed": True, "run_id": f"r{i}", **host}
            for i in range(5)]
    (rec,) = detect_parity_regressions([{"model": "mlp", "format": "onnx", "max_abs_err": 5e-3}], past, host)
    assert rec["verdict"] == "regression" and rec["confirmation"]["outcome"] == "not_needed"


def test_no_regression_or_duet_is_judged_on_an_overload_row():
    from tasks.regress.history_check import detect_regressions
    from tasks.regress.references import find_references

    steady = {"run_id": "r", "model": "mlp", "format": "onnx", "server": "custom", "launcher": "process",
              "device": "cpu", "batch_size": 1, "mode": "concurrency", "load": 4.0, "status": "ok",
              "throughput_rps": 1000.0, "latency_ms_p50": 1.0, "latency_ms_p99": 2.0, "error_rate": 0.0,
              "requests": 1000, "errors": 0, "hostname": "h"}
    burst = {**steady, "mode": "overload", "load": 3.0, "throughput_rps": None, "latency_ms_p50": None,
             "latency_ms_p99": None, "error_rate": 0.4, "requests": 3000, "errors": 1200}
    assert detect_regressions([steady], []) and detect_regressions([burst], []) == []
    assert [r.row["mode"] for r in find_references([steady, burst], [], {})] == ["concurrency"]


def test_a_percentile_is_compared_only_where_its_requests_support_it():
    from tasks.regress.history_check import metric_value

    rows = _series(np.random.default_rng(5), 1000, 12)
    for row in rows:
        row["latency_ms_p99"] = 2000.0 / row["throughput_rps"]
    few = {**_row(12, 700.0), "latency_ms_p99": 2000.0 / 700.0, "requests": 60}  # an older row: 60 requests
    assert metric_value(few, "latency_ms_p99") is None and metric_value(few, "latency_ms_p50") is not None
    assert metric_value({**few, "latency_samples": 150}, "latency_ms_p99") is not None  # the 1.8 count decides
    records = detect_regressions([few], rows, metrics=("latency_ms_p50", "latency_ms_p99"))
    assert {r["metric"] for r in records} == {"latency_ms_p50"}  # no p99 verdict on 60 requests
