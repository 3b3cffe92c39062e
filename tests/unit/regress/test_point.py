"""One changed load point's work (tasks/regress/point.py) with replayed pairs and rounds and no server: its duet is
judged at the latest look its pairs reached (undecided before the first), a reference that cannot be had is
unconfirmed with the reason, a point whose duet decided no change everywhere is not sized, one whose duet found a
change is sized, and a record's reason says what the night left of its work."""

from __future__ import annotations

from dataclasses import replace

from tasks.plan.cells import Plan, Session
from tasks.regress.clock import WorkClock
from tasks.regress.duet_verdict import DUET_METRICS, DUET_THRESHOLD, DuetThresholds
from tasks.regress.looks import Schedule
from tasks.regress.point import judge_point, point_records, run_point, settle_point
from tasks.regress.sides import Night, Steps
from tests.recorded_duets import Replay, cell, changed_night, planned
from tests.unit.regress.test_duet_verdict import pairs_of
from tests.unit.regress.test_size_verdict import rounds_of

CELL = cell(load=2.0)
DUET_ID = "duet0.mlp.onnx.custom"
# floors far under the pairs' spread: what the tests check is the looks, not the noise floor
TIGHT = DuetThresholds(dict(DUET_THRESHOLD), {m: 0.001 for m in DUET_METRICS})


def night_with(replay: Replay) -> tuple[dict, Night]:
    run = planned([Session("s0", "mlp", "onnx", "custom", (CELL,))])
    night = Night(run, Plan.from_dict(run).config, None, TIGHT, 4, measure=replay.measure,
                  measure_alone=replay.measure_alone, build=replay.build, clock=WorkClock(None, replay.now))
    return changed_night([CELL], run), night


def test_a_duet_before_its_first_look_is_undecided_and_at_a_look_is_judged_on_that_looks_pairs():
    regressions, _ = night_with(Replay())
    group = regressions["duets"][0]
    records = point_records(regressions, group, 0)
    judge_point(records, group, Steps(pairs_of(0.8, 0.001, 2)), Schedule((3, 6)), 4, TIGHT)
    cpu = next(r for r in records if r["metric"] == "server_cpu_us_per_request")
    assert cpu["duet_verdict"] == "undecided" and cpu["verdict"] == "undecided"
    assert "reached no look yet (its first at 3)" in cpu["reason"]
    judge_point(records, group, Steps(pairs_of(0.8, 0.001, 5)), Schedule((3, 6)), 4, TIGHT)
    assert cpu["duet"]["pairs"] == 3 and cpu["duet"]["measured_pairs"] == 5  # the look's 3, not all 5
    assert cpu["duet"]["looks"] == {"looks": [3, 6], "of": 2, "taken": 1, "at": 3}
    assert cpu["duet_verdict"] == "regression" and "look 1 of 2" in cpu["duet_reason"]


def test_a_reference_that_cannot_be_had_is_unconfirmed_with_the_reason():
    regressions, _ = night_with(Replay())
    group = regressions["duets"][0]
    records = point_records(regressions, group, 0)
    error = "the reference cannot be served again: StoreError: runtimes/custom/9f2c… not in the store"
    judge_point(records, group, Steps([], "stopped by an error after 0", True, error), Schedule((3, 6)), 4, TIGHT)
    assert {r["verdict"] for r in records} == {"unconfirmed"} and records[0]["reason"] == error


def test_a_point_whose_duet_decided_no_change_everywhere_is_not_sized():
    replay = Replay(pairs={DUET_ID: pairs_of(1.0, 0.001, 6)}, rounds={f"{DUET_ID}.size0": rounds_of(1.0, 0.01, 12)})
    regressions, night = night_with(replay)
    group = regressions["duets"][0]
    run_point(regressions, group, 0, night)
    assert [duet_id for duet_id, _ in replay.calls] == [DUET_ID] * 3  # settled at its first look; no round
    work = group["work"]["0"]
    assert work["size"] is None and work["attribution"] is None and work["left"] is None
    assert {r["verdict"] for r in point_records(regressions, group, 0)} == {"no_change"}


def test_a_point_whose_duet_found_a_change_is_sized_and_one_part_is_not_taken_apart():
    replay = Replay(pairs={DUET_ID: pairs_of(0.8, 0.001, 6)}, rounds={f"{DUET_ID}.size0": rounds_of(1.25, 0.01, 12)})
    regressions, night = night_with(replay)
    group = regressions["duets"][0]
    run_point(regressions, group, 0, night)
    assert replay.calls[3:] == [(f"{DUET_ID}.size0.size", i) for i in range(4)]  # decided at the size's first look
    # each pair's and round's progress line counts against the whole schedule, not the one-item call measuring it
    assert replay.lefts == [f"pair {i} of at most 6 at load 1 of 1" for i in (1, 2, 3)] + [
        f"round {i} of at most 12 at load 1 of 1" for i in (1, 2, 3, 4)]
    work = group["work"]["0"]
    assert work["duet"]["done"] and work["size"]["rounds"] == 4 and work["size"]["looks_taken"] == 1
    assert work["attribution"] is None  # the model alone changed: nothing to take apart
    cpu = next(r for r in point_records(regressions, group, 0) if r["metric"] == "server_cpu_us_per_request")
    assert cpu["verdict"] == "regression" and cpu["change_ci"][0] > 5.0


def test_the_reason_says_what_is_left_and_why_earlier_work_was_not_pooled():
    record = {"metric": "server_cpu_us_per_request", "duet_verdict": "undecided",
              "duet_reason": "the duet's 2 pair(s) reached no look yet (its first at 3)",
              "left": "left for the next night: left its duet (2 of up to 6 pairs, look 0 of 2)",
              "not_pooled": "the work of night2 on this point is not pooled: the host changed since"}
    settle_point([record])
    assert record["verdict"] == "undecided"
    assert record["reason"].endswith("; left for the next night: left its duet (2 of up to 6 pairs, look 0 of 2); "
                                     "the work of night2 on this point is not pooled: the host changed since")
    unconfirmed = {"metric": "throughput_rps", "verdict": "unconfirmed", "reason": "no side"}
    settle_point([unconfirmed])
    assert unconfirmed["reason"] == "no side"  # a duet never judged keeps its verdict and reason


def test_the_nights_deadline_before_the_first_pair_leaves_the_whole_point():
    replay = Replay(pairs={DUET_ID: pairs_of(0.8, 0.001, 6)})
    regressions, night = night_with(replay)
    night = replace(night, clock=WorkClock(replay.t + 5.0, replay.now))  # less than one pair's first guess
    group = regressions["duets"][0]
    run_point(regressions, group, 0, night)
    assert replay.calls == []
    cpu = next(r for r in point_records(regressions, group, 0) if r["metric"] == "server_cpu_us_per_request")
    assert cpu["verdict"] == "undecided" and cpu["left"].startswith("left for the next night: left its duet (0 of")
