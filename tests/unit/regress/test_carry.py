"""Work carried to the next night (tasks/regress/carry.py): pooled while both sides' inputs and the host are the same,
refused (and said) when either changed, not carried once settled; and what a record says is left."""

from __future__ import annotations

import json

from tasks.plan.cells import Session
from tasks.regress.carry import carry_over, left_note
from tasks.regress.night_duets import run_duets
from tests.recorded_duets import Replay, cell, changed_night, planned, trial

CELL = cell(load=2.0)
DUET_ID = "duet0.mlp.onnx.custom"


def cut_night() -> dict:
    """A night whose deadline (150 s after its start) lets the duet's 6 pairs (10 s each) and 4 size rounds (20 s
    each) through, and cuts the rest of the size: published, as the next night reads it."""
    run = planned([Session("s0", "mlp", "onnx", "custom", (CELL,))],
                  {"started_at_s": 1_000_000.0, "regress_end_s": 150.0}, run_id="night2")
    recorded = trial("custom/onnx/heavy", "5")
    replay = Replay(pairs={DUET_ID: recorded["pairs"]}, rounds={f"{DUET_ID}.size0": recorded["rounds"]})
    out = run_duets(run, [], changed_night([CELL], run), measuring=replay.measuring())
    return json.loads(json.dumps(out))  # as the store gives it back


def test_work_the_clock_cut_is_pooled_the_next_night_while_its_inputs_and_host_hold():
    earlier = cut_night()
    (work,) = earlier["duets"][0]["work"].values()
    assert not work["size"]["done"] and work["size"]["rounds"] == 4 and work["left"].startswith("left for the next")
    run = planned([Session("s0", "mlp", "onnx", "custom", (CELL,))], run_id="night3")
    (group,) = changed_night([CELL], run, {"night2": earlier})["duets"]
    carried = group["carried"]["0"]
    assert carried["from_run_id"] == "night2" and carried["work"] == work
    assert len(carried["pairs"]) == 6 and len(carried["rounds"]) == 4
    assert {p["night"] for p in carried["pairs"]} == {"night2"}


def test_work_is_not_pooled_when_the_inputs_or_the_host_changed():
    earlier = {"night2": cut_night()}
    run = planned([Session("s0", "mlp", "onnx", "custom", (CELL,))], run_id="night3")
    (group,) = changed_night([CELL], run, earlier, candidate="c" * 64)["duets"]
    assert group["carried"]["0"]["refused"].startswith("the work of night2 on this point is not pooled: tonight's "
                                                       "inputs changed since")
    (group,) = changed_night([CELL], run, earlier, cpu_model="Xeon")["duets"]
    assert "the host changed since (EPYC|2|None → Xeon|2|None)" in group["carried"]["0"]["refused"]
    assert "pairs" not in group["carried"]["0"]


def test_settled_work_is_not_carried():
    earlier = cut_night()
    earlier["duets"][0]["work"]["0"]["left"] = None
    for record in earlier["records"]:
        record["verdict"] = "regression"
    groups = changed_night([CELL], planned([Session("s0", "mlp", "onnx", "custom", (CELL,))]), {})["duets"]
    carry_over(groups, {"night2": earlier})
    assert "carried" not in groups[0]


def test_what_is_left_is_said():
    duet = {"schedule": {"looks": [3, 6], "of": 2}, "pairs": 6, "looks_taken": 2, "done": True}
    size = {"schedule": {"looks": [4, 6, 8, 12], "of": 4}, "rounds": 5, "looks_taken": 1, "done": False}
    assert left_note({"duet": duet, "size": size, "attribution": None}) == (
        "left for the next night: done its duet (6 pairs, look 2 of 2); left its size (5 of up to 12 rounds, look 1 "
        "of 4), its attribution where needed")
    assert left_note({"duet": {**duet, "done": False, "pairs": 2, "looks_taken": 0}, "size": None,
                      "attribution": None}).endswith("left its duet (2 of up to 6 pairs, look 0 of 2), its size where "
                                                     "needed, its attribution where needed")
    assert left_note({"duet": duet, "size": {**size, "done": True}, "attribution": None}) is None
