"""How much a metric moves from night to night when nothing changed: the noise model of the regression check.

A spread measured from three nights is not to be trusted, so the night-to-night noise of a metric is
estimated on the log scale (changes are relative) from three sources:

- a prior per metric (`Metric.prior_noise`): a quiet host's night-to-night spread, worth `PRIOR_DF` nights of
  evidence;
- the history of every cell on the same host, pooled (each cell's nights around their own winsorized mean, so
  ten cells with four nights each weigh like forty nights): the host's spread, which replaces the table's
  prior for this host;
- the history of every cell of the same server on that host, pooled the same way, with the host's spread as
  its prior;
- the cell's own history, where the server's cells are not equally quiet (`cell_noises`): a model's
  concurrency-1 cells can move several times as much night to night as its concurrency-4 cells, and one pooled
  spread is then too wide for the quiet cells (a real step goes unseen) and too narrow for the noisy ones
  (false alarms). So the cells are pooled only while they agree: when Bartlett's test finds their variances
  different (at HETEROGENEITY_ALPHA), each cell's variance is moderated towards the cells' typical one as in
  limma's empirical Bayes (Smyth 2004, `fitFDist`), the prior's degrees of freedom fitted from how much the
  cells' variances differ (fewer the more they do). Cells that agree keep the pooled spread and its many
  degrees of freedom: a quiet host loses nothing;
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

from tasks.core.metrics import DEFAULT_PRIOR_NOISE, METRICS, metrics_where, number

# log-scale standard deviation of one night's value when nothing changed, on a quiet host: the lower end of
# what recorded real nights show (benchmarks/regression_nights.py). Deliberately a quiet host's: a noisy
# host's own pooled nights outweigh it within a few nights, while a prior as loud as a shared VM's would blind
# the check on a quiet one.
# (`Metric.prior_noise` in tasks/core/metrics.py)
PRIOR_DF = 4.0
WINSOR_SIGMAS = 3.0  # a night further than this from its cell's median counts as if it were this far
MIN_CELLS_TO_FIT = 3  # cells of a server with MIN_CELL_DF+ df before their variances are told apart
MIN_CELL_DF = 2
HETEROGENEITY_ALPHA = 0.01  # cells are told apart only when Bartlett's test says they differ at this level
CI_Z = 1.959964  # the throughput interval columns hold a 95 % interval
# Metrics whose within-run spread the windows' throughput CV stands for (closed loop: latency ~ load / rate).
LOAD_METRICS = metrics_where("window_spread")


@dataclass(frozen=True)
class Noise:
    """The pooled night-to-night noise of one metric for one server on one host (log scale)."""

    sigma: float  # standard deviation of one night's log value
    df: float  # degrees of freedom of `sigma` (prior + pooled residuals)
    cells: int  # cells whose nights were pooled
    nights: int  # nights pooled (over all those cells)
    prior: float  # the metric's prior sigma
    moderated: bool = False  # one cell's own variance moderated towards its server's cells' (`cell_noises`)

    @property
    def sigma_pct(self) -> float:
        return 100.0 * (math.exp(self.sigma) - 1.0)

    def describe(self) -> str:
        prior_pct = 100 * (math.exp(self.prior) - 1)
        if self.moderated:  # per cell (`cell_noises`): the prior is the server's cells' typical spread
            return (f"{self.sigma_pct:.1f} % per night (log sd {self.sigma:.3f}, {self.df:.0f} df: this cell's "
                    f"{self.nights} nights, moderated towards its server's cells' typical {prior_pct:.0f} %)")
        return (f"{self.sigma_pct:.1f} % per night (log sd {self.sigma:.3f}, {self.df:.0f} df: the host's spread "
                f"{prior_pct:.0f} % worth {PRIOR_DF:.0f} nights + {self.nights} nights of "
                f"{self.cells} cell(s) of this server)")


def prior_sigma(metric: str) -> float:
    return METRICS[metric].prior_noise if metric in METRICS else DEFAULT_PRIOR_NOISE


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


def cell_residuals(cells: list[list[float]], prior: float) -> list[tuple[float, int, int] | None]:
    """Per cell: (sum of squared residuals around its own mean, their degrees of freedom, nights), each night
    winsorized at WINSOR_SIGMAS robust spreads from its cell's median (the larger of the cell's own robust
    spread and all the cells' together: one wild night is clipped, a cell noisier than the rest is not); None
    for a cell with fewer than two nights."""
    import numpy as np

    groups = [np.asarray(c, dtype=float) if len(c) >= 2 else None for c in cells]
    present = [g for g in groups if g is not None]
    if not present:
        return [None] * len(cells)
    deviations = np.concatenate([g - np.median(g) for g in present])
    robust = max(1.4826 * float(np.median(np.abs(deviations))), prior / 4)  # never tighter than a quarter prior
    out: list[tuple[float, int, int] | None] = []
    for g in groups:
        if g is None:
            out.append(None)
            continue
        median = float(np.median(g))
        bound = WINSOR_SIGMAS * max(robust, 1.4826 * float(np.median(np.abs(g - median))))
        clipped = np.clip(g, median - bound, median + bound)
        out.append((float(np.sum((clipped - clipped.mean()) ** 2)), len(g) - 1, len(g)))
    return out


def pooled_noise(metric: str, cells: list[list[float]], prior: float | None = None) -> Noise:
    """Pool the log values of each cell's baseline nights (one list per cell) with a prior (default: the
    metric's prior (`Metric.prior_noise`); `cell_noises` passes the host's own pooled spread for a server's pool)."""
    prior = prior_sigma(metric) if prior is None else prior
    found = [r for r in cell_residuals(cells, prior) if r is not None]
    if not found:
        return Noise(prior, PRIOR_DF, 0, 0, prior)
    ss, df, nights = (sum(r[i] for r in found) for i in range(3))
    sigma = math.sqrt((PRIOR_DF * prior**2 + ss) / (PRIOR_DF + df))
    return Noise(sigma, PRIOR_DF + df, len(found), nights, prior)


