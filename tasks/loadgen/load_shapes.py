"""Load shapes: step, ramp, spike and a day's curve, each a generated trace with its parameters recorded.

A shape is a rate over time, r(t) requests/s on [0, length_s], written as its integral R(t) (the requests due by
t, exact for each shape). Its arrivals are where R crosses each whole number: `constant` puts arrival k at
R(t) = k (evenly spaced at any steady stretch, as the constant open loop is), `poisson` at R(t) = E_k, E_k the
running sum of unit exponential gaps drawn from `seed` (a Poisson stream whose rate follows r: time rescaling).
The trace's `shape` keeps the kind, the parameters, the arrival and the seed, so the same parameters make the
same trace, digest and all. A trace ends at its last arrival.

    step    rates_rps [r1, r2, ...], each for step_s
    ramp    from_rps to to_rps, linearly, over length_s
    spike   base_rps over length_s, spike_rps from spike_at_s for spike_s
    day     one day's curve in length_s: mean_rps, the trough at the start and the end, the peak (peak_ratio x the
            mean) half-way: r(t) = mean_rps x (1 - (peak_ratio - 1) cos(2 pi t / length_s))
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tasks.core.errors import ConfigError
from tasks.loadgen.trace import MAX_ARRIVALS, NS, Trace

ARRIVALS = ("constant", "poisson")
GRID_S = 0.001  # the cumulative rate is inverted on this grid (exact between a step's edges, which fall on it)
MAX_LENGTH_S = 86_400.0
WHOLE_EPS = 1e-6  # R(length) within this of a whole number counts as it (float sums must not add an arrival)
Cumulative = Callable[[np.ndarray], np.ndarray]  # R(t): the requests due by t seconds


def _positive(params: dict, name: str, *, zero: bool = False) -> float:
    value = params.get(name)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and (
        value >= 0 if zero else value > 0)
    if not ok:
        raise ConfigError(f"shape {name}", value, "must be a number " + (">= 0" if zero else "> 0"))
    return float(value)


def _length(params: dict) -> float:
    length_s = _positive(params, "length_s")
    if length_s > MAX_LENGTH_S:
        raise ConfigError("shape length_s", length_s, f"must be at most {MAX_LENGTH_S:g} s")
    return length_s


def _step(params: dict) -> tuple[float, Cumulative]:
    rates = params.get("rates_rps")
    if not isinstance(rates, list) or not rates:
        raise ConfigError("shape rates_rps", rates, "must be a list of rates (req/s), one per step")
    rates = np.asarray([_positive({"rates_rps": r}, "rates_rps", zero=True) for r in rates])
    step_s = _positive(params, "step_s")
    before = np.concatenate([[0.0], np.cumsum(rates * step_s)])  # R at each step's start

    def cumulative(t: np.ndarray) -> np.ndarray:
        k = np.minimum(np.floor(t / step_s).astype(np.int64), len(rates) - 1)
        return before[k] + rates[k] * (t - k * step_s)

    return step_s * len(rates), cumulative


def _ramp(params: dict) -> tuple[float, Cumulative]:
    low, high = _positive(params, "from_rps", zero=True), _positive(params, "to_rps", zero=True)
    length_s = _length(params)
    return length_s, lambda t: low * t + (high - low) * t * t / (2 * length_s)


def _spike(params: dict) -> tuple[float, Cumulative]:
    base, spike, length_s = _positive(params, "base_rps", zero=True), _positive(params, "spike_rps"), _length(params)
    at_s, spike_s = _positive(params, "spike_at_s", zero=True), _positive(params, "spike_s")
    if at_s + spike_s > length_s:
        raise ConfigError("shape spike_at_s", at_s, f"+ spike_s ({spike_s:g}) must end within length_s ({length_s:g})")
    return length_s, lambda t: base * t + (spike - base) * np.clip(t - at_s, 0.0, spike_s)


def _day(params: dict) -> tuple[float, Cumulative]:
    mean, ratio, length_s = _positive(params, "mean_rps"), _positive(params, "peak_ratio"), _length(params)
    if not 1 <= ratio < 2:
        raise ConfigError("shape peak_ratio", ratio, "must be from 1 to below 2 (the trough is 2 - peak_ratio x mean)")
    swing = (ratio - 1) * length_s / (2 * np.pi)
    return length_s, lambda t: mean * (t - swing * np.sin(2 * np.pi * t / length_s))


SHAPES: dict[str, Callable[[dict], tuple[float, Cumulative]]] = {
    "step": _step, "ramp": _ramp, "spike": _spike, "day": _day}


def shape_trace(kind: str, params: dict, arrival: str = "constant", seed: int = 0, name: str | None = None) -> Trace:
    """The trace of shape `kind` with `params` (the module docstring's), its arrivals by `arrival` from `seed`."""
    if kind not in SHAPES:
        raise ConfigError("shape", kind, f"must be one of {sorted(SHAPES)}")
    if arrival not in ARRIVALS:
        raise ConfigError("shape arrival", arrival, f"must be one of {list(ARRIVALS)}")
    length_s, cumulative = SHAPES[kind](params)
    grid = np.arange(max(1, round(length_s / GRID_S)) + 1) * GRID_S
    grid[-1] = length_s
    due = cumulative(grid)
    total = float(due[-1])
    if total > MAX_ARRIVALS:
        raise ConfigError("shape", kind, f"makes {total:,.0f} arrivals: at most {MAX_ARRIVALS:,}")
    if arrival == "poisson":
        draws = np.random.default_rng(seed).exponential(1.0, int(total * 1.2) + 64)
        targets = np.cumsum(draws) - draws[0]
    else:
        targets = np.arange(0.0, math.ceil(total) + 1)
    targets = targets[targets < total - WHOLE_EPS]
    if targets.size == 0:
        raise ConfigError("shape", kind, f"makes no arrival in {length_s:g} s: raise its rates")
    # the grid step j with R(t_j) <= target < R(t_j+1); where the rate is 0, R is flat and the arrival falls at the
    # end of the flat stretch, when requests come again
    j = np.searchsorted(due, targets, side="right") - 1
    offsets_s = grid[j] + (targets - due[j]) / (due[j + 1] - due[j]) * (grid[j + 1] - grid[j])
    shape = {"kind": kind, **params, "arrival": arrival, "seed": seed}
    return Trace(name or kind, np.round(offsets_s * NS).astype(np.int64), source=f"shape {kind}", shape=shape)
