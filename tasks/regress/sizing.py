"""Once a duet finds a change, its size as the stack shows it alone: the cell's load point measured in interleaved
solo rounds (tasks/measure/interleaved.py), each metric's size and interval read off them (tasks/regress/size.py),
and the record's verdict settled on both.

    size_group(regressions, group, started, config, store)      # after the group's duet has settled its records

Only the load points whose duet found a change in some metric are sized, each within `size_budget_s` and at most
`size_rounds` rounds (Params): a night whose duets found nothing spends no time here.
"""

from __future__ import annotations

from tasks.regress.sides import Night, build_sides, unavailable
from tasks.regress.size import SCOPE, SIZE_METRICS, UNCERTAIN, size_metric, size_verdict, trusted_rounds

POINT_FIELDS = ("batch_size", "mode", "load", "protocol")


def point_index(group: dict, record: dict) -> int:
    return next(i for i, p in enumerate(group["points"]) if all(p.get(k) == record.get(k) for k in POINT_FIELDS))


def detected_points(records: list[dict], group: dict) -> list[int]:
    """The group's load points at which the duet found a change in some metric."""
    return sorted({point_index(group, r) for r in records if r.get("duet_verdict") in UNCERTAIN})


def measure_sizes(group: dict, index: int, night: Night) -> dict:
    """The interleaved rounds of the group's load point `index` (its record: rounds, error, stop_reason, seconds)."""
    try:
        settings, reference, candidate = build_sides(group, night, duet_id=f"{group['duet_id']}.size{index}")
    except Exception as exc:  # noqa: BLE001 - a side that cannot be had: the size is not measured, and says why
        return {"rounds": [], "error": unavailable(exc), "stop_reason": "", "seconds": 0.0}
    config = night.config
    return night.measure_alone(reference, candidate, settings, load_index=index, rounds=config.size_rounds,
                               budget_s=config.size_budget_s,
                               seed=f"{night.started['run']['run_id']}:{group['duet_id']}:{index}").to_dict()


def apply_sizes(records: list[dict], point: dict, measured: dict, max_neighbour_pct: float) -> None:
    """Each record of one load point gets its size alone (`change_pct`, `change_ci`, `size`) and its verdict."""
    rounds, flags = trusted_rounds(measured.get("rounds") or [], max_neighbour_pct)
    for record in records:
        metric = record["metric"]
        size = size_metric(rounds, metric, point["mode"]) if metric in SIZE_METRICS else None
        if size is not None and size["change_ci"] is None and measured.get("error"):
            size["reason"] = f"{size['reason']}; the rounds stopped: {measured['error'][:500]}"
        record.update(change_pct=(size or {}).get("change_pct"), change_ci=(size or {}).get("change_ci"))
        record["size"] = {"scope": SCOPE, "rounds": (size or {}).get("rounds", 0), "set_aside": flags,
                          "left_out": (size or {}).get("left_out", 0), "reason": (size or {}).get("reason"),
                          "confidence_pct": (size or {}).get("confidence_pct"), "seconds": measured.get("seconds"),
                          "round_s": measured.get("round_s"), "stop_reason": measured.get("stop_reason"),
                          "error": measured.get("error")}
        verdict, why = size_verdict(metric, record.get("duet_verdict", "no_change"), size)
        record["verdict"] = verdict
        record["reason"] = f"{record.get('duet_reason', '')}; {why}".lstrip("; ")


def size_group(records: list[dict], group: dict, night: Night) -> None:
    """Size every load point of the group whose duet found a change, and settle its records on the size."""
    if night.config.size_rounds == 0:
        for record in records:
            if record.get("duet_verdict") in UNCERTAIN:
                record["reason"] += " (Param size_rounds is 0)"
        return
    sizes = group.setdefault("sizes", {})
    for index in detected_points(records, group):
        measured = measure_sizes(group, index, night)
        sizes[str(index)] = measured
        mine = [r for r in records if point_index(group, r) == index]
        apply_sizes(mine, group["points"][index], measured, night.config.max_neighbour_pct)
