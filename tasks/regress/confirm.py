"""Confirm before alarming: re-measure every suspected regression in the same run, on the same host, before
the verdict is published.

    order = remeasure_order(suspect_cells, control)      # control, suspect session 1, control, session 2, control
    measured = remeasure(order, conversions, run, config) # fresh server sessions through measure_session

Each suspect's cells are re-measured in a fresh server session (the night's sessions have ended by the
time the regression check runs), interleaved with fresh sessions of the control cell: one before the first
suspect and one after each, so the control brackets every re-measurement. A suspect whose re-measured value
is again worse than its baseline, beyond the noise and by at least the metric's minimum effect, and whose
own part of the change (the change minus the control's drift over the same minutes) still exceeds the
minimum effect by more than the control moved, is a `regression`; anything else is `unconfirmed`, with the
reason: not reproduced, the host's drift (the control moved too), or the host busy (other work used more than
`confirm_max_neighbour_pct` of its CPU during the re-measurement, `tasks.measure.hostload`: such a measurement is no
evidence either way).

Like every measuring step, this holds the host: in the DAG one `confirm_<host>` task per measuring host re-measures
the suspects that were measured on that host, in that host's queue and pool (tasks/plan/hosts.py); `merge_confirmations`
puts their verdicts together. The false-alarm budget (Bonferroni) stays the night's: alpha over every suspected figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from tasks.core.results import POINT_KEY, SESSION_KEY
from tasks.measure.hostload import NeighbourProbe
from tasks.measure.session import measure_session
from tasks.plan.cells import Cell, Plan, Session
from tasks.regress.check import count_verdicts
from tasks.regress.detect import (
    MIN_ERROR_RATE_CHANGE,
    bad_change,
    bad_sign,
    error_count,
    metric_value,
    min_effect,
    min_effect_text,
    reaches_min_effect,
    same_figure,
)
from tasks.regress.noise import row_se

CONFIRM_PREFIX = "confirm"
CELL_FIELDS = POINT_KEY  # what a suspect's re-measured cell is made of


def remeasure_order(suspects: list[dict], control: dict | None, prefix: str = CONFIRM_PREFIX) -> list[Session]:
    """Sessions to run, in order: the control first, then each suspect session followed by the control.

    `suspects` are rows or cells (the cell key and protocol are read). Every suspect session has a control
    session right before and right after it (also when it re-measures the control cell itself).
    """
    groups: dict[tuple, list[dict]] = {}
    for cell in suspects:
        group = groups.setdefault(tuple(cell[k] for k in SESSION_KEY), [])
        if all(any(g[k] != cell[k] for k in CELL_FIELDS) for g in group):
            group.append({k: cell.get(k) for k in CELL_FIELDS})
    order: list[Session] = []
    control_cell = {k: control.get(k) for k in CELL_FIELDS} if control else None
    if control_cell:
        order.append(_session(len(order), "control", [control_cell], prefix))
    for cells in groups.values():
        order.append(_session(len(order), "suspect", cells, prefix))
        if control_cell:
            order.append(_session(len(order), "control", [control_cell], prefix))
    return order


def _session(index: int, role: str, cells: list[dict], prefix: str = CONFIRM_PREFIX) -> Session:
    first = Cell.from_dict(cells[0])
    tag = f"{prefix}{index}"
    planned = tuple(replace(c, cell_id=f"{tag}.{c.cell_id}") for c in map(Cell.from_dict, cells))
    return Session(f"{tag}.{role}.{first.model}.{first.format}.{first.server}.{first.launcher}.{first.device}",
                   first.model, first.format, first.server, planned, role=role, extra={"round": index})


def order_summary(order: list[Session]) -> list[dict]:
    """What regressions.json records of the re-measurement sessions: round, role, session id."""
    return [{"round": s.extra["round"], "role": s.role, "session_id": s.session_id} for s in order]


def remeasure(order: list[Session], conversions: list[dict], run: dict, config, *,
              measure: Callable | None = None) -> list[dict]:
    """Run the sessions of `order` one after another (fresh server each): a list of {"round", "role", "row",
    "neighbour_cpu_pct"} (the CPU other work used on the host during that session, `tasks.measure.hostload`)."""
    measure = measure or measure_session
    measured = []
    for session in order:
        with NeighbourProbe() as probe:
            out = measure(session, conversions, run, config)
        for row in out["rows"]:
            measured.append({"round": session.extra["round"], "role": session.role, "row": row,
                             "neighbour_cpu_pct": probe.result.neighbour_cpu_pct})
    return measured


ALPHA_CONFIRM = 0.05  # the re-measurement's one-sided test, Bonferroni over the night's suspects
NEIGHBOUR_MAX_PCT = 25.0  # default of Param confirm_max_neighbour_pct


def is_suspect(record: dict) -> bool:
    return record.get("verdict") == "regression" and (record.get("confirmation") or {}).get("outcome") == "pending"


def _same_cell(row: dict, record: dict) -> bool:
    return all(row.get(k) == record.get(k) for k in CELL_FIELDS if k != "protocol") and (
        not record.get("protocol") or row.get("protocol") in (None, record["protocol"]))


def control_drift(record: dict, measured: list[dict], control_records: dict[str, dict], rnd: int) -> float | None:
    """How far the control moved (log, this metric) in the control sessions next to round `rnd`, against its
    own baseline; None when the control has no baseline for it or was not re-measured."""
    ctrl = control_records.get(record["metric"])
    if not ctrl or not ctrl.get("stats") or ctrl["stats"].get("center_log") is None:
        return None
    rows = [m for m in measured if m["role"] == "control" and m["row"].get("status") == "ok"]
    near = [m for m in rows if abs(m["round"] - rnd) == 1] or rows
    values = [metric_value(m["row"], record["metric"]) for m in near]
    logs = [math.log(v) for v in values if v is not None]
    return sum(logs) / len(logs) - ctrl["stats"]["center_log"] if logs else None


def decide(record: dict, row: dict | None, drift_log: float | None, alpha: float,
           neighbour_cpu_pct: float | None = None, neighbour_max_pct: float = NEIGHBOUR_MAX_PCT) -> dict:
    """The confirmation of one suspect: re-measured value, its change and test, the control's drift, outcome
    (confirmed | not_reproduced | host_drift | host_busy)."""
    from scipy import stats  # lazy: scipy (about 0.3 s) only when there is a suspect to decide

    metric = record["metric"]
    if row is None or row.get("status") != "ok" or metric_value(row, metric) is None:
        reason = (row or {}).get("reason") or "no re-measured row"
        return {"outcome": "not_reproduced", "value": None, "reason": f"the re-measurement failed: {reason}"[:500]}
    value = metric_value(row, metric)
    if neighbour_cpu_pct is not None and neighbour_cpu_pct > neighbour_max_pct:
        return {"outcome": "host_busy", "value": value, "neighbour_cpu_pct": neighbour_cpu_pct,
                "reason": f"other work used {neighbour_cpu_pct:.0f} % of the host's CPU during the re-measurement "
                          f"(more than {neighbour_max_pct:.0f} %, Param confirm_max_neighbour_pct): no evidence "
                          "either way"}
    if metric == "error_rate":
        requests = int(row.get("requests") or 0)
        base = record["baseline"] or 0.0
        mu = requests * max(base, 1.0 / (requests + 1))
        p = float(stats.poisson.sf(error_count(row) - 1, mu)) if error_count(row) else 1.0
        survives = p < alpha and value - base >= MIN_ERROR_RATE_CHANGE
        return {"outcome": "confirmed" if survives else "not_reproduced", "value": value, "p_value": p,
                "alpha": alpha, "reason": "re-measured error rate " + ("again" if survives else "not") +
                " above the baseline's"}
    st, noise = record["stats"], record["noise"]
    delta = math.log(value) - st["center_log"]
    extra = max(0.0, row_se(row, metric) ** 2 - st["typical_run_se"] ** 2)
    t = bad_sign(metric) * delta / math.sqrt(noise["sigma_log"] ** 2 + extra + st["center_se"] ** 2)
    p = float(stats.t.sf(t, noise["df"]))
    effect = min_effect(metric)
    out = {"value": value, "change_pct": 100 * (math.exp(delta) - 1), "p_value": p, "alpha": alpha,
           "control_drift_pct": None if drift_log is None else 100 * (math.exp(drift_log) - 1),
           "own_change_pct": None}
    if not (p < alpha and reaches_min_effect(metric, value, math.exp(st["center_log"]))):
        why = "not significant" if p >= alpha else f"below the minimum effect ({min_effect_text(metric)})"
        return {**out, "outcome": "not_reproduced", "reason": f"re-measured change {out['change_pct']:+.1f} %: {why}"}
    if drift_log is None:
        return {**out, "outcome": "confirmed", "reason": "reproduced (no control drift to subtract)"}
    own = delta - drift_log
    out["own_change_pct"] = 100 * (math.exp(own) - 1)
    # A host that moved does not move every engine by the same amount (a compute-bound and a memory-bound
    # engine feel a noisy neighbour differently): the control's drift is a lower bound on the host's share,
    # so the stack's own part must exceed the minimum effect by at least as much as the control moved.
    host_moved = abs(math.exp(drift_log) - 1)
    if bad_change(metric, own) < effect + host_moved:
        return {**out, "outcome": "host_drift",
                "reason": f"reproduced, but the control moved {out['control_drift_pct']:+.1f} % too: the host "
                          f"changed, and the own change ({out['own_change_pct']:+.1f} %) is not beyond the "
                          f"minimum effect by more than the host moved"}
    return {**out, "outcome": "confirmed",
            "reason": f"reproduced; {out['own_change_pct']:+.1f} % after the control's "
                      f"{out['control_drift_pct']:+.1f} %"}


def confirm_records(regressions: dict, measured: list[dict], sessions: list[dict], alpha: float = ALPHA_CONFIRM,
                    neighbour_max_pct: float = NEIGHBOUR_MAX_PCT, only: Callable[[dict], bool] | None = None) -> dict:
    """Apply the re-measurements to the suspects of `regressions` (a regressions.json dict): a new dict. `sessions`
    summarises the sessions that re-measured them (`order_summary`). With `only`, just the suspects it accepts are
    settled (one host's); alpha is still split over every suspect."""
    records = [dict(r) for r in regressions["records"]]
    suspects = [r for r in records if is_suspect(r)]
    control = (regressions.get("control") or {}).get("cell")
    control_records = {r["metric"]: r for r in records if control and _same_cell(control, r)}
    # Bonferroni over the distinct figures suspected (requests/s and samples/s of a cell are one figure)
    figures = len({(*(r.get(k) for k in CELL_FIELDS), same_figure(r["metric"])) for r in suspects})
    for record in suspects:
        if only is not None and not only(record):
            continue
        is_control = bool(control) and _same_cell(control, record)
        rounds = [m for m in measured if _same_cell(m["row"], record) and (m["role"] == "suspect" or is_control)]
        found = rounds[0] if rounds else None
        drift = None if is_control or found is None else control_drift(record, measured, control_records,
                                                                        found["round"])
        confirmation = decide(record, found["row"] if found else None, drift, alpha / figures,
                              found.get("neighbour_cpu_pct") if found else None, neighbour_max_pct)
        if found is not None:
            confirmation["round"] = found["round"]
        record["confirmation"] = confirmation
        record["verdict"] = "regression" if confirmation["outcome"] == "confirmed" else "unconfirmed"
    control_rows = [{"round": m["round"], "neighbour_cpu_pct": m.get("neighbour_cpu_pct"),
                     **{k: m["row"].get(k) for k in ("status", "throughput_rps", "latency_ms_p50", "latency_ms_p99")}}
                    for m in measured if m["role"] == "control"]
    summary = {"sessions": sessions,
               "control_rows": control_rows, "alpha": alpha,
               "suspects": sum(1 for r in suspects if only is None or only(r))}
    return {**regressions, **count_verdicts(records), "confirmation": summary, "records": records}


def host_of(record: dict, sessions: list[Session]) -> str | None:
    """The measuring host of the planned session a record's cell belongs to (None: a plan without hosts)."""
    for session in sessions:
        if session.cells and all(getattr(session.cells[0], k) == record.get(k) for k in SESSION_KEY):
            return session.host
    return None


def confirm_run(started: dict, converted: list[dict], regressions: dict, *, measure: Callable | None = None,
                host: str | None = None, store=None) -> dict:
    """Re-measure the run's suspects (fresh sessions, interleaved with the control) and settle their verdicts; with
    `host`, only the suspects measured on that host (the others stay pending for their own host's task)."""
    plan = Plan.from_dict(started)
    config = plan.config
    mine = (lambda r: True) if host is None else (lambda r: host_of(r, plan.sessions) in (host, None))
    suspects = [r for r in regressions.get("records", []) if is_suspect(r) and mine(r)]
    if not suspects:
        return regressions
    if not config.confirm_regressions:
        records = [{**r, "confirmation": {"outcome": "not_run", "reason": "Param confirm_regressions is off"}}
                   if is_suspect(r) and mine(r) else r for r in regressions["records"]]
        return {**regressions, **count_verdicts(records), "records": records}
    control = (regressions.get("control") or {}).get("cell")
    order = remeasure_order(suspects, control, CONFIRM_PREFIX if host is None else f"{CONFIRM_PREFIX}-{host}-")
    if measure is None and store is not None:
        def measure(session, conversions, run, cfg):
            return measure_session(session, conversions, run, cfg, store=store)
    try:
        measured = remeasure(order, converted, started["run"], config, measure=measure)
    except Exception as exc:  # noqa: BLE001 - the run is still published; its suspects say why they stay unconfirmed
        reason = f"the re-measurement could not run: {type(exc).__name__}: {exc}"[:500]
        records = [{**r, "verdict": "unconfirmed", "confirmation": {"outcome": "not_run", "reason": reason}}
                   if is_suspect(r) and mine(r) else r for r in regressions["records"]]
        return {**regressions, **count_verdicts(records), "records": records}
    confirmed = confirm_records(regressions, measured, order_summary(order),
                                neighbour_max_pct=config.confirm_max_neighbour_pct, only=mine)
    if host is not None:
        confirmed["confirmation"]["host"] = host
    return confirmed


def merge_confirmations(regressions: dict, parts: list[dict | None]) -> dict:
    """One regressions.json from the per-host confirmations of the same regression check: each suspect as the part
    that settled it (still pending in every part: as the check left it), verdicts recounted, the hosts'
    confirmation summaries side by side."""
    parts = [p for p in parts if p]
    if not parts:
        return regressions
    if len(parts) == 1:
        return parts[0]
    records = []
    for i, record in enumerate(regressions.get("records", [])):
        settled = [p["records"][i] for p in parts if i < len(p.get("records", [])) and not is_suspect(
            p["records"][i]) and is_suspect(record)]
        records.append(settled[0] if settled else record)
    summaries = [p["confirmation"] for p in parts if p.get("confirmation")]
    merged = {**regressions, **count_verdicts(records), "records": records}
    if summaries:
        merged["confirmation"] = {"hosts": summaries, "suspects": sum(s.get("suspects", 0) for s in summaries),
                                  "sessions": [s for summary in summaries for s in summary.get("sessions", [])],
                                  "control_rows": [r for summary in summaries for r in summary.get("control_rows", [])],
                                  "alpha": summaries[0].get("alpha")}
    return merged
