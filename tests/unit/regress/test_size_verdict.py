"""A change's size alone (tasks/regress/size_verdict.py) read off synthetic and recorded interleaved rounds: its
interval holds the size the rounds were made with, the looks and their stop, every row of the verdict table, contended
rounds set aside, what is not sized and why."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from tasks.regress.looks import size_schedule
from tasks.regress.size_verdict import (
    decides,
    detector_confidence_pct,
    interval_at,
    size_at_look,
    size_metric,
    size_verdict,
    sizes_settled,
    trusted_rounds,
)
from tests.recorded_duets import trial


def rounds_of(cpu_ratio: float, jitter: float, n: int, seed: int = 0, p99: bool = True) -> list[dict]:
    """n rounds whose candidate costs `cpu_ratio` times the reference's CPU per request (throughput the inverse),
    each round's ratio off by a lognormal jitter, each side's level moved by a drift both sides of a round share."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        drift = math.exp(rng.normal(0.0, 0.15))  # the host within the hour: both sides of a round alike
        ratio = cpu_ratio * math.exp(rng.normal(0.0, jitter))
        ref = {"server_cpu_us_per_request": 500.0 * drift, "throughput_rps": 1000.0 / drift,
               "latency_ms_p50": 2.0 * drift, "latency_ms_p99": 5.0 * drift if p99 else None}
        cand = {"server_cpu_us_per_request": ref["server_cpu_us_per_request"] * ratio,
                "throughput_rps": ref["throughput_rps"] / ratio, "latency_ms_p50": ref["latency_ms_p50"] * ratio,
                "latency_ms_p99": ref["latency_ms_p99"] * ratio if p99 else None}
        out.append({"index": i, "order": ["reference", "candidate"], "sides": {"reference": ref, "candidate": cand}})
    return out


def test_the_interval_holds_the_size_the_rounds_were_made_with_and_narrows_with_more_rounds():
    hits, widths = 0, {6: [], 16: []}
    for seed in range(200):
        for n in widths:
            size = size_metric(rounds_of(1.10, 0.05, n, seed), "server_cpu_us_per_request", "concurrency")
            low, high = size["change_ci"]
            widths[n].append(high - low)
            hits += n == 16 and low <= 10.0 <= high
    assert hits >= 0.93 * 200  # a 95 % interval, 200 replications
    assert np.median(widths[16]) < np.median(widths[6])  # the drift cancels within a round; more rounds narrow it
    assert np.median(widths[16]) < 6.0  # +-3 % at 5 % round-to-round noise and 16 rounds


@pytest.mark.parametrize(("cpu_ratio", "duet", "verdict"), [
    (1.20, "regression", "regression"),  # wholly beyond +5 %
    (0.80, "improvement", "improvement"),  # wholly beyond -5 %
    (1.01, "regression", "no_change"),  # real (the duet found it) but smaller than the minimum effect
    (1.05, "regression", "regression_uncertain"),  # across +5 %: size uncertain
])
def test_each_verdict_the_duet_and_the_size_support_together(cpu_ratio, duet, verdict):
    size = size_metric(rounds_of(cpu_ratio, 0.01, 12), "server_cpu_us_per_request", "concurrency")
    got, why = size_verdict("server_cpu_us_per_request", duet, size)
    assert got == verdict, (size, why)
    assert "alone" in why
    # throughput is the inverse: the same rounds, the same verdict (worse is lower)
    size = size_metric(rounds_of(cpu_ratio, 0.01, 12), "throughput_rps", "concurrency")
    assert size_verdict("throughput_rps", duet, size)[0] == verdict


def test_no_size_leaves_a_found_change_uncertain_and_an_undecided_one_undecided():
    assert size_verdict("throughput_rps", "regression", None)[0] == "regression_uncertain"
    assert size_verdict("throughput_rps", "improvement", None)[0] == "improvement_uncertain"
    verdict, why = size_verdict("throughput_rps", "undecided", None)
    assert verdict == "undecided" and "not known" in why
    assert size_verdict("throughput_rps", "no_change", None)[0] == "no_change"
    assert size_verdict("throughput_rps", "unconfirmed", None)[0] == "unconfirmed"


