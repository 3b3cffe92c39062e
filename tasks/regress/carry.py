"""Regression work carried from one night to the next: a load point whose duet, size or attribution the night's
clock cut, or whose verdict is not settled, goes on the next night where it stopped.

    carry_over(groups, documents)     # in the regression check: earlier nights' regressions.json, oldest first
    note = left_note(work)            # "left for the next night: done ...; left ..."

Each night publishes, per changed load point of its duet groups (`duets[i].work`), what its work rests on (both
sides' `inputs_sha` and the host's fingerprint), each part's look schedule and the looks taken, and whether it is
done; its pairs and rounds are in the group's `measured`, `sizes` and `attribution`, each tagged with the night that
measured it. An unsettled verdict is nobody's reference (tasks/regress/references.py), so the next night finds the
same change again; its regression check then takes the newest earlier night's work on the same load point and,
while both sides' inputs and the host are unchanged, pools its pairs and rounds with tonight's: the looks go on
from where they stopped on the schedule they started on, at the alpha they started with (never a fresh one). Work
whose inputs or host changed is not pooled, and the point's record says why. Work that is done but unsettled (its
looks spent) is published again as it stands: nothing more is measured for that change until an input changes or
someone accepts it.
"""

from __future__ import annotations

from tasks.core.results import SESSION_KEY
from tasks.core.verdicts import is_not_settled
from tasks.regress.size_rounds import POINT_FIELDS

WORK_PARTS = ("duet", "size", "attribution")


def point_identity(group: dict, point: dict) -> tuple:
    """A load point's identity from night to night: its session (serving configuration included) and point."""
    session = group.get("session") or {}
    return (*(session.get(k) for k in (*SESSION_KEY, "config_id")), *(point.get(k) for k in POINT_FIELDS))


def rests_on(group: dict) -> dict:
    """What a group's work rests on: both sides' inputs and the host."""
    return {"reference_inputs_sha": group["reference"].get("inputs_sha"),
            "candidate_inputs_sha": group["candidate"].get("inputs_sha"), "host": group.get("host_fingerprint")}


def refusal(earlier: dict, tonight: dict) -> str | None:
    """Why earlier work cannot be pooled with tonight's (None: it can): a side's inputs or the host changed."""
    for key, what in (("reference_inputs_sha", "the reference's inputs"), ("candidate_inputs_sha", "tonight's inputs"),
                      ("host", "the host")):
        if earlier.get(key) != tonight.get(key):
            return f"{what} changed since ({str(earlier.get(key))[:16]} → {str(tonight.get(key))[:16]})"
    return None


def _unsettled(doc: dict, group: dict, index: int) -> bool:
    """Whether an earlier night's work on a load point was left unfinished or its verdict not settled."""
    work = (group.get("work") or {}).get(str(index)) or {}
    if work.get("left"):
        return True
    point = group["points"][index]
    session = group.get("session") or {}
    return any(r.get("kind") == "duet" and is_not_settled(r.get("verdict"))
               and all(r.get(k) == v for k, v in session.items()) and all(r.get(k) == point.get(k)
                                                                         for k in POINT_FIELDS)
               for r in doc.get("records") or [])


def _latest_work(documents: dict[str, dict]) -> dict[tuple, tuple[str, dict, dict, int]]:
    """Per load point identity: the newest earlier night with work on it (run id, document, group, point index)."""
    latest: dict[tuple, tuple[str, dict, dict, int]] = {}
    for run_id, doc in reversed(list(documents.items())):
        for group in doc.get("duets") or []:
            for key in group.get("work") or {}:
                index = int(key)
                latest.setdefault(point_identity(group, group["points"][index]), (run_id, doc, group, index))
    return latest


def _measured_at(group: dict, index: int, to: int) -> dict:
    """An earlier group's pairs, rounds and parts' pairs of its point `index`, as tonight's point `to`."""
    pairs = [{**p, "load": to} for p in (group.get("measured") or {}).get("pairs") or [] if p.get("load") == index]
    rounds = list(((group.get("sizes") or {}).get(str(index)) or {}).get("rounds") or [])
    parts = {d["part"]: [{**p, "load": to} for p in (d.get("measured") or {}).get("pairs") or []]
             for d in (group.get("attribution") or {}).get("duets") or [] if d.get("point") == index}
    return {"pairs": pairs, "rounds": rounds, "parts": parts}


def carry_over(groups: list[dict], documents: dict[str, dict]) -> None:
    """Attach to each group's load points the earlier work to go on with (`carried[<index>]`: the night it is
    from, its work record, its pairs, rounds and parts' pairs), or why it is not pooled (`refused`)."""
    latest = _latest_work(documents)
    for group in groups:
        for index, point in enumerate(group["points"]):
            found = latest.get(point_identity(group, point))
            if found is None or not _unsettled(found[1], found[2], found[3]):
                continue
            run_id, _, earlier, earlier_index = found
            work = earlier["work"][str(earlier_index)]
            why = refusal(work.get("rests_on") or {}, rests_on(group))
            carried = {"from_run_id": run_id}
            if why:
                carried["refused"] = f"the work of {run_id} on this point is not pooled: {why}"
            else:
                carried.update(work=work, **_measured_at(earlier, earlier_index, index))
            group.setdefault("carried", {})[str(index)] = carried


def left_note(work: dict) -> str | None:
    """"left for the next night: done its duet (6 pairs, look 2 of 2); left its size (5 of up to 12 rounds, look 1
    of 4), its attribution where needed", or None when the point's work is done."""
    done, left = [], []
    for part in WORK_PARTS:
        state = work.get(part)
        if state is None:
            continue
        (done if state.get("done") else left).append(f"its {part} ({describe(part, state)})")
    if not work.get("duet"):
        return ("left for the next night: nothing measured tonight (the night's clock ran out first); left its duet, "
                "then its size and attribution where needed")
    if not left:
        return None
    first = next(p for p in WORK_PARTS if work.get(p) and not work[p].get("done"))
    later = [f"its {p} where needed" for p in WORK_PARTS[WORK_PARTS.index(first) + 1:] if work.get(p) is None]
    return "left for the next night: " + "; ".join(
        x for x in (f"done {', '.join(done)}" if done else "", f"left {', '.join(left + later)}") if x)


def describe(part: str, state: dict) -> str:
    """How far one part of a point's work got: its pairs or rounds, of how many at most, its looks."""
    looks = state.get("schedule") or {}
    unit = "rounds" if part == "size" else "pairs"
    if part == "attribution":
        return ", ".join(f"{name}: {describe('duet', s)}" for name, s in (state.get("parts") or {}).items()) \
            or "no parts measured"
    got = state.get(unit)
    return (f"{got} {unit}" if state.get("done") else f"{got} of up to {(looks.get('looks') or ['?'])[-1]} {unit}") \
        + f", look {state.get('looks_taken', 0)} of {looks.get('of', '?')}"
