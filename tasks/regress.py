"""Regression detection over the history in the store, per cell key, host and metric.

Every metric's good direction comes from `tasks.metrics.METRICS`. History is matched on the cell key and the
host fingerprint (CPU model and count, GPU), so another machine is never compared as if it were the same.

- Enough history (>= CHANGEPOINT_MIN_HISTORY earlier nights): a change point is sought in the last
  RECENT_WINDOW nights. For each candidate split the newest segment (which holds tonight) is tested against
  the baseline segment before it (Student's t-test, or a prediction-interval t-test for tonight alone, as
  Otava/Hunter test segments); the baseline is the history since its own last change point (ruptures, PELT),
  so an older, accepted shift does not pollute it. A change is reported when the Bonferroni-corrected p is
  below ALPHA and the change of the newest segment's mean is at least the metric's minimum.
- Short history: a noise band, median ± NOISE_BAND_K · 1.4826 · MAD of the history, plus the minimum change.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from tasks.metrics import HIGHER, METRICS
from tasks.results import CELL_KEY

CHANGEPOINT_MIN_HISTORY = 8
NOISE_BAND_MIN_HISTORY = 3
ALPHA = 0.02  # significance of a change point (after Bonferroni); the A/A test keeps false alarms under 1 %
RECENT_WINDOW = 3  # a change point may lie up to this many nights back (the newest segment holds tonight)
NOISE_BAND_K = 4.0
MIN_REL_CHANGE = {  # below this a change is noise whatever its p-value (a fraction of the baseline)
    "throughput_rps": 0.05, "throughput_sps": 0.05, "latency_ms_p50": 0.05, "latency_ms_p90": 0.07,
    "latency_ms_p95": 0.08, "latency_ms_p99": 0.10, "latency_ms_p999": 0.15, "error_rate": 0.0,
    "startup_s": 0.20, "server_cpu_pct": 0.10, "server_rss_mb": 0.10, "parity_max_abs_err": 0.0,
}
MIN_ABS_CHANGE = {"error_rate": 0.001, "parity_max_abs_err": 1e-6}  # for metrics whose baseline may be 0
SEGMENTED_MIN_HISTORY = 16  # from this many nights on, the baseline starts at the last change point
PENALTY_SIGMAS = 3.0  # PELT penalty, in units of the series' noise variance × log(n)
REGRESSED_METRICS = ("throughput_rps", "throughput_sps", "latency_ms_p50", "latency_ms_p90", "latency_ms_p95",
                     "latency_ms_p99", "error_rate", "startup_s")


@dataclass(frozen=True)
class Verdict:
    metric: str
    unit: str
    better: str
    baseline: float | None
    current: float
    change_pct: float | None
    method: str  # changepoint | noise_band | none
    p_value: float | None
    history_n: int
    verdict: str  # regression | improvement | no_change | no_history

    def to_dict(self) -> dict:
        return asdict(self)


def row_protocol(row: dict) -> str:
    """The protocol a row was measured over; rows from before schema 1.1 used their server's REST codec.

    Part of the comparison key: REST and gRPC figures of one cell are not comparable."""
    if row.get("protocol"):
        return str(row["protocol"])
    from tasks.serve.servers import get_server

    try:
        return get_server(row["server"]).protocol
    except Exception:  # noqa: BLE001 - a server no longer known: its old rows compare among themselves
        return ""


def host_fingerprint(row: dict) -> str:
    return "|".join(str(row.get(k)) for k in ("cpu_model", "cpu_count", "gpu_name"))


def _direction(metric: str) -> str:
    return METRICS[metric].better if metric in METRICS else "lower"


def _classify(metric: str, baseline: float, current: float, significant: bool) -> tuple[str, float | None]:
    delta = current - baseline
    change_pct = 100.0 * delta / abs(baseline) if baseline else None
    big_enough = abs(delta) >= max(MIN_REL_CHANGE.get(metric, 0.05) * abs(baseline), MIN_ABS_CHANGE.get(metric, 0.0))
    if not (significant and big_enough and delta != 0):
        return "no_change", change_pct
    worse = delta < 0 if _direction(metric) == HIGHER else delta > 0
    return ("regression" if worse else "improvement"), change_pct


def _t_sf(t: float, df: int) -> float:
    from scipy import stats

    return float(stats.t.sf(t, df))


def _baseline_segment(history: list[float]) -> list[float]:
    """The history since its last change point (ruptures PELT), at least NOISE_BAND_MIN_HISTORY long.

    Short histories are used whole: cutting ten nights into segments costs more power than it gains.
    """
    import numpy as np
    import ruptures

    if len(history) < SEGMENTED_MIN_HISTORY:
        return history
    series = np.asarray(history, dtype=float)
    scale = float(np.median(np.abs(np.diff(series)))) / 0.954 or float(np.std(series)) or 1.0  # robust noise
    penalty = PENALTY_SIGMAS * scale**2 * math.log(len(series))
    breaks = ruptures.Pelt(model="l2", min_size=NOISE_BAND_MIN_HISTORY, jump=1).fit(series).predict(pen=penalty)
    start = breaks[-2] if len(breaks) >= 2 else 0
    return history[start:]


def _split_p_value(before: list[float], after: list[float]) -> float:
    """Two-sided p-value that `after` comes from the same distribution as `before` (t-tests)."""
    import numpy as np
    from scipy import stats

    b = np.asarray(before, dtype=float)
    mean, sd, m = float(b.mean()), float(b.std(ddof=1)), len(b)
    if len(after) == 1:
        if sd == 0:
            return 0.0 if after[0] != mean else 1.0
        t = abs(after[0] - mean) / (sd * math.sqrt(1 + 1 / m))  # prediction interval of one new night
        return 2 * _t_sf(t, m - 1)
    result = stats.ttest_ind(after, before, equal_var=True)  # pooled: one noise level, more degrees of freedom
    p = float(result.pvalue)
    return 0.0 if math.isnan(p) and np.mean(after) != mean else (1.0 if math.isnan(p) else p)


def judge(metric: str, history: list[float], current: float) -> Verdict:
    """Compare `current` (and the nights just before it) with the earlier nights of the same cell and host."""
    import numpy as np

    meta = METRICS.get(metric)
    unit, better = (meta.unit, meta.better) if meta else ("", "lower")
    n = len(history)
    if n < NOISE_BAND_MIN_HISTORY:
        baseline = float(np.median(history)) if history else None
        return Verdict(metric, unit, better, baseline, current, None, "none", None, n, "no_history")
    if n >= CHANGEPOINT_MIN_HISTORY:
        # Candidate change points in the last RECENT_WINDOW nights: the newest segment always holds `current`.
        series = [*history, current]
        best = None
        for k in range(1, min(RECENT_WINDOW, n - NOISE_BAND_MIN_HISTORY) + 1):
            before, after = _baseline_segment(series[:-k]), series[-k:]
            p = min(1.0, _split_p_value(before, after) * RECENT_WINDOW)  # Bonferroni over the candidates
            if best is None or p < best[0]:
                best = (p, float(np.mean(before)), float(np.mean(after)))
        p, baseline, level = best
        verdict, change_pct = _classify(metric, baseline, level, p < ALPHA)
        return Verdict(metric, unit, better, baseline, current, change_pct, "changepoint", p, n, verdict)
    median = float(np.median(history))
    mad = 1.4826 * float(np.median(np.abs(np.asarray(history) - median)))
    significant = abs(current - median) > NOISE_BAND_K * mad
    verdict, change_pct = _classify(metric, median, current, significant)
    return Verdict(metric, unit, better, median, current, change_pct, "noise_band", None, n, verdict)


def detect_regressions(current_rows: list[dict], history_rows: list[dict],
                       metrics: tuple[str, ...] = REGRESSED_METRICS) -> list[dict]:
    """One record per (ok cell, metric): the cell key, host fingerprint and the verdict."""
    by_key: dict[tuple, list[dict]] = {}
    for row in sorted(history_rows, key=lambda r: (str(r.get("logical_date")), str(r.get("run_id")))):
        if row.get("status") == "ok":
            by_key.setdefault((*[row[k] for k in CELL_KEY], row_protocol(row), host_fingerprint(row)), []).append(row)
    records = []
    for row in current_rows:
        if row.get("status") != "ok":
            continue
        key = (*[row[k] for k in CELL_KEY], row_protocol(row), host_fingerprint(row))
        past = by_key.get(key, [])
        for metric in metrics:
            current = row.get(metric)
            if current is None or (isinstance(current, float) and math.isnan(current)):
                continue
            history = [float(r[metric]) for r in past if r.get(metric) is not None and not _isnan(r[metric])]
            verdict = judge(metric, history, float(current))
            records.append({**{k: row[k] for k in CELL_KEY}, "host": key[-1], **verdict.to_dict()})
    return records


def detect_parity_regressions(current: list[dict], history: list[dict], host: dict) -> list[dict]:
    """Parity error per (model, format) on this host: up is bad."""
    fingerprint = host_fingerprint(host)
    records = []
    for rec in current:
        past = [float(h["max_abs_err"]) for h in history
                if h["model"] == rec["model"] and h["format"] == rec["format"] and host_fingerprint(h) == fingerprint]
        verdict = judge("parity_max_abs_err", past, float(rec["max_abs_err"]))
        records.append({"model": rec["model"], "format": rec["format"], "host": fingerprint, **verdict.to_dict()})
    return records


def _isnan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)
