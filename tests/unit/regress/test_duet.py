"""The duet's paired test (tasks/regress/duet.py) without servers: its thresholds, undecided noisy pairs, the
A/A noise."""

from __future__ import annotations

import math

import pytest

from tasks.regress.duet import DuetThresholds, aa_noise, decided, duet_verdict, judge_pairs, log_ratios


def pairs_of(ratio: float, jitter: float, n: int, base: float = 1000.0) -> list[dict]:
    """n pairs whose candidate/reference throughput ratio is `ratio` times a small alternating jitter (and CPU
    per request and latency the inverse: a slower candidate is slower in every metric)."""
    out = []
    for i in range(n):
        r = ratio * (1 + jitter * (-1) ** i)
        ref = {"throughput_rps": base, "server_cpu_us_per_request": 500.0, "latency_ms_p50": 2.0,
               "latency_ms_p99": 5.0}
        cand = {"throughput_rps": base * r, "server_cpu_us_per_request": 500.0 / r, "latency_ms_p50": 2.0 / r,
                "latency_ms_p99": 5.0 / r}
        out.append({"load": 0, "index": i, "first": "reference", "sides": {"reference": ref, "candidate": cand}})
    return out


THRESHOLDS = DuetThresholds.detector()  # the duet's own threshold: 2.5 % in duet units


def by_metric(judged: list[dict]) -> dict[str, dict]:
    return {j["metric"]: j for j in judged}


def test_a_step_beyond_the_minimum_effect_and_the_noise_is_a_regression_in_every_metric():
    judged = by_metric(judge_pairs(pairs_of(0.90, 0.005, 4), THRESHOLDS))
    assert all(j["verdict"] == "regression" for j in judged.values()), judged
    assert judged["throughput_rps"]["ratio"] == pytest.approx(0.90, rel=0.01)
    assert judged["throughput_rps"]["ratio_ci"][0] < 0.90 < judged["throughput_rps"]["ratio_ci"][1]
    assert judged["server_cpu_us_per_request"]["change_pct"] == pytest.approx(100 * (1 / 0.9 - 1), rel=0.02)
    assert duet_verdict(list(judged.values())) == "regression"
    assert decided(pairs_of(0.90, 0.005, 4), THRESHOLDS)  # clear after four pairs: no more pairs measured
    assert not decided(pairs_of(0.90, 0.005, 3), THRESHOLDS)  # p99's noise floor (5 %) wants a fourth


def test_an_equal_pair_is_no_change_and_a_small_change_is_no_change_however_tight():
    assert {j["verdict"] for j in judge_pairs(pairs_of(1.0, 0.01, 6), THRESHOLDS)} == {"no_change"}
    small = by_metric(judge_pairs(pairs_of(0.985, 0.001, 6), THRESHOLDS))  # 1.5 %: significant, below 2.5 %
    assert small["throughput_rps"]["p_value"] < 0.05 and small["throughput_rps"]["verdict"] == "no_change"
    assert all(j["verdict"] == "improvement" for j in judge_pairs(pairs_of(1.10, 0.005, 4), THRESHOLDS))


def test_noisy_pairs_stay_undecided_and_the_noise_floor_widens_the_test():
    noisy = pairs_of(0.97, 0.06, 3)  # a 3 % step in pairs that swing 6 % either way
    assert not decided(noisy, THRESHOLDS)  # measure more pairs
    assert by_metric(judge_pairs(noisy, THRESHOLDS))["throughput_rps"]["verdict"] == "no_change"
    tight = pairs_of(0.95, 0.0005, 4)
    assert by_metric(judge_pairs(tight, THRESHOLDS))["throughput_rps"]["verdict"] == "regression"
    floored = DuetThresholds.detector(aa_noise={"throughput_rps": 0.08})  # tonight's A/A: 8 %
    assert by_metric(judge_pairs(tight, floored))["throughput_rps"]["verdict"] == "no_change"
    assert floored.noise_floor["throughput_rps"] == 0.08 and floored.source["aa_noise"] == {"throughput_rps": 0.08}


def test_the_aa_noise_is_the_spread_of_a_pairs_log_ratio():
    pairs = pairs_of(1.0, 0.02, 6)
    noise = aa_noise(pairs)
    expected = math.log(1.02) - math.log(0.98)  # alternating +-2 %: a spread of about 2 %
    assert noise["throughput_rps"] == pytest.approx(abs(expected) / 2 * math.sqrt(6 / 5), rel=0.05)
    assert len(log_ratios(pairs, "throughput_rps")) == 6


def test_pairs_whose_p99_is_only_a_lower_bound_are_left_out_of_the_p99_verdict_and_counted():
    pairs = pairs_of(0.90, 0.005, 4)
    for pair in pairs[:2]:
        pair["sides"]["candidate"]["latency_ms_p99"] = None  # too few requests: published as "at least"
    judged = by_metric(judge_pairs(pairs, THRESHOLDS))
    assert judged["latency_ms_p99"]["pairs"] == 2 and judged["latency_ms_p99"]["pairs_left_out"] == 2
    assert judged["throughput_rps"]["pairs"] == 4 and judged["throughput_rps"]["pairs_left_out"] == 0
