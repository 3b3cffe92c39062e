"""Comparing figures: is a difference larger than the noise, and what changed between two runs.

The noise of one row's figure is what the row itself published about its spread:
- throughput: its 95 % interval (`throughput_rps_ci_low/high`) when the row has one; two figures differ beyond
  noise when their intervals do not overlap. Without intervals, the windows' coefficient of variation (`cv`):
  beyond noise when |a - b| > NOISE_SIGMAS · sqrt((cv_a·a)² + (cv_b·b)²).
- latency percentiles: their spread is not measured per window, so the throughput's `cv` stands in (same rule).
Between two runs (not two stacks of one run) the regression check's minimum change per metric
(`tasks.regress.history_check.min_effect`) is also required: night-to-night drift below it is never called a change.
A difference whose rows carry no spread at all is `None` (unknown), never silently "beyond noise".
"""

from __future__ import annotations

import math

from tasks.core.metrics import HIGHER, METRICS, metrics_where, number
from tasks.core.results import CELL_KEY, cell_key
from tasks.regress.history_check import min_effect

NOISE_SIGMAS = 2.0
COMPARED_METRICS = metrics_where("compared")


def cell_label(row: dict) -> str:
    """model/format/server batch N mode load, for people."""
    load = number(row.get("load"))
    load_txt = f"{load:g}" if load is not None else "?"
    return (f"{row.get('model')}/{row.get('format')}/{row.get('server')} b{row.get('batch_size')} "
            f"{row.get('mode')} {load_txt}")


def beyond_noise(metric: str, a: dict, b: dict, min_rel_change: float = 0.0) -> bool | None:
    """Is b[metric] different from a[metric] by more than both rows' noise (and `min_rel_change` of a)?"""
    va, vb = number(a.get(metric)), number(b.get(metric))
    if va is None or vb is None:
        return None
    delta = abs(vb - va)
    if delta <= min_rel_change * abs(va):
        return False
    if metric == "throughput_rps":
        lo_a, hi_a = number(a.get("throughput_rps_ci_low")), number(a.get("throughput_rps_ci_high"))
        lo_b, hi_b = number(b.get("throughput_rps_ci_low")), number(b.get("throughput_rps_ci_high"))
        if None not in (lo_a, hi_a, lo_b, hi_b):
            return lo_b > hi_a or lo_a > hi_b
    cv_a, cv_b = number(a.get("cv")), number(b.get("cv"))
    if cv_a is None or cv_b is None:
        return None
    return delta > NOISE_SIGMAS * math.hypot(cv_a * va, cv_b * vb)


def noise_basis(metric: str, a: dict, b: dict) -> dict | None:
    """The figures `beyond_noise` judges a difference on, for people to read: {"method": "intervals", "a": (low,
    high), "b": (low, high)}, or {"method": "cv", "delta", "threshold", "cv_a", "cv_b"}; None without a spread."""
    va, vb = number(a.get(metric)), number(b.get(metric))
    if va is None or vb is None:
        return None
    if metric == "throughput_rps":
        ci_a = (number(a.get("throughput_rps_ci_low")), number(a.get("throughput_rps_ci_high")))
        ci_b = (number(b.get("throughput_rps_ci_low")), number(b.get("throughput_rps_ci_high")))
        if None not in (*ci_a, *ci_b):
            return {"method": "intervals", "a": ci_a, "b": ci_b}
    cv_a, cv_b = number(a.get("cv")), number(b.get("cv"))
    if cv_a is None or cv_b is None:
        return None
    return {"method": "cv", "delta": abs(vb - va), "threshold": NOISE_SIGMAS * math.hypot(cv_a * va, cv_b * vb),
            "cv_a": cv_a, "cv_b": cv_b}


def direction(metric: str, a: float, b: float) -> str:
    """'better' or 'worse' going from a to b, by the metric's good direction; 'same' when equal."""
    if a == b:
        return "same"
    up_is_good = METRICS[metric].better == HIGHER
    return "better" if (b > a) == up_is_good else "worse"


def compare_rows(rows_a: list[dict], rows_b: list[dict], metrics: tuple[str, ...] = COMPARED_METRICS) -> list[dict]:
    """Side by side per cell key, A then B: status, each metric's values, change and whether beyond noise.

    One record per cell key in either run, sorted by the key. `verdict` is `worse` when a metric got worse
    beyond noise or an ok cell failed, `better` when only improvements beyond noise, `new`/`gone` for cells in
    one run only, `contended` when either run's row was contended (its figures are not compared), else `same`.
    Notes say when the artifact or server version differs."""
    by_a = {cell_key(r): r for r in rows_a}
    by_b = {cell_key(r): r for r in rows_b}
    records = []
    for key in sorted(set(by_a) | set(by_b), key=lambda k: tuple(str(v) for v in k)):
        a, b = by_a.get(key), by_b.get(key)
        row = b or a
        record = {**dict(zip(CELL_KEY, key, strict=True)), "label": cell_label(row),
                  "status_a": a.get("status") if a else None, "status_b": b.get("status") if b else None,
                  "metrics": {}, "notes": []}
        if a is None or b is None:
            record["verdict"] = "new" if a is None else "gone"
            records.append(record)
            continue
        worse = better = False
        contended = next((x for x in (b, a) if x.get("status") == "contended"), None)
        if contended is not None:  # figures taken while other work had the host: not the stack's, not compared
            which = "B" if contended is b else "A"
            record["notes"].append(f"not compared: {which} was contended: {str(contended.get('reason') or '')[:200]}")
        elif a.get("status") == "ok" and b.get("status") != "ok":
            worse = True
            record["notes"].append(f"was ok, now {b.get('status')}: {str(b.get('reason') or '')[:200]}")
        elif a.get("status") != "ok" and b.get("status") == "ok":
            better = True
            record["notes"].append(f"was {a.get('status')}, now ok")
        for field in ("server_version", "model_sha256", "config_id"):
            if a.get(field) and b.get(field) and a.get(field) != b.get(field):
                record["notes"].append(f"{field} {str(a[field])[:16]} → {str(b[field])[:16]}")
        both_ok = a.get("status") == "ok" and b.get("status") == "ok"
        for metric in metrics:
            va, vb = number(a.get(metric)), number(b.get(metric))
            entry = {"a": va, "b": vb, "change_pct": None, "beyond_noise": None, "direction": None}
            if both_ok and va is not None and vb is not None:
                entry["change_pct"] = 100.0 * (vb - va) / abs(va) if va else None
                entry["direction"] = direction(metric, va, vb)
                entry["beyond_noise"] = beyond_noise(metric, a, b, min_effect(metric))
                if entry["beyond_noise"]:
                    worse |= entry["direction"] == "worse"
                    better |= entry["direction"] == "better"
            record["metrics"][metric] = entry
        record["verdict"] = ("contended" if contended is not None else "worse" if worse else "better" if better
                             else "same")
        records.append(record)
    return records
