"""How sure a published latency claim is: percentiles with their count and interval, bounds as decisions.

The rules, stated once (docs/measuring.md#confidence explains them for readers of the report):

- A request is a draw. Every request the load generator meant to send counts, in request order: a timeout or an
  unsent request counts at its censored latency, so it is a slow request. The coordinated-omission samples that
  stand in for requests never sent carry weight in the latency distribution but are copies of one observed
  stall, not independent draws, so their weights do not add to the count.
- Requests of a real stream are not independent: slow ones come in bursts. The effective count n / tau, tau the
  integrated autocorrelation time of the 0/1 series the claim rests on (n (1 - r) / (1 + r) for a two-state Markov
  chain with lag-1 autocorrelation r), is the number of independent draws the series is worth; intervals and
  decisions use it, not n. A sample holding only a few bursts cannot show how bursty the stream is.
- A percentile is published with a distribution-free two-sided 95 % interval from the binomial order statistics of
  the effective count (`order_statistic_ranks`). Where the effective count is below 1 / (1 - q) the estimate would
  be the sample maximum: the claim is published as a lower bound ("at least the maximum"), never as the figure.
- "The q-th percentile is within the bound" is a decision on the requests slower than the bound: Clopper-Pearson
  one-sided bounds of the exceedance rate; `holds` when the upper bound is below 1 - q, `fails` when the lower
  bound is above it, `undecided` otherwise, with the further requests that would decide it at the observed rate.
- A point that runs longer while undecided looks at its data several times; stopping at the first decision is
  optional stopping. The confidence is split over the planned looks (Bonferroni: alpha / looks at each), which
  keeps the error rate at most alpha however early a caller stops at one of them.
- The default confidence is 95 %: with no slow request it takes 299 requests to hold a p99 (0.99^299 < 0.05),
  which a nightly on a laptop affords for slow models; MLPerf tests at 99 %, which takes 459. A user sets the
  confidence Param to 99 to match MLPerf.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tasks.core.errors import ConfigError

INTERVAL_PCT = 95.0  # the two-sided interval published beside each percentile
DECISION_PCT = 95.0  # default confidence of a bound decision (a Param overrides it)
VERDICTS = ("holds", "fails", "undecided")
MAX_MORE_REQUESTS = 10**9  # beyond this no count is offered: the observed rate sits (almost) at the bound


def effective_count(indicator: np.ndarray) -> float:
    """The number of independent draws a 0/1 series (in request order) is worth: n / tau, tau the larger of two
    estimates of how much dependence inflates the variance of its count.
    - Its integrated autocorrelation time 1 + 2 sum_k rho_k, summed by Geyer's initial monotone sequence (pairs
      rho_2m + rho_2m+1 while positive and decreasing). For a two-state Markov chain with lag-1 autocorrelation r
      this is (1 + r) / (1 - r); the whole sum also catches slow bursts whose requests exceed only some of the time
      (a hidden state), where the lag-1 term alone overstates the count.
    - Where one outcome is rare (at most CLUSTER_MAX_SHARE: a tail percentile's indicator, a bound's exceedances),
      its clusters' sizes (`cluster_tau`): a sample that holds only a few bursts shows each burst's size plainly,
      where its autocorrelations are too noisy to (Geyer's sum alone held a p99 interval to 90-93 % coverage on
      such streams).
    A series without positive correlation, or a constant one, -> n; at least 1. Bursts make it smaller."""
    x = np.asarray(indicator, dtype=float)
    n = len(x)
    centred = x - x.mean() if n else x
    if n < 3 or not centred.any():
        return float(n)
    spectrum = np.fft.rfft(centred, 2 * n)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    rho = autocovariance / autocovariance[0]
    pairs = rho[: n - n % 2].reshape(-1, 2).sum(axis=1)  # Gamma_m = rho_2m + rho_2m+1, Gamma_0 = 1 + rho_1
    positive = int(np.argmax(pairs <= 0)) if (pairs <= 0).any() else len(pairs)
    tau = 2.0 * float(np.minimum.accumulate(pairs[:positive]).sum()) - 1.0
    rare = x > 0.5 if x.mean() <= 0.5 else x <= 0.5
    if rare.mean() <= CLUSTER_MAX_SHARE:
        tau = max(tau, cluster_tau(rare))
    return float(min(max(n / tau, 1.0), n)) if tau > 0 else float(n)


CLUSTER_MAX_SHARE = 0.05  # an outcome this rare is clustered (a tail's); a common one's runs are not bursts
CLUSTER_CHANCE = 0.05  # independent rare events fall within one cluster's gap of each other this often


def cluster_tau(rare: np.ndarray) -> float:
    """How much clusters of a rare event inflate its count's variance: sum(S^2) / sum(S) over the cluster sizes S
    (a compound Poisson count's variance over its mean; 1 when every event stands alone). Events belong to one
    cluster when fewer than CLUSTER_CHANCE / p others lie between them (p the event's share: independent events
    fall that close about CLUSTER_CHANCE of the time) - runs declustering, as extreme-value statistics estimates an
    extremal index."""
    where = np.flatnonzero(np.asarray(rare, dtype=bool))
    if len(where) < 2:
        return 1.0
    gap = max(1, int(CLUSTER_CHANCE * len(rare) / len(where)))
    ends = np.flatnonzero(np.r_[True, np.diff(where) > gap, True])
    sizes = np.diff(ends).astype(float)
    # independent events merge by chance (a pair in about CLUSTER_CHANCE of them, adding 2 CLUSTER_CHANCE to the
    # ratio): that much is taken off, so a stream without bursts keeps its count
    return max(1.0, float((sizes ** 2).sum() / sizes.sum()) - 2.0 * CLUSTER_CHANCE)


def order_statistic_ranks(n: float, q: float, interval_pct: float = INTERVAL_PCT) -> tuple[int, int]:
    """1-based ranks (lo, hi) of the distribution-free two-sided interval for the q-th percentile (q in percent)
    of n independent draws: P(X_(lo) <= xi_q <= X_(hi)) >= interval_pct for every n, each side missing with
    probability at most (1 - interval_pct) / 2. With B ~ Binomial(n, q/100) the draws at or below xi_q,
    X_(lo) > xi_q iff B < lo and X_(hi) < xi_q iff B >= hi, so lo = ppf(a/2) and hi = ppf(1 - a/2) + 1.
    n may be a non-integer effective count: it is floored. lo may be 0 (no lower end) and hi may be n + 1
    (no upper end: the interval is open above)."""
    if not 0.0 < q < 100.0:
        raise ConfigError("q", q, "a percentile level must lie strictly between 0 and 100")
    if not 0.0 < interval_pct < 100.0:
        raise ConfigError("interval_pct", interval_pct, "a confidence must lie strictly between 0 and 100")
    return _ranks(int(math.floor(n)), float(q), float(interval_pct))


@lru_cache(maxsize=4096)
def _ranks(m: int, q: float, interval_pct: float) -> tuple[int, int]:
    if m < 1:
        return 0, 1
    half_alpha = (1.0 - interval_pct / 100.0) / 2.0
    from scipy.stats import binom  # lazy: a load generator's worker imports this module and never decides

    lo = int(binom.ppf(half_alpha, m, q / 100.0))
    hi = int(binom.ppf(1.0 - half_alpha, m, q / 100.0)) + 1
    return lo, min(hi, m + 1)


@dataclass(frozen=True)
class PercentileClaim:
    q: float  # percent, e.g. 99.0
    count: int  # real requests it rests on (the caller's n)
    effective: float  # effective_count at this level (<= count)
    estimate: float | None  # the percentile; None where it is only a lower bound
    at_least: float | None  # the sample maximum, where effective < 1 / (1 - q/100) (the estimate would be it)
    ci_low: float | None  # None: no lower end (rank 0)
    ci_high: float | None  # None: open above (rank beyond the sample)


def _weighted_level(sorted_values: np.ndarray, cumulative: np.ndarray, level: float) -> float:
    """The smallest value whose cumulative weight reaches `level` (a fraction) of the total: the inverted CDF,
    every published percentile's rule (a relative 1e-12 absorbs the rounding of r / m)."""
    index = int(np.searchsorted(cumulative, cumulative[-1] * level * (1.0 - 1e-12), side="left"))
    return float(sorted_values[min(index, len(sorted_values) - 1)])


def percentile_claim(values: np.ndarray, weights: np.ndarray, ordered: np.ndarray, q: float,
                     interval_pct: float = INTERVAL_PCT) -> PercentileClaim:
    """The q-th percentile of weighted latency samples with its count, effective count and interval.
    `values`/`weights`: every sample with its weight (real requests weight 1; coordinated-omission stand-ins carry
    weights but are not draws). `ordered`: the real requests' latencies in request order; its length is the count
    and its series `ordered <= estimate` gives the effective count. The interval's ranks come from the effective
    count m and are read off the weighted CDF at levels lo/m and hi/m (with unit weights and no stand-ins exactly
    the order statistics X_(lo), X_(hi))."""
    ordered = np.asarray(ordered, dtype=float)
    values, weights = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if len(values) == 0 or len(ordered) == 0:
        return PercentileClaim(q, len(ordered), 0.0, None, None, None, None)
    order = np.argsort(values, kind="stable")
    sorted_values, cumulative = values[order], np.cumsum(weights[order])
    index = int(np.searchsorted(cumulative, cumulative[-1] * q / 100.0, side="left"))
    value = float(sorted_values[min(index, len(sorted_values) - 1)])
    effective = min(effective_count(ordered <= value), float(len(ordered)))
    lo, hi = order_statistic_ranks(effective, q, interval_pct)
    m = int(math.floor(effective))
    ci_low = _weighted_level(sorted_values, cumulative, lo / m) if lo >= 1 else None
    ci_high = _weighted_level(sorted_values, cumulative, hi / m) if hi <= m else None
    if lower_bound_only(effective, q):
        return PercentileClaim(q, len(ordered), effective, None, float(sorted_values[-1]), ci_low, ci_high)
    return PercentileClaim(q, len(ordered), effective, value, None, ci_low, ci_high)


@dataclass(frozen=True)
class BoundDecision:
    verdict: str  # one of VERDICTS
    bound_ms: float
    q: float  # percent (99.0)
    count: int  # real requests judged
    effective: float  # effective_count of the exceedance series
    exceed: int  # real requests slower than the bound
    rate_low: float  # one-sided lower confidence bound of the exceedance rate (fraction), 0 allowed
    rate_high: float  # one-sided upper confidence bound (fraction)
    more_requests: int | None  # undecided only: further requests that would decide it at the observed rate
    looks: int  # planned looks the confidence was spread over
    confidence_pct: float


def _rate_bounds(x: float, n: float, alpha: float) -> tuple[float, float]:
    """Clopper-Pearson one-sided bounds (each at level alpha) of a rate from x of n (both may be fractional)."""
    if n <= 0:
        return 0.0, 1.0
    from scipy.special import betaincinv  # lazy: a load generator's worker imports this module and never decides

    low = float(betaincinv(x, n - x + 1.0, alpha)) if x > 0 else 0.0
    high = float(betaincinv(x + 1.0, n - x, 1.0 - alpha)) if x < n else 1.0
    return low, high


def _verdict(low: float, high: float, limit: float) -> str:
    return "holds" if high < limit else "fails" if low > limit else "undecided"


def _alpha(confidence_pct: float, looks: int) -> float:
    if not 0.0 < confidence_pct < 100.0:
        raise ConfigError("confidence_pct", confidence_pct, "a confidence must lie strictly between 0 and 100")
    if looks < 1:
        raise ConfigError("looks", looks, "at least one planned look")
    return (1.0 - confidence_pct / 100.0) / looks


def decide_bound(ordered: np.ndarray, bound_ms: float, q: float = 99.0, confidence_pct: float = DECISION_PCT,
                 looks: int = 1) -> BoundDecision:
    """"The q-th percentile is within bound_ms", decided on the exceedance series ordered > bound_ms (timeouts and
    unsent requests sit in `ordered` at their censored latency, so they count as slow): `decide_counts` on its
    count, effective count and exceedances."""
    exceed, effective = exceedance(ordered, bound_ms)
    return decide_counts(len(ordered), effective, exceed, bound_ms, q, confidence_pct, looks)


def decide_counts(count: int, effective: float, exceed: int, bound_ms: float, q: float = 99.0,
                  confidence_pct: float = DECISION_PCT, looks: int = 1) -> BoundDecision:
    """The decision from what a point counted (`exceedance`): Clopper-Pearson one-sided bounds at
    alpha = (1 - confidence) / looks on the effective count n_eff with x_eff = exceed * n_eff / n. Undecided:
    `more_requests` is the smallest m > 0 deciding it at n + m requests with the same observed rate and the same
    n_eff / n (doubling then bisection; None when the rate sits at the bound or beyond 10**9)."""
    if not 0.0 < q < 100.0:
        raise ConfigError("q", q, "a percentile level must lie strictly between 0 and 100")
    alpha, limit = _alpha(confidence_pct, looks), 1.0 - q / 100.0
    n = int(count)
    effective = min(float(effective), float(n)) if n else 0.0
    rate, ratio = (exceed / n, effective / n) if n else (0.0, 1.0)

    def verdict_at(total: int) -> str:
        return _verdict(*_rate_bounds(rate * ratio * total, ratio * total, alpha), limit)

    low, high = _rate_bounds(exceed * ratio, effective, alpha)
    verdict, more = _verdict(low, high, limit), None
    if verdict == "undecided" and not math.isclose(rate, limit, rel_tol=1e-12):
        step = 1
        while step <= MAX_MORE_REQUESTS and verdict_at(n + step) == "undecided":
            step *= 2
        if step <= MAX_MORE_REQUESTS:
            below, above = step // 2, step  # undecided at n + below (or below == 0), decided at n + above
            while above - below > 1:
                middle = (below + above) // 2
                below, above = (below, middle) if verdict_at(n + middle) != "undecided" else (middle, above)
            more = above
    return BoundDecision(verdict, float(bound_ms), q, n, effective, int(exceed), low, high, more, looks,
                         confidence_pct)


def requests_to_hold(q: float = 99.0, confidence_pct: float = DECISION_PCT, looks: int = 1) -> int:
    """The fewest independent requests, none slower than the bound, that make `holds`: the smallest n with
    (q/100)^n < alpha / looks (299 at 99 % and 95 % with one look, 459 at 99 % confidence); the plan uses it to
    estimate how long a point must run."""
    alpha = _alpha(confidence_pct, looks)
    return int(math.floor(math.log(alpha) / math.log(q / 100.0))) + 1


# --- what the rest of the project decides with -------------------------------------------------------------------

# the published percentiles' levels, by column
PERCENTILE_LEVELS = {"latency_ms_p50": 50.0, "latency_ms_p90": 90.0, "latency_ms_p95": 95.0, "latency_ms_p99": 99.0,
                     "latency_ms_p999": 99.9}


def lower_bound_only(count: float, q: float) -> bool:
    """Whether `count` independent requests are too few for the q-th percentile (fewer than 1 / (1 - q)): its
    estimate would be their maximum, a lower bound, not a figure."""
    return count < round(100.0 / (100.0 - q), 9)


JUDGED_BOUNDS_MS = (10.0, 50.0, 200.0)  # the p99 bounds the report ranks on, beside the run's own


def judged_bounds(run_bound_ms: float | None) -> tuple[float, ...]:
    """The bounds a point's requests are counted against and the report ranks on: JUDGED_BOUNDS_MS and the run's
    own `p99_bound_ms` (the nightly suite's 1,000 ms), in order."""
    bounds = set(JUDGED_BOUNDS_MS)
    if run_bound_ms is not None:
        bounds.add(float(run_bound_ms))
    return tuple(sorted(bounds))


def exceedance(ordered: np.ndarray, bound_ms: float) -> tuple[int, float]:
    """(requests slower than `bound_ms`, the effective count of that 0/1 series): what `decide_counts` takes, so a
    point's summary can carry it for every bound without its requests."""
    slow = np.asarray(ordered) > bound_ms
    return int(slow.sum()), float(effective_count(slow.astype(float)))


@dataclass(frozen=True)
class BoundRule:
    """"The p99 is within `bound_ms`" at `confidence_pct` over `looks` planned looks: the one rule a sweep, the tuner
    and the report decide a bound with. `decide` reads what a load point's summary counted against the bound
    (`latency_samples`, `bound_counts`: tasks/loadgen/measurement.py); None where it was not counted."""

    bound_ms: float
    confidence_pct: float = DECISION_PCT
    looks: int = 1
    q: float = 99.0

    def decide(self, measurement: Any) -> BoundDecision | None:
        for bound, exceed, effective in getattr(measurement, "bound_counts", ()):
            if math.isclose(bound, self.bound_ms):
                return decide_counts(int(measurement.latency_samples), float(effective), int(exceed), self.bound_ms,
                                     self.q, self.confidence_pct, self.looks)
        return None


def row_decision(row: dict, bound_ms: float) -> dict | None:
    """A published row's decision at `bound_ms` (its `p99_bounds`, schema 1.8): verdict, exceed, effective,
    more_requests; None where the row has none at that bound (an older row, a failed one)."""
    text = row.get("p99_bounds")
    if not isinstance(text, str) or not text:
        return None
    found = json.loads(text)
    for key, decision in found.items():
        if math.isclose(float(key), float(bound_ms)):
            return decision
    return None


def row_verdict(row: dict, bound_ms: float) -> str | None:
    """`holds`, `fails` or `undecided` for "this row's p99 is within `bound_ms`"; None where it was not decided."""
    decision = row_decision(row, bound_ms)
    return None if decision is None else decision["verdict"]
