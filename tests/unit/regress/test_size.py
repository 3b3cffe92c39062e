"""A change's size alone (tasks/regress/size.py) read off synthetic interleaved rounds: its interval holds the size
the rounds were made with, every verdict case, contended rounds set aside, what is not sized and why."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tasks.regress.size import size_metric, size_verdict, trusted_rounds


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


def test_no_size_leaves_a_found_change_uncertain_and_no_change_stays_no_change():
    assert size_verdict("throughput_rps", "regression", None)[0] == "regression_uncertain"
    assert size_verdict("throughput_rps", "improvement", None)[0] == "improvement_uncertain"
    size = size_metric(rounds_of(1.3, 0.01, 12), "server_cpu_us_per_request", "concurrency")
    assert size_verdict("server_cpu_us_per_request", "no_change", size)[0] == "no_change"


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
