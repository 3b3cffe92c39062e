"""Judging a duet: the pairs' ratios, candidate over reference, per duet metric, with a paired test. The duet is the
*detector*: it says whether a stack changed, with a tenth of a solo session's noise; how large the change is as the
stack shows it alone is measured after it by interleaved solo rounds (tasks/regress/size_verdict.py), because two
servers time-sharing one core interfere by an amount that depends on the stack and the model (docs/regressions.md: the
duet read steps at 0.6 to 8 times their size).

Each pair gives one log ratio per metric (candidate / reference, measured at the same time on the same cores, so
the host's moves cancel). Over K pairs: their mean, and a one-sample t-test of it against zero with K-1 degrees of
freedom, the spread floored at the duet's own noise on this host (tonight's A/A duet of the control cell, else
NOISE_FLOOR). Its alpha is the night's (ALPHA_DUET), Bonferroni over the night's duet tests and over the duet's
looks (tasks/regress/looks.py): alpha' = ALPHA_DUET / (tests * L). Its interval's bounds are each one-sided at
alpha'. Per metric, on the scale where worse is positive (t the duet's threshold, DUET_THRESHOLD):

    found a change      the mean moves by at least t and the test rejects at alpha': `regression` / `improvement`
    decided no change   not found, and the interval lies wholly inside (-t, +t): `no_change`
    undecided           neither: `undecided`

A duet adds pairs (`settled`) until, at one of its looks, every metric's interval lies wholly beyond +t, wholly
beyond -t or wholly inside (-t, +t), or its last look; its verdict is the one of the look where it stopped.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from tasks.core.metrics import METRICS, bad_sign, metrics_where

DUET_METRICS = metrics_where("duet")
ALPHA_DUET = 0.05  # family-wise error rate of a night's duet tests (Bonferroni over cells x metrics)
# The smallest spread of one pair's log ratio trusted when K pairs happen to agree closely: a duet's own noise
# on a 2-core VM (A/A pairs of the custom service: throughput and CPU per request about 1 %, p50 1-2 %, p99 5-7 %).
NOISE_FLOOR = {"server_cpu_us_per_request": 0.01, "throughput_rps": 0.01, "latency_ms_p50": 0.015,
               "latency_ms_p99": 0.05}
DEFAULT_NOISE_FLOOR = 0.02
# The duet's own threshold per metric, in duet units (its ratio's change, not the stack's): half the metric's minimum
# effect. No fixed share of a real change passes through a duet (0.6 to 8 times it, by stack and model), so the
# threshold is set low enough to let a real minimum-size change through on every stack measured, and no
# changed-but-equal night crossed it (docs/regressions.md); the size is then measured alone.
DUET_THRESHOLD = {m: 0.5 * METRICS[m].min_effect for m in DUET_METRICS}


@dataclass(frozen=True)
class DuetThresholds:
    """Per metric: the duet's threshold (in duet units) and the noise floor of one pair's log ratio."""

    threshold: dict[str, float]
    noise_floor: dict[str, float]
    alpha: float = ALPHA_DUET
    source: dict = field(default_factory=dict)  # where the numbers came from (the threshold, tonight's A/A)

    @classmethod
    def detector(cls, aa_noise: dict[str, float] | None = None, alpha: float = ALPHA_DUET) -> DuetThresholds:
        """The duet's thresholds on this host tonight: DUET_THRESHOLD, the noise floors raised to tonight's A/A
        noise where it was measured."""
        floors = {m: max(NOISE_FLOOR.get(m, DEFAULT_NOISE_FLOOR), (aa_noise or {}).get(m) or 0.0)
                  for m in DUET_METRICS}
        return cls(dict(DUET_THRESHOLD), floors, alpha,
                   {"threshold_rule": "DUET_THRESHOLD: half the metric's minimum effect",
                    "aa_noise": dict(aa_noise or {})})


def log_ratios(pairs: list[dict], metric: str, a: str = "reference", b: str = "candidate") -> list[float]:
    """log(b / a) of `metric` for each pair where both sides have a positive figure."""
    out = []
    for pair in pairs:
        va, vb = pair["sides"][a].get(metric), pair["sides"][b].get(metric)
        if va and vb and va > 0 and vb > 0:
            out.append(math.log(vb / va))
    return out


def _t(mean: float, spread: float, n: int, alpha: float) -> tuple[float, float]:
    """(t statistic, critical t one-sided at `alpha` for the interval's bounds) with n-1 degrees of freedom."""
    from scipy import stats  # lazy: scipy (about 0.3 s) only when a duet is judged

    se = spread / math.sqrt(n)
    return (mean / se if se > 0 else math.inf), float(stats.t.ppf(1 - alpha, max(1, n - 1)))


def judge_metric(ratios: list[float], metric: str, thresholds: DuetThresholds, tests: int = 1,
                 looks: int = 1) -> dict:
    """One metric of one duet at one look: mean ratio, its interval (each bound one-sided at the alpha), p-values
    both ways, the verdict (`regression`, `improvement`, `no_change` or `undecided`) and whether it is `settled`.
    `tests`: the night's duet tests; `looks`: the duet's looks (L)."""
    from scipy import stats  # lazy: scipy (about 0.3 s) only when a duet is judged

    n = len(ratios)
    effect, floor = thresholds.threshold[metric], thresholds.noise_floor[metric]
    out = {"metric": metric, "unit": METRICS[metric].unit, "better": METRICS[metric].better, "pairs": n,
           "ratio": None, "ratio_ci": None, "change_pct": None, "p_value": None, "p_improvement": None,
           "threshold_pct": 100 * effect, "noise_floor_pct": 100 * floor, "verdict": "unconfirmed",
           "settled": False, "decided": False, "looks": looks}
    if n < 2:
        out["reason"] = f"{n} pair(s) with figures: a duet needs two at least"
        return out
    mean = statistics.fmean(ratios)
    spread = max(statistics.stdev(ratios), floor)
    # The interval's bounds are one-sided at the same alpha the verdict's test uses, corrected for the night's tests
    # and the duet's looks: a duet stops adding pairs only when the verdict it will be given is settled.
    alpha = thresholds.alpha / (max(1, tests) * max(1, looks))
    t, crit = _t(mean, spread, n, alpha)
    half = crit * spread / math.sqrt(n)
    bad = bad_sign(metric) * mean  # > 0: worse
    p_bad = float(stats.t.sf(bad_sign(metric) * t, n - 1))
    p_good = float(stats.t.sf(-bad_sign(metric) * t, n - 1))
    out.update(ratio=math.exp(mean), ratio_ci=[math.exp(mean - half), math.exp(mean + half)],
               change_pct=100 * (math.exp(mean) - 1), p_value=p_bad, p_improvement=p_good, alpha=alpha,
               log_mean=mean, log_spread=spread)
    worse_lo, worse_hi = bad - half, bad + half  # the interval of the bad-signed change
    if bad >= effect and p_bad < alpha:
        out["verdict"] = "regression"
    elif -bad >= effect and p_good < alpha:
        out["verdict"] = "improvement"
    elif -effect < worse_lo and worse_hi < effect:
        out["verdict"] = "no_change"
    else:
        out["verdict"] = "undecided"
    out["settled"] = out["decided"] = worse_lo >= effect or worse_hi <= -effect or (-effect < worse_lo
                                                                                    and worse_hi < effect)
    return out


def judge_pairs(pairs: list[dict], thresholds: DuetThresholds, tests: int = 1,
                metrics: tuple[str, ...] = DUET_METRICS, looks: int = 1) -> list[dict]:
    """Every duet metric judged on the pairs (`pairs`: DuetPair dicts, candidate over reference). A pair without the
    figure on both sides is left out of that metric's verdict, and the verdict says how many were: a p99 of too few
    requests is published as a lower bound, not a figure (docs/measuring.md#confidence), so such pairs leave p99."""
    judged = []
    for metric in metrics:
        ratios = log_ratios(pairs, metric)
        verdict = judge_metric(ratios, metric, thresholds, tests, looks)
        verdict["pairs_left_out"] = len(pairs) - len(ratios)
        judged.append(verdict)
    return judged


def decided(pairs: list[dict], thresholds: DuetThresholds, tests: int = 1, looks: int = 1) -> bool:
    """Whether every metric is settled on these pairs (False: measure another pair); `tests`: the night's number of
    duet tests, `looks`: the duet's, as the verdict will be judged."""
    return all(j["settled"] for j in judge_pairs(pairs, thresholds, tests, looks=looks))


def aa_noise(pairs: list[dict], metrics: tuple[str, ...] = DUET_METRICS) -> dict[str, float | None]:
    """The spread (standard deviation) of one pair's log ratio per metric in an A/A duet: the duet's own noise."""
    out: dict[str, float | None] = {}
    for metric in metrics:
        ratios = log_ratios(pairs, metric)
        out[metric] = statistics.stdev(ratios) if len(ratios) >= 2 else None
    return out


def duet_verdict(judged: list[dict]) -> str:
    """The cell's verdict from its metrics': a regression if any regressed, else an improvement if any improved,
    else undecided if any is, else no change (unconfirmed when none could be judged)."""
    verdicts = {j["verdict"] for j in judged}
    for verdict in ("regression", "improvement", "undecided", "no_change"):
        if verdict in verdicts:
            return verdict
    return "unconfirmed"


MAX_PAIRS_NEEDED = 10_000  # beyond this many pairs "ruling it out" is not worth a figure


def pairs_to_rule_out(mean: float, spread: float, threshold: float, alpha: float) -> int | None:
    """The pairs at which an interval of this mean and spread (the worse-positive mean signed in the direction to
    rule out, the spread floored as the duet's) would lie wholly below `threshold`: its upper bound, one-sided at
    `alpha`, under it. None where no count would (the mean itself is at or beyond the threshold, or more than
    MAX_PAIRS_NEEDED)."""
    from scipy import stats  # lazy: scipy (about 0.3 s) only when a part is judged

    if mean >= threshold or spread <= 0:
        return None if mean >= threshold else 2

    def excludes(n: int) -> bool:
        return mean + float(stats.t.ppf(1 - alpha, n - 1)) * spread / math.sqrt(n) < threshold

    low, high = 2, 2
    while not excludes(high):
        if high >= MAX_PAIRS_NEEDED:
            return None
        low, high = high, min(MAX_PAIRS_NEEDED, 2 * high)
    while low < high:  # the smallest count that excludes: excludes(high), not excludes(low) unless low == 2
        middle = (low + high) // 2
        low, high = (low, middle) if excludes(middle) else (middle + 1, high)
    return high
