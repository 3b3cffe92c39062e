"""One changed load point's regression work: its duet look by look, then its size alone, then which part caused
it, and what the night's clock left for the next night.

    run_point(regressions, group, index, night)     # in the order of regressions.json `order` (tasks/regress/order.py)

The point's records (one per duet metric) get the duet's finding at the look where it stopped (`duet_*`, the detector's,
tasks/regress/duet_verdict.py), the size alone at the look where the rounds stopped (tasks/regress/size_rounds.py),
their cause where several parts changed (tasks/regress/attribution.py), and `left` where the clock cut any of it; their
verdicts are settled once the night's sizes are all read (tasks/regress/night_duets.py `settle_records`). The group's
`work[<index>]` records what the work rests on, each part's looks, and whether it is done (tasks/regress/carry.py
carries it to the next night).
"""

from __future__ import annotations

from tasks.regress.attribution import attribute_point
from tasks.regress.carry import left_note, rests_on
from tasks.regress.duet_verdict import DuetThresholds, decided, judge_pairs
from tasks.regress.looks import Schedule, duet_schedule
from tasks.regress.sides import Night, Steps, measure_pairs, trusted_pairs
from tasks.regress.size_rounds import POINT_FIELDS, size_point
from tasks.regress.size_verdict import size_verdict, verdict_interval

DUET_FIELDS = ("ratio", "ratio_ci", "change_pct", "p_value", "p_improvement", "threshold_pct", "verdict")


def point_records(regressions: dict, group: dict, index: int) -> list[dict]:
    """The duet records of the group's load point `index`."""
    session, point = group["session"], group["points"][index]
    return [r for r in regressions["records"] if r.get("kind") == "duet"
            and all(r.get(k) == session[k] for k in session) and all(r.get(k) == point.get(k) for k in POINT_FIELDS)]


def _thresholds_of(thresholds: DuetThresholds, metric: str) -> dict:
    return {"threshold_pct": 100 * thresholds.threshold[metric],
            "noise_floor_pct": 100 * thresholds.noise_floor[metric], **thresholds.source}


def judge_point(records: list[dict], group: dict, steps: Steps, schedule: Schedule, tests: int,
                thresholds: DuetThresholds) -> None:
    """Each record of the point gets its duet's finding at the latest look its trusted pairs reached (`undecided`
    before the first look), or `unconfirmed` with the reason where the duet could not be measured."""
    kept, flags = trusted_pairs(steps.items)
    look = schedule.latest(len(kept))
    judged = {j["metric"]: j for j in judge_pairs(kept[:look], thresholds, tests, looks=schedule.count)} if look else {}
    for record in records:
        metric = record["metric"]
        record["duet"] = {"duet_id": group["duet_id"], "pairs": look or len(kept), "measured_pairs": len(kept),
                          "stop_reason": steps.stop_reason, "set_aside": flags, "tests": tests,
                          "looks": {**schedule.to_dict(), "taken": schedule.taken(len(kept)), "at": look},
                          "nights": sorted({str(p.get("night")) for p in kept}),
                          "thresholds": _thresholds_of(thresholds, metric)}
        if look is None and (steps.error or (flags and steps.done)):
            record.update(verdict="unconfirmed", reason=steps.error or (
                f"{len(flags)} of the duet's pairs were set aside ({flags[0]}); too few remain for a look"))
            continue
        if look is None:
            record.update(duet_verdict="undecided", duet_reason=(
                f"the duet's {len(kept)} pair(s) reached no look yet (its first at {schedule.looks[0]})"))
        else:
            j = judged[metric]
            record.update({f"duet_{k}": j[k] for k in DUET_FIELDS})
            record["duet_reason"] = (
                f"the duet (the detector) of {look} pairs, look {schedule.taken(look)} of {schedule.count}: "
                f"{metric} x{j['ratio']:.3f} against {group['reference']['run_id']}"
                if j["ratio"] else j.get("reason") or "")
        record["verdict"], why = size_verdict(metric, record["duet_verdict"], None)
        record["reason"] = f"{record['duet_reason']}; {why}"


