"""The duet's paired test (tasks/regress/duet_verdict.py) without servers: its thresholds, its three findings (a change,
decided no change, undecided), its looks, the A/A noise, and the pairs that would rule a move out."""

from __future__ import annotations

import math

import pytest

from tasks.regress.duet_verdict import (
    DuetThresholds,
    aa_noise,
    decided,
    duet_verdict,
    judge_metric,
    judge_pairs,
    log_ratios,
    pairs_to_rule_out,
)
from tests.recorded_duets import equal_pairs, trial


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
    equal = by_metric(judge_pairs(pairs_of(1.0, 0.01, 6), THRESHOLDS))
    assert equal["throughput_rps"]["verdict"] == "no_change"  # its interval wholly inside (-2.5 %, +2.5 %)
    # p99's noise floor (5 %) is twice its threshold: six pairs cannot bound it within +-2.5 %, whatever they read
    assert equal["latency_ms_p99"]["verdict"] == "undecided" and not equal["latency_ms_p99"]["settled"]
    small = by_metric(judge_pairs(pairs_of(0.985, 0.001, 6), THRESHOLDS))  # 1.5 %: significant, below 2.5 %
    assert small["throughput_rps"]["p_value"] < 0.05 and small["throughput_rps"]["verdict"] == "no_change"
    assert all(j["verdict"] == "improvement" for j in judge_pairs(pairs_of(1.10, 0.005, 4), THRESHOLDS))


def test_noisy_pairs_stay_undecided_and_the_noise_floor_widens_the_test():
    noisy = pairs_of(0.97, 0.06, 3)  # a 3 % step in pairs that swing 6 % either way
    assert not decided(noisy, THRESHOLDS)  # measure more pairs
    assert by_metric(judge_pairs(noisy, THRESHOLDS))["throughput_rps"]["verdict"] == "undecided"  # not no_change
    tight = pairs_of(0.95, 0.0005, 4)
    assert by_metric(judge_pairs(tight, THRESHOLDS))["throughput_rps"]["verdict"] == "regression"
    floored = DuetThresholds.detector(aa_noise={"throughput_rps": 0.08})  # tonight's A/A: 8 %
    assert by_metric(judge_pairs(tight, floored))["throughput_rps"]["verdict"] == "undecided"
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


def test_the_three_findings_on_recorded_pairs():
    """A duet of a known 10 % step (recorded: custom service, heavy MLP) finds the change in CPU per request; a
    changed-but-equal night's (the same compute in another file) decides no change in throughput and leaves p99
    undecided: its interval is neither beyond nor inside the threshold."""
    step = by_metric(judge_pairs(trial("custom/onnx/heavy", "10")["pairs"], THRESHOLDS, tests=4, looks=2))
    assert step["server_cpu_us_per_request"]["verdict"] == "regression"
    equal = by_metric(judge_pairs(equal_pairs("triton/onnx/heavy"), THRESHOLDS, tests=4, looks=2))
    low, high = equal["throughput_rps"]["ratio_ci"]
    assert equal["throughput_rps"]["verdict"] == "no_change" and 1 / 1.025 < low < high < 1.025
    low, high = equal["latency_ms_p99"]["ratio_ci"]
    assert equal["latency_ms_p99"]["verdict"] == "undecided" and low < 1 / 1.025 and high > 1.025
    assert duet_verdict(list(equal.values())) == "undecided"


def test_each_look_spends_its_share_of_alpha():
    """Alpha over the looks: the same pairs judged as one of two looks have a wider interval (each bound one-sided
    at alpha / (tests * L)); recorded pairs of a 10 % step on Triton are settled at 4 pairs at one look, not at two:
    a duet that stopped at the first settled pair count would stop on a laxer test than its looks allow."""
    ratios = log_ratios(pairs_of(0.96, 0.01, 4), "throughput_rps")
    one, two = judge_metric(ratios, "throughput_rps", THRESHOLDS, 4, 1), judge_metric(ratios, "throughput_rps",
                                                                                      THRESHOLDS, 4, 2)
    assert two["alpha"] == pytest.approx(one["alpha"] / 2) == pytest.approx(0.05 / 8)
    assert two["ratio_ci"][0] < one["ratio_ci"][0] and two["ratio_ci"][1] > one["ratio_ci"][1]
    pairs = trial("triton/onnx/light", "10")["pairs"]
    assert decided(pairs[:4], THRESHOLDS, tests=4, looks=1) and not decided(pairs[:3], THRESHOLDS, tests=4, looks=2)


def test_the_pairs_that_would_rule_a_move_out_at_the_observed_spread():
    alpha = 0.05 / 12
    needed = pairs_to_rule_out(0.0, 0.03, 0.025, alpha)  # a part reading nothing, pairs spreading 3 %
    assert needed > 6  # more than the default duet_max_pairs
    from scipy import stats

    def upper(n: int) -> float:  # the interval's upper bound at n pairs of that mean and spread
        return float(stats.t.ppf(1 - alpha, n - 1)) * 0.03 / math.sqrt(n)

    assert upper(needed) < 0.025 <= upper(needed - 1)
    assert pairs_to_rule_out(0.03, 0.01, 0.025, alpha) is None  # its mean is beyond the threshold: never