def recorded_size(change_pct: float, low: float, high: float, rounds: int = 12, looks: int = 4) -> dict:
    """A size as published: its change and 95 % interval over `rounds` rounds, at `looks` looks."""
    from scipy import stats

    mean = math.log1p(change_pct / 100)
    se = (math.log1p(high / 100) - math.log1p(low / 100)) / 2 / float(stats.t.ppf(0.975, rounds - 1))
    return {"change_pct": change_pct, "change_ci": [low, high], "confidence_pct": 95.0, "log_mean": mean,
            "log_se": se, "df": rounds - 1, "looks": {"of": looks, "taken": looks, "at": rounds}}


# The night of 2026-12-07 (docs/regressions.md): latency p50 of the custom service at concurrency 1, its duet
# undecided, its size alone +17.4 % [+9.3, +26.2] over 12 rounds, published as no_change.
TONIGHTS_P50 = recorded_size(17.4, 9.3, 26.2)


def test_the_verdict_table_row_by_row_on_recorded_figures():
    # found a change: as before (the size alone decides how large)
    assert size_verdict("latency_ms_p50", "regression", TONIGHTS_P50)[0] == "regression"
    # undecided, the size wholly beyond +e at 1 - alpha / (L * m): a regression like any other
    verdict, why = size_verdict("latency_ms_p50", "undecided", TONIGHTS_P50, detector_tests=1)
    assert verdict == "regression" and "read as the detector" in why and "98.75 %" in why
    assert detector_confidence_pct(TONIGHTS_P50, 1) == pytest.approx(98.75)
    low, _ = interval_at(TONIGHTS_P50, 98.75)
    assert 5.0 < low < 9.3  # wider than the 95 % interval, still beyond the minimum effect
    # undecided, anything else: with 4 such sizes read tonight the interval at 1 - 0.05 / 16 reaches below +5 %
    verdict, why = size_verdict("latency_ms_p50", "undecided", TONIGHTS_P50, detector_tests=4)
    assert verdict == "undecided" and interval_at(TONIGHTS_P50, detector_confidence_pct(TONIGHTS_P50, 4))[0] < 5.0
    # decided no change and the size wholly beyond +-e: the two disagree
    verdict, why = size_verdict("latency_ms_p50", "no_change", TONIGHTS_P50)
    assert verdict == "disputed" and "disagree" in why
    # decided no change, the size not beyond: no change
    assert size_verdict("latency_ms_p50", "no_change", recorded_size(2.0, -1.0, 5.5))[0] == "no_change"


def test_an_undecided_duet_whose_size_is_wholly_inside_the_minimum_effect_is_no_change():
    small = recorded_size(0.3, -1.0, 1.6)
    verdict, why = size_verdict("server_cpu_us_per_request", "undecided", small, detector_tests=8)
    assert verdict == "no_change" and "wholly inside" in why
    assert size_verdict("server_cpu_us_per_request", "undecided", recorded_size(3.0, -1.0, 7.0))[0] == "undecided"


