"""A change's size as the stack shows it alone, read off interleaved solo rounds (tasks/measure/interleaved.py), and
the verdict the duet's detection and that size support together.

Per metric, each round gives one log ratio, candidate over reference, of the two sides measured alone minutes
apart in a random order; their mean is the change's size (`change_pct`) and a t interval of it with K-1 degrees of
freedom (two-sided SIZE_CONFIDENCE_PCT) its interval (`change_ci`). The size is "alone on this host at this load
point": what a team that serves the stack this way sees, not what a duet's two servers on one core see of it.

Which metrics: the server's CPU time per request always; throughput only at closed-loop points (at an open-loop
rate throughput is the offered rate); p50 and p99, the p99 only from rounds whose two sides each held enough requests
for it (a p99 of too few requests is a lower bound, not a figure: docs/measuring.md#confidence). A round in which a
side was contended (`tasks.validate.outcome.judge_host`) is set aside: nothing cancels what other work did to one
side alone.

The verdicts, for a metric whose duet found a change (the duet is the detector, the rounds the ruler; e the
metric's minimum effect, tasks/core/metrics.py, on the worse-is-positive log scale):

    interval wholly beyond +e                 regression
    interval wholly beyond -e                 improvement
    interval wholly inside (-e, +e)           no_change: real (the duet found it) but smaller than the minimum effect
    interval across +e or -e                  regression_uncertain / improvement_uncertain (the duet's direction),
                                              "size uncertain", with the interval
    no size (no rounds, too few, an error)    the same *_uncertain verdict, the reason saying why

A metric whose duet found no change keeps `no_change`; its size, where the rounds measured one, is published beside.
"""

from __future__ import annotations

import math
import statistics

from tasks.core.metrics import METRICS, bad_sign
from tasks.validate.outcome import judge_host

SIZE_CONFIDENCE_PCT = 95.0  # two-sided interval of a size
SIZE_METRICS = ("server_cpu_us_per_request", "throughput_rps", "latency_ms_p50", "latency_ms_p99")
CLOSED_LOOP_ONLY = ("throughput_rps",)  # at an open-loop rate throughput is the offered rate, not the stack's
SCOPE = "alone on this host at this load point"
UNCERTAIN = {"regression": "regression_uncertain", "improvement": "improvement_uncertain"}


def trusted_rounds(rounds: list[dict], max_neighbour_pct: float) -> tuple[list[dict], list[str]]:
    """The rounds whose two sides both ran on a quiet enough host, and why each other round was set aside."""
    kept, flags = [], []
    for one in rounds:
        why = [f"{label}: {contention.summary}" for label, figures in sorted((one.get("sides") or {}).items())
               if (contention := judge_host(figures.get("host") or {}, max_neighbour_pct)) is not None]
        if why:
            flags.append(f"round {one.get('index')}: contended ({'; '.join(why)})")
        else:
            kept.append(one)
    return kept, flags


def _ratios(rounds: list[dict], metric: str) -> list[float]:
    out = []
    for one in rounds:
        sides = one.get("sides") or {}
        a, b = (sides.get("reference") or {}).get(metric), (sides.get("candidate") or {}).get(metric)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
            out.append(math.log(b / a))
    return out


def size_metric(rounds: list[dict], metric: str, mode: str) -> dict:
    """One metric's size over the rounds: change_pct, change_ci ([low, high], %), the rounds it rests on and those
    left out (no figure on both sides), or a reason where there is none."""
    out = {"metric": metric, "rounds": 0, "left_out": 0, "change_pct": None, "change_ci": None, "reason": None,
           "confidence_pct": SIZE_CONFIDENCE_PCT}
    if metric in CLOSED_LOOP_ONLY and mode != "concurrency":
        out["reason"] = f"not sized at an open-loop point ({mode}): its throughput is the offered rate"
        return out
    ratios = _ratios(rounds, metric)
    out.update(rounds=len(ratios), left_out=len(rounds) - len(ratios))
    if len(ratios) < 2:
        why = " (a p99 of too few requests is a lower bound)" if metric == "latency_ms_p99" and out["left_out"] else ""
        out["reason"] = f"{len(ratios)} round(s) with the figure on both sides{why}: a size needs two"
        return out
    from scipy import stats  # lazy: scipy (about 0.3 s) only when a size is read

    mean, spread = statistics.fmean(ratios), statistics.stdev(ratios)
    half = float(stats.t.ppf(0.5 + SIZE_CONFIDENCE_PCT / 200.0, len(ratios) - 1)) * spread / math.sqrt(len(ratios))
    out.update(change_pct=100.0 * math.expm1(mean), change_ci=[100.0 * math.expm1(mean - half),
                                                               100.0 * math.expm1(mean + half)])
    return out


def size_verdict(metric: str, duet_verdict: str, size: dict | None) -> tuple[str, str]:
    """(verdict, why) of a metric from its duet's verdict (the detector) and its size alone (the ruler)."""
    effect = METRICS[metric].min_effect
    if duet_verdict not in UNCERTAIN:
        return duet_verdict, "the duet found no change beyond its threshold"
    uncertain = UNCERTAIN[duet_verdict]
    if not size or size.get("change_ci") is None:
        why = (size or {}).get("reason") or "the change's size was not measured"
        return uncertain, f"the duet found a {duet_verdict}; size uncertain: {why}"
    sign, limit = bad_sign(metric), math.log1p(effect)
    low, high = sorted(sign * math.log1p(v / 100.0) for v in size["change_ci"])  # worse is positive
    shown = f"{size['change_pct']:+.1f} % [{size['change_ci'][0]:+.1f}, {size['change_ci'][1]:+.1f}] alone"
    if low >= limit:
        return "regression", f"{shown}: wholly beyond the minimum effect of {100 * effect:g} %"
    if high <= -limit:
        return "improvement", f"{shown}: wholly beyond the minimum effect of {100 * effect:g} %"
    if -limit < low and high < limit:
        return "no_change", (f"{shown}: real (the duet found a {duet_verdict}) but smaller than the minimum effect "
                             f"of {100 * effect:g} %")
    return uncertain, f"{shown}: the duet found a {duet_verdict}, size uncertain (across {100 * effect:g} %)"
