"""How much a metric moves from night to night when nothing changed: the noise model of the regression check.

A spread measured from three nights is not to be trusted, so the night-to-night noise of a metric is
estimated on the log scale (changes are relative) from three sources:

- a prior per metric (`PRIOR_NOISE`): a quiet host's night-to-night spread, worth `PRIOR_DF` nights of
  evidence;
- the history of every cell on the same host, pooled (each cell's nights around their own winsorized mean, so
  ten cells with four nights each weigh like forty nights): the host's spread, which replaces the table's
  prior for this host;
- the history of every cell of the same server on that host, pooled the same way, with the host's spread as
  its prior (`server_noises`);
- each row's own within-run spread: the windows' throughput CV (`cv`, `windows`) or the throughput's 95 %
  interval (`throughput_rps_ci_low/high`) where the row has it. A night whose run was noisier inside than the
  baseline's runs were (a neighbour stealing the CPU for a few seconds) gets that extra variance, so it needs
  a larger change to be believed.

The pooled variance is the prior and the data weighted by their degrees of freedom (as limma's moderated t):
    sigma^2 = (PRIOR_DF * prior^2 + sum of squared residuals) / (PRIOR_DF + residual degrees of freedom)
and the tests use Student's t with PRIOR_DF + residual degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tasks.metrics import number

# log-scale standard deviation of one night's value when nothing changed, on a quiet host: the lower end of
# what the recorded real nights showed (benchmarks/regression_nights.py). Deliberately a quiet host's: a noisy
# host's own pooled nights outweigh it within a few nights, while a prior as loud as a shared VM's would blind
# the check on a quiet one.
PRIOR_NOISE: dict[str, float] = {
    "throughput_rps": 0.05, "throughput_sps": 0.05, "latency_ms_mean": 0.05, "latency_ms_p50": 0.04,
    "latency_ms_p90": 0.06, "latency_ms_p95": 0.08, "latency_ms_p99": 0.12, "latency_ms_p999": 0.20,
    "startup_s": 0.15,
}
DEFAULT_PRIOR_NOISE = 0.10
PRIOR_DF = 4.0
WINSOR_SIGMAS = 3.0  # a night further than this from its cell's median counts as if it were this far
CI_Z = 1.959964  # the throughput interval columns hold a 95 % interval
# Metrics whose within-run spread the windows' throughput CV stands for (closed loop: latency ~ load / rate).
LOAD_METRICS = ("throughput_rps", "throughput_sps", "latency_ms_mean", "latency_ms_p50", "latency_ms_p90",
                "latency_ms_p95", "latency_ms_p99", "latency_ms_p999")


@dataclass(frozen=True)
class Noise:
    """The pooled night-to-night noise of one metric for one server on one host (log scale)."""

    sigma: float  # standard deviation of one night's log value
    df: float  # degrees of freedom of `sigma` (prior + pooled residuals)
    cells: int  # cells whose nights were pooled
    nights: int  # nights pooled (over all those cells)
    prior: float  # the metric's prior sigma

    @property
    def sigma_pct(self) -> float:
        return 100.0 * (math.exp(self.sigma) - 1.0)

    def describe(self) -> str:
        return (f"{self.sigma_pct:.1f} % per night (log sd {self.sigma:.3f}, {self.df:.0f} df: the host's spread "
                f"{100 * (math.exp(self.prior) - 1):.0f} % worth {PRIOR_DF:.0f} nights + {self.nights} nights of "
                f"{self.cells} cell(s) of this server)")


def prior_sigma(metric: str) -> float:
    return PRIOR_NOISE.get(metric, DEFAULT_PRIOR_NOISE)


def row_se(row: dict, metric: str) -> float:
    """The row's own within-run standard error of `metric`, relative (log scale); 0 when it has none."""
    if metric not in LOAD_METRICS:
        return 0.0
    low, high = _num(row.get("throughput_rps_ci_low")), _num(row.get("throughput_rps_ci_high"))
    if low and high and high > low > 0:
        return (math.log(high) - math.log(low)) / (2 * CI_Z)
    cv, windows = _num(row.get("cv")), _num(row.get("windows"))
    if cv is None or not windows or windows < 2:
        return 0.0
    return float(cv) / math.sqrt(windows)


def pooled_noise(metric: str, cells: list[list[float]], prior: float | None = None) -> Noise:
    """Pool the log values of each cell's baseline nights (one list per cell) with a prior (default: the
    metric's `PRIOR_NOISE`; `host_noise` passes the host's own pooled spread)."""
    import numpy as np

    prior = prior_sigma(metric) if prior is None else prior
    groups = [np.asarray(c, dtype=float) for c in cells if len(c) >= 2]
    if not groups:
        return Noise(prior, PRIOR_DF, 0, 0, prior)
    medians = [float(np.median(g)) for g in groups]
    deviations = np.concatenate([g - m for g, m in zip(groups, medians, strict=True)])
    robust = 1.4826 * float(np.median(np.abs(deviations)))
    bound = WINSOR_SIGMAS * max(robust, prior / 4)  # never clip tighter than a quarter of the prior
    ss, df = 0.0, 0
    for g, m in zip(groups, medians, strict=True):
        clipped = np.clip(g, m - bound, m + bound)
        ss += float(np.sum((clipped - clipped.mean()) ** 2))
        df += len(g) - 1
    sigma = math.sqrt((PRIOR_DF * prior**2 + ss) / (PRIOR_DF + df))
    return Noise(sigma, PRIOR_DF + df, len(groups), sum(len(g) for g in groups), prior)


def server_noises(metric: str, by_server: dict[str, list[list[float]]]) -> dict[str, Noise]:
    """Per server on one host: its cells pooled, with the host's spread as the prior.

    Two levels: every cell of every server on the host is pooled first (with the metric's PRIOR_NOISE as
    prior), and that host-wide spread is the prior of each server's own pool; a server with many nights is
    judged by its own spread, a new one by the host's."""
    host = pooled_noise(metric, [c for cells in by_server.values() for c in cells])
    return {server: pooled_noise(metric, cells, prior=host.sigma) for server, cells in by_server.items()}


def winsorized_mean(values: list[float], sigma: float) -> float:
    """Mean of `values` with each clipped to median +- WINSOR_SIGMAS * sigma (one wild night cannot drag it)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    median = float(np.median(v))
    return float(np.clip(v, median - WINSOR_SIGMAS * sigma, median + WINSOR_SIGMAS * sigma).mean())


_num = number
