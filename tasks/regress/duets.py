"""The night's duets: every cell whose inputs changed is measured beside its reference's, on the host that
measured it, after tonight's A/A duet of the control cell has measured the duet's own noise there.

    planned = plan_duets(references, plan)              # in the regression check (tasks/regress/check.py)
    regressions = run_duets(started, conversions, regressions, host=...)   # one task per measuring host

A duet group is one server session's changed cells that share their reference night: each cell's load point gets its
own pairs, and every pair runs on two servers started fresh for it (tasks/measure/duet.py); the sides are built from
their inputs records (tasks/regress/sides.py), and a reference that cannot be had again is reported as such
(`unconfirmed`, with the reason), never silently skipped. Both sides are driven by tonight's load generator. The
duet is the detector; a change it finds is sized alone (tasks/regress/sizing.py) and, where several parts of the
inputs changed, taken apart part by part (tasks/regress/attribution.py).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace

from tasks.core.results import SESSION_KEY
from tasks.core.verdicts import is_improvement, is_regression
from tasks.measure.duet import measure_duet
from tasks.measure.interleaved import measure_interleaved
from tasks.plan.cells import Plan
from tasks.plan.control import control_cell, control_row
from tasks.regress.attribution import attribute_group
from tasks.regress.duet import DUET_METRICS, DuetThresholds, aa_noise, judge_pairs
from tasks.regress.references import Reference, row_inputs
from tasks.regress.sides import Night, measure_group, trusted_pairs
from tasks.regress.size import size_verdict
from tasks.regress.sizing import POINT_FIELDS, point_index, size_group
from tasks.store.s3 import S3Store

AA_PAIRS = 4  # pairs of tonight's A/A duet of the control cell
REFERENCES_FILE = "references.json"  # in the host's cache: what tonight's references need kept


def _host_of(row: dict, plan: Plan) -> str | None:
    for session in plan.sessions:
        if session.cells and all(getattr(session.cells[0], k) == row.get(k) for k in SESSION_KEY):
            return session.host
    return None


def plan_duets(references: list[Reference], plan: Plan) -> list[dict]:
    """The night's duet groups: changed cells grouped by their server session and reference night."""
    groups: dict[tuple, dict] = {}
    for ref in references:
        if ref.state != "changed":
            continue
        row = ref.row
        key = (*(row.get(k) for k in SESSION_KEY), row.get("config_id"), ref.reference.get("run_id"),
               ref.reference.get("inputs_sha"), row.get("inputs_sha"))
        group = groups.setdefault(key, {
            "duet_id": f"duet{len(groups)}.{row['model']}.{row['format']}.{row['server']}",
            "host": _host_of(row, plan), "session": {k: row.get(k) for k in (*SESSION_KEY, "config_id")},
            "reference": {"run_id": ref.reference.get("run_id"), "logical_date": ref.reference.get("logical_date"),
                          "inputs": ref.reference_inputs},
            "candidate": {"inputs": row_inputs(row)}, "changes": ref.changes, "points": []})
        group["points"].append({k: row.get(k) for k in POINT_FIELDS})
    return list(groups.values())


def plan_aa(rows: list[dict], plan: Plan) -> dict | None:
    """Tonight's A/A duet: the control cell's ok row, its inputs on both sides (None without a control)."""
    control = control_cell(plan.config)
    row = control_row(rows, control)
    if row is None or not row.get("inputs"):
        return None
    return {"duet_id": "aa.control", "host": _host_of(row, plan),
            "session": {k: row.get(k) for k in (*SESSION_KEY, "config_id")},
            "reference": {"run_id": row.get("run_id"), "inputs": row_inputs(row)},
            "candidate": {"inputs": row_inputs(row)}, "changes": [],
            "points": [{k: row.get(k) for k in POINT_FIELDS}]}


def _records_of(regressions: dict, group: dict) -> list[dict]:
    session = group["session"]
    points = [tuple(p.get(k) for k in POINT_FIELDS) for p in group["points"]]
    return [r for r in regressions["records"] if r.get("kind") == "duet"
            and all(r.get(k) == session[k] for k in session)
            and tuple(r.get(k) for k in POINT_FIELDS) in points]


def settle_group(regressions: dict, group: dict, measured: dict, thresholds: DuetThresholds, tests: int) -> None:
    """Each pending record of the group gets its duet's finding (the detector's, `duet_*`), or `unconfirmed` with
    the reason. A change found is a `*_uncertain` verdict until its size alone settles it (tasks/regress/sizing.py)."""
    for record in _records_of(regressions, group):
        index = point_index(group, record)
        mine, flags = trusted_pairs([p for p in measured["pairs"] if p["load"] == index])
        record["duet"] = {"duet_id": group["duet_id"], "pairs": len(mine), "stop_reason": measured["stop_reason"],
                          "set_aside": flags,
                          "thresholds": {"threshold_pct": 100 * thresholds.threshold[record["metric"]],
                                         "noise_floor_pct": 100 * thresholds.noise_floor[record["metric"]],
                                         **thresholds.source}}
        if len(mine) < 2 and (measured.get("error") or flags):
            record.update(verdict="unconfirmed", reason=measured.get("error") or (
                f"{len(flags)} of the duet's pairs were set aside ({flags[0]}); fewer than 2 remain"))
            continue
        judged = next(j for j in judge_pairs(mine, thresholds, tests) if j["metric"] == record["metric"])
        record.update({f"duet_{k}": judged[k] for k in ("ratio", "ratio_ci", "change_pct", "p_value",
                                                          "p_improvement", "threshold_pct", "verdict")})
        record["duet_reason"] = (f"the duet (the detector) of {len(mine)} pairs: {record['metric']} "
                                 f"x{judged['ratio']:.3f} against {group['reference']['run_id']}"
                                 if judged["ratio"] else judged.get("reason") or "")
        record["verdict"], why = size_verdict(record["metric"], judged["verdict"], None)
        record["reason"] = f"{record['duet_reason']}; {why}"