def test_rounds_stop_at_the_first_look_where_every_flagged_metric_is_decided():
    """Recorded rounds of a 10 % step on Triton (heavy MLP): at 4 rounds CPU per request reads [+3.9, +19.8] at
    98.75 %, across +5 %; at the second look (6 rounds) every metric's interval is wholly beyond its minimum
    effect. A 30 % step on the custom service is decided at the first look."""
    schedule = size_schedule(12)
    flagged = {m: "regression" for m in ("server_cpu_us_per_request", "throughput_rps", "latency_ms_p50",
                                         "latency_ms_p99")}

    def settled_at(rounds: list[dict]) -> int | None:
        for look in schedule.looks:
            sizes = {m: size_at_look(rounds[:look], m, "concurrency", schedule) for m in flagged}
            if sizes_settled(sizes, flagged):
                return look
        return None

    triton = trial("triton/onnx/heavy", "10")["rounds"]
    assert settled_at(triton) == 6
    first = size_at_look(triton[:5], "server_cpu_us_per_request", "concurrency", schedule)
    assert first["looks"] == {"looks": [4, 6, 8, 12], "of": 4, "taken": 1, "at": 4}  # 5 rounds: the first look's 4
    assert first["confidence_pct"] == pytest.approx(98.75) and decides("server_cpu_us_per_request",
                                                                       first["change_ci"]) is None
    assert settled_at(trial("custom/onnx/heavy", "30")["rounds"]) == 4
    # a metric whose duet decided no change is not waited for: only CPU per request flagged, a 5 % step's rounds
    # stop at the first look, its interval wholly inside +-5 % (no change: real, but under the minimum effect)
    step = trial("custom/onnx/heavy", "5")["rounds"]
    only_cpu = {"server_cpu_us_per_request": "regression", "latency_ms_p99": "no_change"}
    sizes = {m: size_at_look(step[:4], m, "concurrency", schedule) for m in only_cpu}
    assert sizes_settled(sizes, only_cpu) and decides("server_cpu_us_per_request",
                                                      sizes["server_cpu_us_per_request"]["change_ci"]) == "inside"
    assert size_at_look(step[:3], "server_cpu_us_per_request", "concurrency", schedule)["change_ci"] is None


def test_what_is_not_sized_says_why():
    rate = size_metric(rounds_of(1.2, 0.01, 8), "throughput_rps", "rate")
    assert rate["change_ci"] is None and "offered rate" in rate["reason"]
    p99 = size_metric(rounds_of(1.2, 0.01, 8, p99=False), "latency_ms_p99", "concurrency")
    assert p99["change_ci"] is None and p99["left_out"] == 8 and "lower bound" in p99["reason"]
    one = size_metric(rounds_of(1.2, 0.01, 1), "server_cpu_us_per_request", "concurrency")
    assert one["change_ci"] is None and "needs two" in one["reason"]


def test_a_round_with_a_contended_side_is_set_aside():
    rounds = rounds_of(1.1, 0.01, 4)
    for one in rounds:
        for side in one["sides"].values():
            side["host"] = {"neighbour_cpu_pct": 3.0}
    rounds[1]["sides"]["candidate"]["host"] = {"neighbour_cpu_pct": 60.0}
    kept, flags = trusted_rounds(rounds, 25.0)
    assert [r["index"] for r in kept] == [0, 2, 3]
    assert len(flags) == 1 and flags[0].startswith("round 1: contended") and "candidate" in flags[0]


def test_rounds_that_agree_to_the_request_are_not_a_size_of_exactly_zero():
    """BERT-base at 3.9 req/s: 31 or 30 requests a round on both sides, four times (night 4 of the nightly suite).
    The spread is 0, but one request is a 3 % step: the interval is as wide as the counts resolve, never [0, 0]."""
    rounds = [{"index": i, "sides": {side: {"throughput_rps": n / 8, "requests": n}
                                     for side in ("reference", "candidate")}} for i, n in enumerate((31, 30, 30, 31))]
    size = size_metric(rounds, "throughput_rps", "concurrency")
    assert size["change_pct"] == 0.0 and size["log_se"] > 0
    low, high = size["change_ci"]
    assert low < -1.0 and high > 1.0  # about +/-2.2 % at 95 %: 1/30 per side, uniform, over 4 rounds
    # a spread wider than the counts' resolution is the rounds' own
    varied = [{"index": i, "sides": {"reference": {"throughput_rps": 100.0, "requests": 800},
                                     "candidate": {"throughput_rps": v, "requests": int(v * 8)}}}
              for i, v in enumerate((90.0, 110.0, 95.0, 105.0))]
    spread = size_metric(varied, "throughput_rps", "concurrency")
    ratios = [math.log(v / 100.0) for v in (90.0, 110.0, 95.0, 105.0)]
    assert spread["log_se"] == pytest.approx(statistics.stdev(ratios) / 2)
