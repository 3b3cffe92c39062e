"""The noise model (tasks/regress/noise.py): pooled over cells with a prior, a row's own spread, cells whose
noise differs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tasks.regress.noise import PRIOR_DF, pooled_noise, row_se


def test_noise_is_pooled_over_cells_and_weighted_with_the_prior():
    rng = np.random.default_rng(13)
    cells = [list(0.05 * rng.standard_normal(4)) for _ in range(10)]
    pooled = pooled_noise("throughput_rps", cells, prior=0.5)
    assert pooled.df == PRIOR_DF + 30 and pooled.cells == 10
    assert 0.05 < pooled.sigma < 0.2  # 30 residual df outweigh a loud prior
    assert pooled_noise("throughput_rps", [[0.0, 0.01]], prior=0.5).sigma > 0.3  # one cell, 1 df: the prior rules


def test_a_rows_own_spread_comes_from_its_interval_or_its_windows():
    assert row_se({"cv": 0.2, "windows": 4}, "throughput_rps") == pytest.approx(0.1)
    assert row_se({"throughput_rps_ci_low": 900.0, "throughput_rps_ci_high": 1100.0, "cv": 0.5, "windows": 4},
                  "throughput_rps") == pytest.approx(math.log(1100 / 900) / (2 * 1.959964))
    assert row_se({"cv": 0.2, "windows": 4}, "startup_s") == 0.0


def test_cells_that_differ_get_their_own_noise_and_cells_that_agree_are_pooled():
    from scipy.stats import bartlett

    from tasks.regress.noise import cell_noises, cell_residuals, equal_variances_p

    rng = np.random.default_rng(7)
    alike = [list(rng.normal(0, 0.03, 10)) for _ in range(6)]
    raw = [(float(np.sum((np.asarray(c) - np.mean(c)) ** 2)), len(c) - 1, len(c)) for c in alike]
    assert equal_variances_p(raw) == pytest.approx(bartlett(*alike).pvalue)  # Bartlett's, from sums of squares
    assert equal_variances_p(cell_residuals(alike, 0.03)) > 0.01
    pooled = cell_noises("throughput_rps", {"custom": alike})["custom"]
    assert len({n.sigma for n in pooled}) == 1 and not pooled[0].moderated
    differ = [list(rng.normal(0, sd, 10)) for sd in (0.24, 0.03, 0.15, 0.04)]
    own = cell_noises("throughput_rps", {"custom": differ})["custom"]
    assert all(n.moderated for n in own)
    assert own[0].sigma > 2 * own[1].sigma and own[2].sigma > 2 * own[3].sigma  # noisy cells wide, quiet ones narrow