def _merge_measured(group: dict, index: int, steps: Steps) -> None:
    """The group's `measured` (every point's pairs, as the report and the next night read them) with this point's."""
    measured = group.setdefault("measured", {"pairs": [], "error": None, "stop_reason": ""})
    measured["pairs"] = [p for p in measured["pairs"] if p.get("load") != index] + steps.items
    measured["error"] = measured.get("error") or steps.error
    stops = [s for s in str(measured.get("stop_reason") or "").split("; ") if s and not s.startswith(f"load {index}:")]
    measured["stop_reason"] = "; ".join([*stops, f"load {index}: {steps.stop_reason}"])
    for key, value in steps.extra.items():
        measured.setdefault(key, value)


def duet_point(records: list[dict], group: dict, index: int, night: Night, carried: dict) -> dict:
    """The point's duet, look by look, going on with `carried` work; its records judged. Its duet state."""
    earlier = (carried.get("work") or {}).get("duet")
    config = night.config
    schedule = Schedule.from_dict(earlier["schedule"]) if earlier else duet_schedule(config.duet_min_pairs,
                                                                                     config.duet_max_pairs)
    tests = earlier["tests"] if earlier else night.tests  # the alpha it started with, never a fresh one

    def settled(kept: list[dict]) -> bool:
        return decided(kept, night.thresholds, tests, looks=schedule.count)

    if earlier and earlier.get("done"):
        steps = Steps(list(carried.get("pairs") or []), earlier.get("stop_reason", ""), True)
    else:
        steps = measure_pairs(group, index, night, schedule, settled, carried.get("pairs") or [])
    _merge_measured(group, index, steps)
    judge_point(records, group, steps, schedule, tests, night.thresholds)
    kept, flags = trusted_pairs(steps.items)
    return {"schedule": schedule.to_dict(), "tests": tests, "pairs": len(kept), "set_aside": len(flags),
            "looks_taken": schedule.taken(len(kept)), "done": steps.done, "stop_reason": steps.stop_reason,
            "error": steps.error}


def run_point(regressions: dict, group: dict, index: int, night: Night) -> None:
    """The point's duet, then (where its duet calls for it and the duet is done) its size, then (where several
    parts changed and a metric's whole change was decided) its attribution; `left` on its records where the clock
    cut any of it."""
    records = point_records(regressions, group, index)
    carried = (group.get("carried") or {}).get(str(index)) or {}
    pooled = {} if carried.get("refused") else carried
    work: dict = {"point": index, "rests_on": rests_on(group), "carried_from": pooled.get("from_run_id"),
                  "not_pooled": carried.get("refused"), "duet": None, "size": None, "attribution": None}
    group.setdefault("work", {})[str(index)] = work
    work["duet"] = duet_point(records, group, index, night, pooled)
    if work["duet"]["done"] and not work["duet"]["error"]:
        work["size"] = size_point(records, group, index, night, pooled)
        if work["size"] is None or work["size"]["done"]:
            settle_point(records)  # the verdicts of the metrics whose duet found a change: what is attributed
            kept = trusted_pairs([p for p in group["measured"]["pairs"] if p.get("load") == index])[0]
            look = Schedule.from_dict(work["duet"]["schedule"]).latest(len(kept)) or len(kept)
            work["attribution"] = attribute_point(records, group, index, night, pooled, kept[:look])
    work["left"] = left_note(work)
    work["nights"] = sorted({str(p.get("night")) for p in group["measured"]["pairs"] if p.get("load") == index})
    for record in records:
        record["left"] = work["left"]
        if work["not_pooled"]:
            record["not_pooled"] = work["not_pooled"]


def settle_point(records: list[dict], detector_tests: int = 1) -> None:
    """Each record's verdict from its duet's finding and its size alone (tasks/regress/size_verdict.py), and its reason:
    the duet's, the size's, the cause, what is left for the next night."""
    for record in records:
        if record.get("verdict") == "unconfirmed" and "duet_verdict" not in record:
            continue
        size = record.get("size") if (record.get("size") or {}).get("looks") else None
        duet = record.get("duet_verdict", "undecided")
        record["verdict"], why = size_verdict(record["metric"], duet, size, detector_tests)
        if size is not None:  # the interval printed beside the verdict is the one it rests on
            record["change_ci"], size["verdict_confidence_pct"] = verdict_interval(duet, size, detector_tests)
        parts = [record.get("duet_reason"), why, f"cause: {record['cause']}" if record.get("cause") else None,
                 record.get("left"), record.get("not_pooled")]
        record["reason"] = "; ".join(p for p in parts if p)