def equal_variances_p(residuals: list[tuple[float, int, int]]) -> float:
    """Bartlett's test that the cells (their (sum of squares, df, nights)) share one variance: its p-value."""
    from scipy.stats import chi2

    k = len(residuals)
    dfs = [df for _, df, _ in residuals]
    variances = [max(ss / df, 1e-12) for ss, df, _ in residuals]
    total_df = sum(dfs)
    pooled = sum(v * d for v, d in zip(variances, dfs, strict=True)) / total_df
    statistic = total_df * math.log(pooled) - sum(d * math.log(v) for v, d in zip(variances, dfs, strict=True))
    statistic /= 1 + (sum(1 / d for d in dfs) - 1 / total_df) / (3 * (k - 1))
    return float(chi2.sf(statistic, k - 1))


def fit_variance_prior(variances: list[float], dfs: list[float]) -> tuple[float, float]:
    """(d0, s0^2): the scaled inverse chi-square prior that the cells' sample variances (with `dfs` degrees of
    freedom each) are drawn from, fitted by moments on the log scale (limma's `fitFDist`). d0 is infinite when
    the variances differ no more than their degrees of freedom explain: one common variance s0^2."""
    import numpy as np
    from scipy.special import digamma, polygamma

    s2 = np.maximum(np.asarray(variances, dtype=float), 1e-12)
    d = np.asarray(dfs, dtype=float)
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    e_mean = float(e.mean())
    e_var = float(np.sum((e - e_mean) ** 2) / (len(e) - 1) - np.mean(polygamma(1, d / 2)))
    if e_var <= 0:
        return math.inf, math.exp(e_mean)
    d0 = 2 * _trigamma_inverse(e_var)
    return d0, math.exp(e_mean + float(digamma(d0 / 2)) - math.log(d0 / 2))


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, by Newton's method from 0.5 + 1/x (as limma's `trigammaInverse`)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def cell_noises(metric: str, by_server: dict[str, list[list[float]]]) -> dict[str, list[Noise]]:
    """Per cell on one host (`by_server`: each server's cells, each a list of its baseline nights' log values):
    the cell's noise, in the same order.

    Three levels, each the prior of the next: every cell of every server on the host pooled (with the metric's
    `prior_noise` as prior); each server's cells pooled (with the host's spread as prior); each cell's own nights
    (with its server's spread as prior). A cell with many nights is judged by its own spread, a cell with few
    by its server's, a new server by the host's."""
    host = pooled_noise(metric, [c for cells in by_server.values() for c in cells])
    return {server: _moderated(metric, cells, pooled_noise(metric, cells, prior=host.sigma))
            for server, cells in by_server.items()}


def _moderated(metric: str, cells: list[list[float]], server: Noise) -> list[Noise]:
    """Each cell's noise: the server's pooled noise where its cells agree (or too few cells have nights to tell),
    else the cell's own variance moderated towards the cells' typical one (`fit_variance_prior`)."""
    residuals = cell_residuals(cells, server.prior)
    measured = [r for r in residuals if r is not None and r[1] >= MIN_CELL_DF]
    if len(measured) < MIN_CELLS_TO_FIT or equal_variances_p(measured) >= HETEROGENEITY_ALPHA:
        return [server] * len(cells)
    d0, s0_sq = fit_variance_prior([ss / df for ss, df, _ in measured], [df for _, df, _ in measured])
    if not math.isfinite(d0):
        return [server] * len(cells)
    out = []
    for r in residuals:
        ss, df, nights = r if r is not None else (0.0, 0, 0)
        out.append(Noise(math.sqrt((d0 * s0_sq + ss) / (d0 + df)), d0 + df, 1, nights, math.sqrt(s0_sq),
                         moderated=True))
    return out


def winsorized_mean(values: list[float], sigma: float) -> float:
    """Mean of `values` with each clipped to median +- WINSOR_SIGMAS * sigma (one wild night cannot drag it)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    median = float(np.median(v))
    return float(np.clip(v, median - WINSOR_SIGMAS * sigma, median + WINSOR_SIGMAS * sigma).mean())


_num = number