def run_duets(started: dict, conversions: list[dict], regressions: dict, *, host: str | None = None,
              store: S3Store | None = None, measure: Callable = measure_duet,
              measure_alone: Callable = measure_interleaved) -> dict:
    """Measure the night's duets (with `host`, that host's) and settle their records; first tonight's A/A duet of
    the control cell where it was measured, whose noise sizes the night's thresholds on this host. A change a duet
    finds is then sized alone (`size_group`) and, where several parts of the inputs changed, taken apart
    (`attribute_group`)."""
    regressions = copy.deepcopy(regressions)
    plan = Plan.from_dict(started)
    config = plan.config
    groups = [g for g in regressions.get("duets", []) if host is None or g.get("host") in (host, None)]
    aa = regressions.get("aa")
    noise: dict = {}
    night = Night(started, config, store, measure=measure, measure_alone=measure_alone)
    if aa and (host is None or aa.get("host") in (host, None)) and config.duets:
        measured = measure_group(aa, night, pairs=(AA_PAIRS, AA_PAIRS))
        noise = {k: v for k, v in aa_noise(measured["pairs"]).items() if v is not None}
        regressions["aa"] = {**aa, "measured": measured, "noise": noise}
    tests = max(1, sum(len(g["points"]) for g in regressions.get("duets", [])) * len(DUET_METRICS))
    thresholds = DuetThresholds.detector(noise)
    night = replace(night, thresholds=thresholds, tests=tests)
    for group in groups:
        if not config.duets:
            for record in _records_of(regressions, group):
                record.update(verdict="unconfirmed", reason="Param duets is off: the change was not measured")
            continue
        measured = measure_group(group, night, pairs=(config.duet_min_pairs, config.duet_max_pairs))
        group["measured"] = measured
        settle_group(regressions, group, measured, thresholds, tests)
        records = _records_of(regressions, group)
        size_group(records, group, night)
        attribute_group(records, group, night)
    return {**regressions, **count_verdicts(regressions["records"])}


def count_verdicts(records: list[dict]) -> dict:
    """The night's counts: `regressions` and `improvements` include those whose size is uncertain (`uncertain`
    counts those apart)."""
    return {"regressions": sum(is_regression(r.get("verdict")) for r in records),
            "unconfirmed": sum(r.get("verdict") == "unconfirmed" for r in records),
            "improvements": sum(is_improvement(r.get("verdict")) for r in records),
            "uncertain": sum(str(r.get("verdict")).endswith("_uncertain") for r in records),
            "environment": sum(r.get("verdict") == "environment" for r in records),
            "pending": sum(r.get("verdict") == "pending" for r in records)}


def merge_duets(regressions: dict, parts: list[dict | None]) -> dict:
    """One regressions.json from the per-host duet tasks: each pending record as the part that settled it (still
    pending in every part: unconfirmed, no host measured it), the A/A and the duet groups as measured."""
    parts = [p for p in parts if p]
    records = []
    for i, record in enumerate(regressions.get("records", [])):
        settled = [p["records"][i] for p in parts if i < len(p.get("records", []))
                   and p["records"][i].get("verdict") != "pending"]
        chosen = dict(settled[0] if settled else record)
        if chosen.get("verdict") == "pending":
            chosen.update(verdict="unconfirmed", reason="no measuring task ran this cell's duet")
        records.append(chosen)
    measured_aa = next((p["aa"] for p in parts if (p.get("aa") or {}).get("measured")), regressions.get("aa"))
    groups = []
    for i, group in enumerate(regressions.get("duets", [])):
        done = [p["duets"][i] for p in parts if i < len(p.get("duets", [])) and p["duets"][i].get("measured")]
        groups.append(done[0] if done else group)
    return {**regressions, "aa": measured_aa, "duets": groups, "records": records, **count_verdicts(records)}


def live_references(regressions: dict) -> dict:
    """What tonight's references need kept on this host (never evicted: `python -m tasks.cli images prune`)."""
    images, artifacts, snapshots = set(), set(), set()
    for group in regressions.get("duets", []):
        inputs = group["reference"]["inputs"] or {}
        runtime = inputs.get("runtime") or {}
        if runtime.get("image"):
            images.add(str(runtime["image"]).rpartition("@")[2])
        artifacts.add(((inputs.get("model") or {}).get("artifact") or {}).get("key"))
        if runtime.get("files_sha256"):
            snapshots.add(f"{runtime.get('name')}-{runtime['files_sha256'][:16]}")
    return {"images": sorted(i for i in images if i), "artifacts": sorted(a for a in artifacts if a),
            "runtime_snapshots": sorted(snapshots)}


def references_json(regressions: dict) -> str:
    return json.dumps(live_references(regressions), indent=2, sort_keys=True)
