"""Replaying recorded real nights through the regression check and the confirmation rule, night after night,
exactly as the pipeline applies them (shared by `benchmarks/regression_nights.py` and `tests/test_regress.py`).

A night is {"night", "kind", "run_id", "logical_date", "rows": [nightly rows], "remeasured": [{"round", "role",
"row"}]}; the recording re-measured every cell (control before, between and after), so whichever cells the
detector suspects can be confirmed from it.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from pathlib import Path

from tasks.plan.control import (
    CONTROL_CONCURRENCY,
    CONTROL_MATCH,
    DEFAULT_CONTROL_CELL,
    control_row,
    control_summary,
    parse_control,
)
from tasks.regress.check import count_verdicts
from tasks.regress.confirm import NEIGHBOUR_MAX_PCT, confirm_records, is_suspect
from tasks.regress.detect import ALPHA_NIGHT, ALPHA_SUSPECT, detect_regressions, verdict_pairs

INT_COLUMNS = ("night", "round", "batch_size", "cpu_count", "windows", "requests", "errors")
TEXT_COLUMNS = ("kind", "logical_date", "run_id", "phase", "role", "model", "format", "server", "launcher", "device",
                "mode", "protocol", "status", "cpu_model", "gpu_name")
LATENCY_METRICS = ("latency_ms_mean", "latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99",
                   "latency_ms_p999")


def read_nights(path: Path) -> list[dict]:
    """The recorded CSV -> nights in recorded order."""
    nights: dict[int, dict] = {}
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row: dict = {}
            for key, value in raw.items():
                if value == "":
                    row[key] = None
                elif key in INT_COLUMNS:
                    row[key] = int(float(value))
                elif key in TEXT_COLUMNS:
                    row[key] = value
                else:
                    row[key] = float(value)
            night = nights.setdefault(row["night"], {
                "night": row["night"], "kind": row["kind"], "run_id": row["run_id"],
                "logical_date": row["logical_date"], "rows": [], "remeasured": []})
            if row["phase"] == "nightly":
                night["rows"].append(row)
            else:
                night["remeasured"].append({"round": row["round"], "role": row["role"], "row": row,
                                            "neighbour_cpu_pct": row.get("neighbour_cpu_pct")})
    return [nights[k] for k in sorted(nights)]


def control_cell_of(night: dict, name: str = DEFAULT_CONTROL_CELL) -> dict:
    """The night's control cell: the one its recording re-measured as the control (recordings made before the
    control moved to concurrency CONTROL_CONCURRENCY re-measured concurrency 1), else the default's."""
    recorded = next((m["row"] for m in night["remeasured"] if m["role"] == "control"), None)
    if recorded is not None:
        return {k: recorded[k] for k in (*CONTROL_MATCH, "batch_size", "mode", "load")}
    model, fmt, server = parse_control(name)
    launcher = night["rows"][0]["launcher"] if night["rows"] else "process"
    return {"model": model, "format": fmt, "server": server, "launcher": launcher, "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": float(CONTROL_CONCURRENCY)}


def judge_night(night: dict, history: list[dict], verdicts: dict[str, list[dict]], *, alpha: float | None = None,
                confirm: bool = True, neighbour_max_pct: float = NEIGHBOUR_MAX_PCT) -> dict:
    """regressions.json of one night: judged against `history` (earlier nights' rows) and earlier verdicts,
    then confirmed from the night's recorded re-measurements."""
    rows = night["rows"]
    alpha = alpha if alpha is not None else (ALPHA_SUSPECT if confirm else ALPHA_NIGHT)
    records = detect_regressions(rows, history, regressed=verdict_pairs(verdicts, "regression"),
                                 improved=verdict_pairs(verdicts, "improvement"), alpha=alpha)
    control = control_cell_of(night)
    regressions = {"records": records, **count_verdicts(records),
                   "control": control_summary(DEFAULT_CONTROL_CELL, control, control_row(rows, control), records)}
    if not confirm or not any(is_suspect(r) for r in records):
        return regressions
    order = [{"round": m["round"], "role": m["role"], "session_id": f"recorded{m['round']}"}
             for m in night["remeasured"]]
    return confirm_records(regressions, night["remeasured"], order, neighbour_max_pct=neighbour_max_pct)


def replay(nights: list[dict], *, alpha: float | None = None, confirm: bool = True,
           neighbour_max_pct: float = NEIGHBOUR_MAX_PCT, cache: dict | None = None) -> list[dict]:
    """Judge each night against the nights before it, in order; the list of regressions.json dicts.

    `cache` (optional) maps a prefix of nights (by id) to its results, so trials sharing a history reuse them."""
    results: list[dict] = []
    history: list[dict] = []
    verdicts: dict[str, list[dict]] = {}
    for i, night in enumerate(nights):
        key = tuple(id(n) for n in nights[:i + 1])
        if cache is not None and key in cache:
            judged = cache[key]
        else:
            judged = judge_night(night, history, verdicts, alpha=alpha, confirm=confirm,
                                 neighbour_max_pct=neighbour_max_pct)
            if cache is not None:
                cache[key] = judged
        results.append(judged)
        history = history + night["rows"]
        verdicts = {**verdicts, night["run_id"]: judged["records"]}
    return results


