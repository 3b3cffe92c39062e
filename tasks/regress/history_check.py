"""Regression detection over the history in the store, per cell key, host and metric, with one false-alarm
budget for the whole night: what judges the environment on the control cell (tasks/regress/check.py). A stack's
change is judged side by side instead (tasks/regress/night_duets.py): on a shared host one session moves 6-15 % within
the hour, far more than the steps worth finding, and history cannot tell them apart.

Every metric's good direction comes from `tasks.core.metrics.METRICS`. History is matched on the cell key, the
protocol and the host fingerprint (CPU model and count, GPU), so another machine is never compared.

What forms a cell's baseline (history hygiene, applied before this module by `tasks.pipeline.regress_step`
and here):
- only runs strictly before the run's logical date (a backfill is never compared with later nights), and
  not excluded by an annotation (`tasks.regress.annotations`, `python -m tasks.cli exclude`);
- a night whose cell was judged a `regression` is held out of the cell's baseline until the regression has
  persisted for PERSIST_NIGHTS nights in a row; then the new level is accepted and the baseline restarts
  at its first night (a reverted regression never enters the baseline); an improvement seen PERSIST_NIGHTS
  nights in a row restarts the baseline the same way;
- at most BASELINE_MAX_NIGHTS nights, the newest.

How a night is judged (the noise model is `tasks.regress.noise`: a per-metric prior, the spread of every cell of the
same host, of the same server there and of the cell itself, each the prior of the next, plus each row's
within-run spread), on the log scale:
- for k = 1..SEGMENT_NIGHTS, the newest k nights (tonight and the k-1 before it) are tested against the
  baseline before them (t-test of the segment's mean against the winsorized baseline mean, one-sided per
  direction), Bonferroni over the k tried: a 10 % step too small to see in one noisy night is seen in the
  mean of its first two or three;
- every test of the night (cells x metrics) shares one family-wise error rate by Holm's step-down
  procedure: ALPHA_NIGHT for regressions, ALPHA_IMPROVEMENT for improvements;
- a significant change is a `regression` (or `improvement`) only when tonight's value differs from the
  baseline by at least the metric's minimum effect (`Metric.min_effect`, tasks/core/metrics.py).

Every record states tonight's value, the baseline value and the nights it came from (run ids and dates),
the noise, the method, and the change of tonight against the baseline with its 95 % interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tasks.core.confidence import PERCENTILE_LEVELS, lower_bound_only
from tasks.core.metadata import host_fingerprint
from tasks.core.metrics import DEFAULT_MIN_EFFECT, METRICS, bad_sign, metrics_where, number
from tasks.core.results import CELL_KEY, KEY_DEFAULTED, cell_key, is_overload
from tasks.core.verdicts import REGRESSED
from tasks.regress.noise import Noise, cell_noises, row_se, winsorized_mean

REGRESSED_METRICS = metrics_where("judged")
MIN_ERROR_RATE_CHANGE = 0.001  # error rate: an absolute change (its baseline is usually 0)
ALPHA_NIGHT = 0.05  # family-wise error rate of one night's regression tests (Holm)
ALPHA_IMPROVEMENT = 0.05  # family-wise error rate of one night's improvement tests
MIN_HISTORY = 3  # fewer baseline nights: `no_history`
SEGMENT_NIGHTS = 3  # a change may have begun up to this many nights ago (the segment always holds tonight)
BASELINE_MAX_NIGHTS = 14
PERSIST_NIGHTS = 3  # a regression seen this many nights in a row becomes the new baseline


def comparison_key(row: dict) -> tuple:
    """What must match for two rows to be compared: the cell key (the serving configuration included: a tuned
    configuration is never the baseline of another; the protocol too: JSON, binary and gRPC figures of one point
    are not comparable, and a row before 1.1 is its server's REST JSON) and the host."""
    return (*cell_key(row), host_fingerprint(row))


def min_effect(metric: str) -> float:
    return METRICS[metric].min_effect if metric in METRICS else DEFAULT_MIN_EFFECT


def min_abs_change(metric: str) -> float | None:
    return METRICS[metric].min_abs_change if metric in METRICS else None


def same_figure(metric: str) -> str:
    """The figure a metric is one hypothesis with (samples/s is requests/s times the batch size)."""
    return (METRICS[metric].same_figure_as if metric in METRICS else None) or metric


@dataclass
class CellHistory:
    """One cell's earlier nights (ok rows, oldest first) and which of them may form its baseline."""

    nights: list[dict] = field(default_factory=list)
    held: set[str] = field(default_factory=set)  # run ids judged a regression, not (yet) persisted
    improved: set[str] = field(default_factory=set)  # run ids judged an improvement
    start: int = 0  # index of the first night since the last accepted (persisted) change

    def accept_persisted(self) -> None:
        """Walk the nights: a streak of PERSIST_NIGHTS nights judged a regression (or an improvement) is a
        persisted change, and the baseline restarts at the streak's first night (held nights are released)."""
        for marked in (self.held, self.improved):
            streak: list[int] = []
            for i, night in enumerate(self.nights):
                if night["run_id"] not in marked:
                    streak = []
                    continue
                streak.append(i)
                if len(streak) == PERSIST_NIGHTS:
                    self.start = max(self.start, streak[0])
                    self.held -= {self.nights[j]["run_id"] for j in streak}
                    streak = []


def build_histories(history_rows: list[dict], regressed: set[tuple[str, tuple]] | frozenset = frozenset(),
                    improved: set[tuple[str, tuple]] | frozenset = frozenset()) -> dict[tuple, CellHistory]:
    """Per comparison key, the ok nights oldest first; `regressed` and `improved` hold the (run_id, comparison
    key) pairs of nights whose cell was judged a regression (any metric) or an improvement."""
    histories: dict[tuple, CellHistory] = {}
    ordered = sorted(history_rows, key=lambda r: (str(r.get("logical_date")), str(r.get("run_id"))))
    for row in ordered:
        if row.get("status") != "ok" or is_overload(row):
            continue
        key = comparison_key(row)
        hist = histories.setdefault(key, CellHistory())
        hist.nights.append(row)
        pair = (str(row.get("run_id")), key)
        if pair in regressed:
            hist.held.add(str(row["run_id"]))
        elif pair in improved:
            hist.improved.add(str(row["run_id"]))
    for hist in histories.values():
        hist.accept_persisted()
    return histories


@dataclass(frozen=True)
class Split:
    """One candidate: the newest `k` nights (tonight last) against the baseline nights before them."""

    k: int
    segment: list[dict]  # rows, tonight last
    baseline: list[dict]


def candidate_splits(hist: CellHistory | None, current: dict, metric: str) -> list[Split]:
    nights = [] if hist is None else [n for n in hist.nights[hist.start:] if metric_value(n, metric) is not None]
    held = set() if hist is None else hist.held
    splits = []
    for k in range(1, SEGMENT_NIGHTS + 1):
        recent = nights[len(nights) - (k - 1):] if k > 1 else []
        if len(recent) != k - 1:
            break
        before = [n for n in nights[:len(nights) - (k - 1)] if n["run_id"] not in held][-BASELINE_MAX_NIGHTS:]
        if len(before) < MIN_HISTORY:
            break
        splits.append(Split(k, [*recent, current], before))
    return splits


@dataclass(frozen=True)
class Test:
    """The evidence for one (cell, metric): p-values per direction and the tonight-vs-baseline change."""

    metric: str
    current: float
    split: Split | None
    noise: Noise | None
    p_bad: float
    p_good: float
    baseline: float | None
    center_log: float | None  # log of the baseline (None for error_rate)
    center_se: float  # standard error of center_log
    typical_se: float  # typical within-run se of the baseline nights
    change_pct: float | None
    change_ci_pct: tuple[float, float] | None
    method: str


def metric_value(row: dict, metric: str) -> float | None:
    """The row's figure for a metric on the log scale's domain: positive (an error rate may be 0), else None; a
    percentile only where its requests support it (`supported_percentile`)."""
    value = number(row.get(metric))
    if value is None or (metric != "error_rate" and value <= 0) or not supported_percentile(row, metric):
        return None
    return value


def supported_percentile(row: dict, metric: str) -> bool:
    """False for a latency percentile whose row holds too few requests for it (fewer than 1 / (1 - q): the figure
    would be the sample maximum). Rows from schema 1.8 publish such a percentile as a lower bound only; an older
    row's is judged on its `requests` (a row with neither count is taken as it is), so the history compares
    percentiles only where the counts support them."""
    level = PERCENTILE_LEVELS.get(metric)
    if level is None:
        return True
    count = number(row.get("latency_samples"))
    count = number(row.get("requests")) if count is None else count
    return count is None or not lower_bound_only(count, level)


def _ratio_pct(log_change: float) -> float:
    return 100.0 * (math.exp(log_change) - 1.0)


def judge_log_metric(metric: str, current: dict, splits: list[Split], noise: Noise) -> dict[str, Test]:
    """t-tests of each candidate segment's mean (log) against its baseline; Bonferroni over the candidates.

    Three views of the same evidence: "bad" and "good" are told from the split most significant in that
    direction (its baseline is the one a regression or improvement is stated against), "first" from the
    newest night alone against every baseline night (what a no-change verdict states)."""
    import numpy as np
    from scipy import stats

    sign, sigma, df = bad_sign(metric), noise.sigma, noise.df
    views = []
    for split in splits:
        logs = [math.log(metric_value(r, metric)) for r in split.baseline]
        center = winsorized_mean(logs, sigma)
        typical_se = float(np.median([row_se(r, metric) ** 2 for r in split.baseline])) ** 0.5
        extras = [max(0.0, row_se(r, metric) ** 2 - typical_se**2) for r in split.segment]
        k, n = len(split.segment), len(split.baseline)
        center_var = sigma**2 / n
        seg_mean = float(np.mean([math.log(metric_value(r, metric)) for r in split.segment]))
        t = (seg_mean - center) / math.sqrt((k * sigma**2 + sum(extras)) / k**2 + center_var)
        views.append((split, float(stats.t.sf(sign * t, df)), float(stats.t.sf(-sign * t, df)), center, center_var,
                      typical_se, extras[-1]))
    tries = len(splits)
    p_bad = min(1.0, min(v[1] for v in views) * tries)
    p_good = min(1.0, min(v[2] for v in views) * tries)

    def test_of(view: tuple) -> Test:
        split, _, _, center, center_var, typical_se, extra_now = view
        delta = math.log(metric_value(current, metric)) - center
        half = float(stats.t.ppf(0.975, df)) * math.sqrt(sigma**2 + extra_now + center_var)
        method = f"segment t-test, newest {split.k} night{'s' if split.k > 1 else ''} vs {len(split.baseline)}"
        return Test(metric, metric_value(current, metric), split, noise, p_bad, p_good, math.exp(center), center,
                    math.sqrt(center_var), typical_se, _ratio_pct(delta),
                    (_ratio_pct(delta - half), _ratio_pct(delta + half)), method)

    return {"bad": test_of(min(views, key=lambda v: v[1])), "good": test_of(min(views, key=lambda v: v[2])),
            "first": test_of(views[0])}


def judge_error_rate(current: dict, splits: list[Split]) -> Test:
    """Tonight's errors against the baseline nights' pooled error rate (Poisson tail)."""
    from scipy import stats

    split = splits[0]
    errors_b = sum(error_count(r) for r in split.baseline)
    requests_b = sum(int(r.get("requests") or 0) for r in split.baseline)
    rate_b = errors_b / requests_b if requests_b else 0.0
    errors_t, requests_t = error_count(current), int(current.get("requests") or 0)
    floor = 1.0 / (requests_b + 1)  # no errors seen in n requests still allows a rate of about 1/n
    mu = requests_t * max(rate_b, floor)
    p_bad = float(stats.poisson.sf(errors_t - 1, mu)) if errors_t else 1.0
    p_good = float(stats.poisson.cdf(errors_t, requests_t * rate_b)) if rate_b else 1.0
    rate_t = errors_t / requests_t if requests_t else 0.0
    return Test("error_rate", rate_t, split, None, p_bad, p_good, rate_b, None, 0.0, 0.0,
                100.0 * (rate_t - rate_b) / rate_b if rate_b else None, None,
                f"Poisson tail of tonight's errors at the baseline's rate ({len(split.baseline)} nights)")


def error_count(row: dict) -> int:
    if row.get("errors") is not None:
        return int(row["errors"])
    return round(float(row.get("error_rate") or 0.0) * int(row.get("requests") or 0))


def holm(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise error rate `alpha`."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (m - rank):
            break
        rejected[i] = True
    return rejected


def holm_by_figure(p_values: list[float], figures: list, alpha: float) -> list[bool]:
    """Holm over distinct figures: the tests that share a figure (`Metric.same_figure_as`) are one hypothesis,
    tested with their smallest p-value and decided together."""
    smallest: dict = {}
    for p, figure in zip(p_values, figures, strict=True):
        smallest[figure] = min(p, smallest.get(figure, 1.0))
    decided = dict(zip(smallest, holm(list(smallest.values()), alpha), strict=True))
    return [decided[figure] for figure in figures]


def big_enough(test: Test, sign: int) -> bool:
    """Tonight's change reaches the metric's minimum effect in the direction `sign` (+1 bad, -1 good)."""
    if test.metric == "error_rate":
        return sign * (test.current - (test.baseline or 0.0)) >= MIN_ERROR_RATE_CHANGE
    if test.change_pct is None or test.baseline is None:
        return False
    return reaches_min_effect(test.metric, test.current, test.baseline, sign)


def reaches_min_effect(metric: str, value: float, baseline: float, sign: int = +1) -> bool:
    """`value` differs from `baseline` in the direction `sign` (+1 worse, -1 better) by at least the metric's
    minimum relative effect and its minimum absolute change."""
    toward = sign * bad_sign(metric)
    return (toward * (value / baseline - 1.0) >= min_effect(metric)
            and toward * (value - baseline) >= (min_abs_change(metric) or 0.0))


def detect_regressions(current_rows: list[dict], history_rows: list[dict], *,
                       regressed: set[tuple[str, tuple]] | frozenset = frozenset(),
                       improved: set[tuple[str, tuple]] | frozenset = frozenset(),
                       metrics: tuple[str, ...] = REGRESSED_METRICS, alpha: float = ALPHA_NIGHT,
                       alpha_improvement: float = ALPHA_IMPROVEMENT) -> list[dict]:
    """One record per (ok cell, metric) of tonight: the cell key, host and the verdict with its evidence.

    `history_rows` are the earlier nights' rows (already cut to before tonight's logical date and cleared of
    exclusions); `regressed` and `improved` the (run_id, comparison key) pairs judged regressions and
    improvements on those nights (`verdict_pairs`); `alpha` the night's family-wise error rate for regressions.
    """
    histories = build_histories(history_rows, regressed, improved)
    todo = [(row, metric) for row in current_rows if row.get("status") == "ok" and not is_overload(row)
            for metric in metrics if metric_value(row, metric) is not None]
    splits = {(id(row), metric): candidate_splits(histories.get(comparison_key(row)), row, metric)
              for row, metric in todo}
    noises = _pooled_noises(todo, splits)
    tests: list[tuple[dict, str, dict[str, Test] | None]] = []
    for row, metric in todo:
        cand = splits[(id(row), metric)]
        if not cand:
            tests.append((row, metric, None))
        elif metric == "error_rate":
            test = judge_error_rate(row, cand)
            tests.append((row, metric, {"bad": test, "good": test, "first": test}))
        else:
            noise = noises[(id(row), metric)]
            tests.append((row, metric, judge_log_metric(metric, row, cand, noise)))
    judged = [views for _, _, views in tests if views is not None]
    figures = [(id(row), same_figure(metric)) for row, metric, views in tests if views is not None]
    bad = dict(zip(map(id, judged), holm_by_figure([v["bad"].p_bad for v in judged], figures, alpha), strict=True))
    good = dict(zip(map(id, judged), holm_by_figure([v["good"].p_good for v in judged], figures, alpha_improvement),
                    strict=True))
    records = []
    for row, metric, views in tests:
        if views is None:
            verdict, test = "no_history", None
        elif bad[id(views)] and big_enough(views["bad"], +1):
            verdict, test = "regression", views["bad"]
        elif good[id(views)] and big_enough(views["good"], -1):
            verdict, test = "improvement", views["good"]
        else:
            verdict, test = "no_change", views["first"]
        records.append(make_record(row, metric, test, verdict, len(judged), alpha))
    return records


def _pooled_noises(todo: list[tuple[dict, str]], splits: dict) -> dict[tuple, Noise]:
    """Per (id of tonight's row, metric): its cell's noise, from the baseline nights of every cell tonight on
    the same host (`tasks.regress.noise.cell_noises`: host, then server, then the cell)."""
    groups: dict[tuple, dict[str, list[tuple[dict, list[float]]]]] = {}
    for row, metric in todo:
        cand = splits[(id(row), metric)]
        logs = [math.log(metric_value(r, metric)) for r in cand[0].baseline] if cand and metric != "error_rate" else []
        groups.setdefault((host_fingerprint(row), metric), {}).setdefault(row["server"], []).append((row, logs))
    noises: dict[tuple, Noise] = {}
    for (_, metric), by_server in groups.items():
        found = cell_noises(metric, {server: [logs for _, logs in cells] for server, cells in by_server.items()})
        for server, cells in by_server.items():
            noises.update({(id(row), metric): noise for (row, _), noise in zip(cells, found[server], strict=True)})
    return noises


def make_record(row: dict, metric: str, test: Test | None, verdict: str, tests: int, alpha: float) -> dict:
    meta = METRICS.get(metric)
    record = {**dict(zip(CELL_KEY, cell_key(row), strict=True)), "host": host_fingerprint(row),
              "run_id": row.get("run_id"), "metric": metric, "unit": meta.unit if meta else "",
              "better": meta.better if meta else "lower", "current": metric_value(row, metric), "verdict": verdict,
              "baseline": None, "baseline_nights": [], "history_n": 0, "change_pct": None, "change_ci_pct": None,
              "min_effect_pct": None if metric == "error_rate" else 100.0 * min_effect(metric),
              "min_abs_change": min_abs_change(metric),
              "method": "none", "segment_nights": [], "p_value": None, "p_improvement": None, "tests_tonight": tests,
              "alpha_night": alpha, "noise": None, "stats": None, "confirmation": None}
    if test is None:
        return record
    split = test.split
    record.update(
        current=test.current, baseline=test.baseline, history_n=len(split.baseline),
        baseline_nights=[{"run_id": r.get("run_id"), "logical_date": r.get("logical_date")} for r in split.baseline],
        segment_nights=[{"run_id": r.get("run_id"), "logical_date": r.get("logical_date")} for r in split.segment[:-1]],
        change_pct=test.change_pct, change_ci_pct=list(test.change_ci_pct) if test.change_ci_pct else None,
        method=test.method, p_value=test.p_bad, p_improvement=test.p_good,
        stats={"center_log": test.center_log, "center_se": test.center_se, "typical_run_se": test.typical_se},
    )
    if test.noise is not None:
        n = test.noise
        record["noise"] = {"sigma_pct": n.sigma_pct, "sigma_log": n.sigma, "df": n.df, "cells": n.cells,
                           "nights": n.nights, "prior_sigma_log": n.prior, "describe": n.describe()}
    return record


def verdict_pairs(records_by_run: dict[str, list[dict]], verdict: str | tuple[str, ...] = REGRESSED
                  ) -> set[tuple[str, tuple]]:
    """(run_id, comparison key) of every cell with a record of `verdict` (one, or any of several) in those runs'
    regressions.json."""
    wanted = (verdict,) if isinstance(verdict, str) else verdict
    pairs = set()
    for run_id, records in records_by_run.items():
        for rec in records:
            if rec.get("verdict") in wanted and all(k in rec for k in CELL_KEY if k not in KEY_DEFAULTED):
                pairs.add((run_id, (*cell_key(rec), rec.get("host", ""))))
    return pairs


PARITY_GROWTH = 2.0  # parity error is deterministic: a regression when it at least doubles ...
PARITY_MIN_ABS = 1e-6  # ... and grows by at least this much


def detect_parity_regressions(current: list[dict], history: list[dict], host: dict) -> list[dict]:
    """Parity error per (model, format) on this host against the largest earlier error: up is bad.

    Conversion is deterministic, so no noise model: the error at least doubling (and by PARITY_MIN_ABS) or a
    passing artifact now failing is a regression, with no re-measurement needed."""
    fingerprint = host_fingerprint(host)
    records = []
    for rec in current:
        past = [h for h in history if h["model"] == rec["model"] and h["format"] == rec["format"]
                and host_fingerprint(h) == fingerprint]
        now = float(rec["max_abs_err"])
        record = {"model": rec["model"], "format": rec["format"], "host": fingerprint, "metric": "parity_max_abs_err",
                  "unit": "", "better": "lower", "current": now, "history_n": len(past),
                  "baseline_nights": [{"run_id": h.get("run_id"), "logical_date": h.get("logical_date")}
                                      for h in past[-BASELINE_MAX_NIGHTS:]],
                  "method": f"largest of the earlier errors; regression when x{PARITY_GROWTH:g} and "
                            f"+{PARITY_MIN_ABS:g}", "confirmation": None}
        if not past:
            records.append({**record, "baseline": None, "change_pct": None, "verdict": "no_history"})
            continue
        worst = max(float(h["max_abs_err"]) for h in past)
        newly_failing = rec.get("passed") is False and all(h.get("passed", True) for h in past)
        grew = now >= PARITY_GROWTH * worst and now - worst >= PARITY_MIN_ABS
        verdict = "regression" if grew or newly_failing else ("improvement" if now < worst / PARITY_GROWTH
                                                              else "no_change")
        records.append({**record, "baseline": worst, "verdict": verdict,
                        "change_pct": 100.0 * (now - worst) / worst if worst else None,
                        "confirmation": {"outcome": "not_needed", "reason": "conversion is deterministic"}
                        if verdict == "regression" else None})
    return records
