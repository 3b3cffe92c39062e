"""The night's duets: every cell whose inputs changed is measured beside its reference's, on the host that
measured it, after tonight's A/A duet of the control cell has measured the duet's own noise there.

    planned = plan_duets(references, plan)              # in the regression check (tasks/regress/check.py)
    regressions = run_duets(planned, conversions, regressions, host=...)   # one task per measuring host
    regressions = merge_duets(regressions, parts)       # the hosts' tasks put together, the verdicts settled

A duet group is one server session's changed cells that share their reference night: each cell's load point gets its
own pairs, and every pair runs on two servers started fresh for it (tasks/measure/duet.py); the sides are built from
their inputs records (tasks/regress/sides.py), and a reference that cannot be had again is reported as such
(`unconfirmed`, with the reason), never silently skipped. Both sides are driven by tonight's load generator. The
duet is the detector; a change it finds or leaves undecided is sized alone (tasks/regress/size_rounds.py) and, where
several parts of the inputs changed, taken apart part by part (tasks/regress/attribution.py).

The work is done one load point at a time in the order of regressions.json `order` (tasks/regress/order.py), each
point's duet, size and attribution before the next point's (tasks/regress/point.py), every pair and round within the
night's clock (tasks/regress/clock.py: `regress_deadline(plan.night)`); what it cuts is left for the next night
(tasks/regress/carry.py). Once every point is done, the verdicts are settled on the night's sizes
(`settle_records`): m, the sizes read tonight as the detector, is only known then.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace

from tasks.core.metadata import host_fingerprint
from tasks.core.results import SESSION_KEY
from tasks.core.verdicts import is_improvement, is_not_settled, is_regression
from tasks.plan.cells import Plan
from tasks.plan.control import control_cell, control_row
from tasks.plan.night import regress_deadline
from tasks.regress.clock import WorkClock
from tasks.regress.duet_verdict import DUET_METRICS, DuetThresholds, aa_noise
from tasks.regress.looks import Schedule
from tasks.regress.point import point_records, run_point, settle_point
from tasks.regress.references import Reference, row_inputs
from tasks.regress.sides import Measuring, Night, measure_pairs
from tasks.regress.size_rounds import POINT_FIELDS
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
                          "inputs": ref.reference_inputs, "inputs_sha": ref.reference.get("inputs_sha")},
            "candidate": {"inputs": row_inputs(row), "inputs_sha": row.get("inputs_sha")},
            "host_fingerprint": host_fingerprint(row), "changes": ref.changes, "points": []})
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
    return [r for i in range(len(group["points"])) for r in point_records(regressions, group, i)]


def measure_aa(aa: dict, night: Night) -> dict:
    """Tonight's A/A duet: AA_PAIRS pairs of the control cell, each within the night's clock."""
    steps = measure_pairs(aa, 0, night, Schedule((AA_PAIRS,)), lambda _kept: False)
    return {"pairs": steps.items, "error": steps.error, "stop_reason": steps.stop_reason, **steps.extra}


def settle_records(records: list[dict]) -> None:
    """Every duet record's verdict from its duet and its size alone (tasks/regress/size_verdict.py), with m the sizes
    read tonight as the detector (those of metrics whose duet was undecided and whose size has an interval)."""
    duets = [r for r in records if r.get("kind") == "duet" and "duet_verdict" in r]
    detector = sum(r["duet_verdict"] == "undecided" and (r.get("size") or {}).get("log_se") is not None
                   for r in duets)
    settle_point(duets, max(1, detector))


def _ordered(regressions: dict, groups: list[dict]) -> list[tuple[dict, int]]:
    """The night's load points in the order of `order` (any the order lacks after it, in the groups' order)."""
    by_id = {g["duet_id"]: g for g in groups}
    seen, out = set(), []
    for entry in regressions.get("order") or []:
        group = by_id.get(entry["duet_id"])
        if group is not None and entry["point"] < len(group["points"]):
            out.append((group, entry["point"]))
            seen.add((entry["duet_id"], entry["point"]))
    out += [(g, i) for g in groups for i in range(len(g["points"])) if (g["duet_id"], i) not in seen]
    return out


def run_duets(planned: dict, conversions: list[dict], regressions: dict, *, host: str | None = None,
              store: S3Store | None = None, measuring: Measuring | None = None) -> dict:
    """Measure the night's duets (with `host`, that host's) and settle their records; first tonight's A/A duet of
    the control cell where it was measured, whose noise sizes the night's thresholds on this host. Then each
    changed load point in the night's order: its duet, its size alone where the duet found a change or left one
    undecided, its parts where several changed (tasks/regress/point.py), every pair and round within the night's
    clock (`regress_deadline(plan.night)`, epoch seconds). `measuring` builds and measures the sides and tells the
    time (tests pass their own)."""
    regressions = copy.deepcopy(regressions)
    measuring = measuring or Measuring()
    plan = Plan.from_dict(planned)
    config = plan.config
    groups = [g for g in regressions.get("duets", []) if host is None or g.get("host") in (host, None)]
    aa = regressions.get("aa")
    noise: dict = {}
    night = Night(planned, config, store, measure=measuring.measure, measure_alone=measuring.measure_alone,
                  build=measuring.build, clock=WorkClock(regress_deadline(plan.night), measuring.now))
    if aa and (host is None or aa.get("host") in (host, None)) and config.duets:
        measured = measure_aa(aa, night)
        noise = {k: v for k, v in aa_noise(measured["pairs"]).items() if v is not None}
        regressions["aa"] = {**aa, "measured": measured, "noise": noise}
    tests = max(1, sum(len(g["points"]) for g in regressions.get("duets", [])) * len(DUET_METRICS))
    night = replace(night, thresholds=DuetThresholds.detector(noise), tests=tests)
    if not config.duets:
        for group in groups:
            for record in _records_of(regressions, group):
                record.update(verdict="unconfirmed", reason="Param duets is off: the change was not measured")
        return {**regressions, **count_verdicts(regressions["records"])}
    for group, index in _ordered(regressions, groups):
        run_point(regressions, group, index, night)
    for group in groups:
        group.pop("carried", None)  # pooled into the group's own pairs and rounds; `work` says from which night
    settle_records(regressions["records"])
    return {**regressions, **count_verdicts(regressions["records"])}


def count_verdicts(records: list[dict]) -> dict:
    """The night's counts: `regressions` and `improvements` include those whose size is uncertain (`uncertain`
    counts those apart); `undecided` and `disputed` are not settled (`not_settled` both), never `no_change`; `left`
    the records whose work the night's clock left for the next night."""
    return {"regressions": sum(is_regression(r.get("verdict")) for r in records),
            "unconfirmed": sum(r.get("verdict") == "unconfirmed" for r in records),
            "improvements": sum(is_improvement(r.get("verdict")) for r in records),
            "uncertain": sum(str(r.get("verdict")).endswith("_uncertain") for r in records),
            "undecided": sum(r.get("verdict") == "undecided" for r in records),
            "disputed": sum(r.get("verdict") == "disputed" for r in records),
            "not_settled": sum(is_not_settled(r.get("verdict")) for r in records),
            "left": sum(bool(r.get("left")) for r in records),
            "environment": sum(r.get("verdict") == "environment" for r in records),
            "pending": sum(r.get("verdict") == "pending" for r in records)}


def merge_duets(regressions: dict, parts: list[dict | None]) -> dict:
    """One regressions.json from the per-host duet tasks: each pending record as the part that settled it (still
    pending in every part: unconfirmed, no host measured it), the A/A and the duet groups as measured; the verdicts
    settled again over every host's sizes."""
    parts = [p for p in parts if p]
    records = []
    for i, record in enumerate(regressions.get("records", [])):
        settled = [p["records"][i] for p in parts if i < len(p.get("records", []))
                   and p["records"][i].get("verdict") != "pending"]
        chosen = dict(settled[0] if settled else record)
        if chosen.get("verdict") == "pending":
            chosen.update(verdict="unconfirmed", reason="no measuring task ran this cell's duet")
        records.append(chosen)
    settle_records(records)
    measured_aa = next((p["aa"] for p in parts if (p.get("aa") or {}).get("measured")), regressions.get("aa"))
    groups = []
    for i, group in enumerate(regressions.get("duets", [])):
        done = [p["duets"][i] for p in parts if i < len(p.get("duets", []))
                and (p["duets"][i].get("work") or p["duets"][i].get("measured"))]  # the host that took it on
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