def alarms(judged: dict) -> list[dict]:
    return [r for r in judged["records"] if r["verdict"] == "regression"]


def scaled(night: dict, cell: Callable[[dict], bool], factors: dict[str, float], suffix: str) -> dict:
    """A copy of `night` where the rows of the cells `cell` selects (nightly and re-measured) have their metrics
    multiplied by `factors` (an injected step on real noise)."""
    def scale(row: dict) -> dict:
        if not cell(row):
            return row
        out = dict(row)
        for metric, factor in factors.items():
            if out.get(metric) is not None:
                out[metric] = out[metric] * factor
        return out

    return {**night, "run_id": night["run_id"] + suffix, "rows": [scale(r) for r in night["rows"]],
            "remeasured": [{**m, "row": scale(m["row"])} for m in night["remeasured"]]}


def slower(fraction: float) -> dict[str, float]:
    """A stack `fraction` slower: throughput x (1 - fraction), every latency / (1 - fraction)."""
    return {"throughput_rps": 1 - fraction, "throughput_sps": 1 - fraction,
            **{m: 1 / (1 - fraction) for m in LATENCY_METRICS}}


def tail_slower(fraction: float) -> dict[str, float]:
    """Only the tail got slower: p99 x (1 + fraction)."""
    return {"latency_ms_p99": 1 + fraction}


def remeasured_row(night: dict, row: dict) -> dict | None:
    """The night's fresh re-measurement of `row`'s cell (role "suspect"), minutes after the nightly one."""
    return next((m["row"] for m in night["remeasured"] if m["role"] == "suspect"
                 and all(m["row"][k] == row[k] for k in ("model", "format", "load"))), None)


def mean_of_two_sessions(nights: list[dict]) -> list[dict]:
    """Nights as a nightly that measured every cell in two sessions and published their mean would have seen
    them: each nightly row's figures become the geometric mean of the row and the night's fresh re-measurement
    of the same cell, minutes later (`remeasured`, role "suspect"). Nothing is left to confirm with, so the
    nights come without re-measurements: judge them with `confirm=False`. Rows not re-measured are dropped."""
    out = []
    for night in nights:
        rows = []
        for row in night["rows"]:
            again = remeasured_row(night, row)
            if again is None:
                continue
            mean = dict(row)
            for metric in ("throughput_rps", "throughput_sps", "startup_s", *LATENCY_METRICS):
                if row.get(metric) and again.get(metric):
                    mean[metric] = math.sqrt(row[metric] * again[metric])
            if row.get("requests") is not None and again.get("requests") is not None:  # errors pool over both
                mean["requests"] = row["requests"] + again["requests"]
                mean["errors"] = (row.get("errors") or 0) + (again.get("errors") or 0)
                mean["error_rate"] = mean["errors"] / mean["requests"] if mean["requests"] else 0.0
            if again["status"] != "ok":
                mean["status"] = again["status"]
            rows.append(mean)
        out.append({**night, "rows": rows, "remeasured": []})
    return out


