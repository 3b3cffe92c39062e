"""A changed load point's size as the stack shows it alone: interleaved solo rounds (tasks/measure/interleaved.py)
measured look by look (tasks/regress/looks.py), each metric's size and interval read off them at the look where
they stopped (tasks/regress/size_verdict.py).

    state = size_point(records, group, index, night, carried)    # after the point's duet has judged its records

A point is sized when its duet found a change in some metric or left one undecided: rounds are added until, at a
look of `size_schedule(size_rounds)`, every such metric's interval is decided against the minimum effect, or the
schedule's last look, or the clock (the night's deadline, Param size_budget_s). Its verdicts are settled once the
night's sizes are all read (`settle_records`, tasks/regress/night_duets.py): how many sizes were read as the detector is
only known then. A night whose duets found nothing and left nothing undecided spends no time here.
"""

from __future__ import annotations

import statistics

from tasks.regress.looks import Schedule, size_schedule
from tasks.regress.sides import Night, Steps, measure_rounds
from tasks.regress.size_verdict import (
    FLAGGED,
    SCOPE,
    SIZE_METRICS,
    look_confidence_pct,
    size_at_look,
    size_metric,
    sizes_settled,
    trusted_rounds,
)

POINT_FIELDS = ("batch_size", "mode", "load", "protocol")
SIZE_FIELDS = ("change_pct", "change_ci", "confidence_pct", "log_mean", "log_se", "df", "looks", "reason", "rounds",
               "left_out")


def needs_size(records: list[dict]) -> bool:
    """Whether a point's duet found a change or left one undecided in a metric the rounds size."""
    return any(r.get("duet_verdict") in FLAGGED and r["metric"] in SIZE_METRICS for r in records)


def apply_sizes(records: list[dict], point: dict, measured: dict, schedule: Schedule, max_neighbour_pct: float) -> None:
    """Each record of one load point gets its size alone at the rounds' latest look (`change_pct`, `change_ci`,
    `size`: its looks, confidence and what it rests on)."""
    rounds, flags = trusted_rounds(measured.get("rounds") or [], max_neighbour_pct)
    for record in records:
        metric = record["metric"]
        size = size_at_look(rounds, metric, point["mode"], schedule) if metric in SIZE_METRICS else None
        if size is not None and size["change_ci"] is None and measured.get("error"):
            size["reason"] = f"{size['reason']}; the rounds stopped: {measured['error'][:500]}"
        record.update(change_pct=(size or {}).get("change_pct"), change_ci=(size or {}).get("change_ci"))
        record["size"] = {"scope": SCOPE, "set_aside": flags, "seconds": measured.get("seconds"),
                          "round_s": measured.get("round_s"), "stop_reason": measured.get("stop_reason"),
                          "error": measured.get("error"), "nights": sorted({str(r.get("night")) for r in rounds}),
                          **{k: (size or {}).get(k) for k in SIZE_FIELDS}, "rounds": (size or {}).get("rounds", 0)}


def size_point(records: list[dict], group: dict, index: int, night: Night, carried: dict) -> dict | None:
    """Size the group's load point `index` where its duet calls for it, going on with `carried` work (an earlier
    night's, tasks/regress/carry.py); the point's size state (None: not sized)."""
    earlier = (carried.get("work") or {}).get("size")
    if not needs_size(records) and earlier is None:
        return None
    if night.config.size_rounds == 0 and earlier is None:
        for record in records:
            record["size"] = {"scope": SCOPE, "rounds": 0, "reason": "Param size_rounds is 0: not sized"}
        return None
    schedule = Schedule.from_dict(earlier["schedule"]) if earlier else size_schedule(night.config.size_rounds)
    verdicts = {r["metric"]: r.get("duet_verdict") for r in records}
    mode = group["points"][index]["mode"]

    def settled(kept: list[dict]) -> bool:
        confidence = look_confidence_pct(schedule)
        return sizes_settled({m: size_metric(kept, m, mode, confidence) for m in SIZE_METRICS}, verdicts)

    if earlier and earlier.get("done"):
        steps = Steps(list(carried.get("rounds") or []), earlier.get("stop_reason", ""), True)
    else:
        steps = measure_rounds(group, index, night, schedule, settled, carried.get("rounds") or [])
    measured = {"rounds": steps.items, "error": steps.error, "stop_reason": steps.stop_reason,
                "seconds": round(sum(steps.seconds), 1),
                "round_s": round(statistics.fmean(steps.seconds), 1) if steps.seconds else None,
                "looks": schedule.to_dict()}
    group.setdefault("sizes", {})[str(index)] = measured
    apply_sizes(records, group["points"][index], measured, schedule, night.config.max_neighbour_pct)
    kept, flags = trusted_rounds(steps.items, night.config.max_neighbour_pct)
    return {"schedule": schedule.to_dict(), "rounds": len(kept), "set_aside": len(flags),
            "looks_taken": schedule.taken(len(kept)), "done": steps.done, "stop_reason": steps.stop_reason}