def widened(nights: list[dict], copies: int) -> list[dict]:
    """Suites of `copies` x the recorded cells: copy j of every cell takes its values (nightly and re-measured,
    from the same night) from night (i + j * offset) of the series, so each copy is a real-noise series of its
    own; copies are told apart by their model name (`mlp~j`). Copy 0 is the recording itself."""
    n = len(nights)
    offset = max(1, n // copies)
    out = []
    for i, night in enumerate(nights):
        rows, remeasured = [], []
        for j in range(copies):
            source = nights[(i + j * offset) % n]
            tag = "" if j == 0 else f"~{j}"
            for row in source["rows"]:
                rows.append({**row, "model": row["model"] + tag, "run_id": night["run_id"],
                             "logical_date": night["logical_date"]})
            for m in source["remeasured"]:
                if j and m["role"] == "control":
                    continue
                remeasured.append({**m, "row": {**m["row"], "model": m["row"]["model"] + tag}})
        out.append({**night, "rows": rows, "remeasured": remeasured})
    return out


def log_spread(nights: list[dict], metric: str) -> dict[str, float]:
    """Robust night-to-night spread (1.4826 MAD of log values) of each recorded cell's nightly `metric`."""
    series: dict[tuple, list[float]] = {}
    for night in nights:
        for row in night["rows"]:
            if row.get(metric) and row["status"] == "ok":
                series.setdefault((row["format"], row["load"]), []).append(math.log(row[metric]))
    return {f"{fmt}/c{load:g}": robust_spread(v) for (fmt, load), v in sorted(series.items())}


def robust_spread(values: list[float]) -> float:
    """1.4826 MAD: the standard deviation of normal values, unmoved by a few outliers."""
    import numpy as np

    v = np.asarray(values)
    return 1.4826 * float(np.median(np.abs(v - np.median(v))))


def noise_sources(nights: list[dict], metric: str) -> dict[str, dict[str, float]]:
    """Where each cell's night-to-night spread of `metric` comes from, on the nights that re-measured it: the
    spread (1.4826 MAD, log) of one session, of the mean of the night's two sessions (the nightly one and the
    fresh one re-measured minutes later), the correlation of the two sessions' deviations (what a second session
    a night cannot average away), and the spread of the cell relative to the night's control cell (what dividing
    by the control would leave). The control's own row is 0 there by construction."""
    import numpy as np

    pairs: dict[tuple, list[tuple[float, float, float]]] = {}
    for night in nights:
        ctl = control_row(night["rows"], control_cell_of(night))
        for row in night["rows"]:
            again = remeasured_row(night, row)
            if (row["status"] != "ok" or not row.get(metric) or again is None or not again.get(metric)
                    or ctl is None or not ctl.get(metric)):
                continue
            pairs.setdefault((row["format"], row["load"]), []).append(
                (math.log(row[metric]), math.log(again[metric]), math.log(ctl[metric])))
    out = {}
    for (fmt, load), values in sorted(pairs.items()):
        one, two, ctl = (list(v) for v in zip(*values, strict=True))
        out[f"{fmt}/c{load:g}"] = {
            "one": robust_spread(one),
            "mean_of_two": robust_spread([(a + b) / 2 for a, b in zip(one, two, strict=True)]),
            "r": float(np.corrcoef(one, two)[0, 1]),
            "over_control": robust_spread([a - c for a, c in zip(one, ctl, strict=True)])}
    return out


def synthetic_nights(seed: int, n: int, cv: float, cells: int = 4, tail_cv_factor: float = 2.0) -> list[dict]:
    """`n` nights of `cells` closed-loop cells on a host whose nights vary by `cv` (log sd; the tail by
    `tail_cv_factor` x cv), each with a re-measurement drawn alike: the same structure as the recording, for
    comparing the detector on a quieter host than the recording's."""
    import random

    rng = random.Random(seed)
    host = {"cpu_model": "synthetic", "cpu_count": 2, "gpu_name": None}
    keys = [{"model": "mlp", "format": "onnx" if c % 2 == 0 else "torchscript", "server": "custom",
             "launcher": "process", "device": "cpu", "batch_size": 1, "mode": "concurrency",
             "load": float(1 + c // 2 * 3), "protocol": "kserve_v2_rest"} for c in range(cells)]

    def row(key: dict, i: int) -> dict:
        z, tail = rng.gauss(0, cv), rng.gauss(0, cv * tail_cv_factor)
        tp = 1000.0 * key["load"] ** 0.5 * math.exp(z)
        lat = key["load"] * 1000.0 / tp
        return {**key, **host, "status": "ok", "run_id": f"syn{i:02d}", "logical_date": f"syn-{i:03d}",
                "throughput_rps": tp, "throughput_sps": tp, "latency_ms_mean": lat, "latency_ms_p50": lat,
                "latency_ms_p90": lat * 1.5 * math.exp(tail / 2), "latency_ms_p95": lat * 2 * math.exp(tail / 2),
                "latency_ms_p99": lat * 3 * math.exp(tail), "latency_ms_p999": lat * 5 * math.exp(tail * 1.5),
                "error_rate": 0.0, "errors": 0, "requests": int(tp * 2), "startup_s": 0.7 * math.exp(rng.gauss(0, cv)),
                "cv": cv, "windows": 4}

    control = next((k for k in keys if k["format"] == "onnx" and k["load"] == CONTROL_CONCURRENCY), keys[0])
    nights = []
    for i in range(n):
        rows = [row(k, i) for k in keys]
        remeasured = [{"round": 0, "role": "control", "row": row(control, i), "neighbour_cpu_pct": 0.0}]
        remeasured += [{"round": 1, "role": "suspect", "row": row(k, i), "neighbour_cpu_pct": 0.0} for k in keys]
        remeasured.append({"round": 2, "role": "control", "row": row(control, i), "neighbour_cpu_pct": 0.0})
        nights.append({"night": i + 1, "kind": "aa", "run_id": f"syn{i:02d}", "logical_date": f"syn-{i:03d}",
                       "rows": rows, "remeasured": remeasured})
    return nights
