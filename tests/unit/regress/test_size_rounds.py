"""Sizing a changed load point (tasks/regress/size_rounds.py) with recorded rounds and no server: only a point whose
duet found a change or left one undecided is sized, its rounds stop at the first look that decides every such metric,
and each record gets its size at that look with its looks and confidence."""

from __future__ import annotations

import pytest

from tasks.plan.cells import Plan
from tasks.regress.clock import WorkClock
from tasks.regress.looks import size_schedule
from tasks.regress.sides import Night
from tasks.regress.size_rounds import apply_sizes, needs_size, size_point
from tests.recorded_duets import Replay, planned, trial
from tests.unit.regress.test_size_verdict import rounds_of

POINT = {"batch_size": 1, "mode": "concurrency", "load": 4.0, "protocol": None}
METRICS = ("server_cpu_us_per_request", "throughput_rps", "latency_ms_p50", "latency_ms_p99")


def record(metric: str, duet_verdict: str) -> dict:
    return {"metric": metric, **POINT, "duet_verdict": duet_verdict, "duet_reason": "the duet of 6 pairs",
            "verdict": "pending"}


def night_of(replay: Replay, **config) -> Night:
    run = planned([], **config)
    return Night(run, Plan.from_dict(run).config, None, measure_alone=replay.measure_alone, build=replay.build,
                 clock=WorkClock(None, replay.now))


def test_a_point_is_sized_when_its_duet_found_a_change_or_left_one_undecided():
    assert needs_size([record("throughput_rps", "no_change"), record("latency_ms_p99", "undecided")])
    assert needs_size([record("server_cpu_us_per_request", "regression")])
    assert not needs_size([record("throughput_rps", "no_change"), record("latency_ms_p99", "no_change")])


def test_each_record_gets_its_size_at_the_rounds_latest_look():
    records = [record("server_cpu_us_per_request", "regression"), record("latency_ms_p99", "no_change")]
    measured = {"rounds": [{**r, "night": "n1"} for r in rounds_of(1.25, 0.01, 9)], "error": None, "seconds": 90.0,
                "round_s": 10.0, "stop_reason": "its last look"}
    apply_sizes(records, POINT, measured, size_schedule(12), 25.0)
    cpu, p99 = records
    assert cpu["change_ci"][0] > 20.0 and cpu["size"]["rounds"] == 8  # the third look's 8 rounds, not all 9
    assert cpu["size"]["looks"] == {"looks": [4, 6, 8, 12], "of": 4, "taken": 3, "at": 8}
    assert cpu["size"]["confidence_pct"] == pytest.approx(98.75) and cpu["size"]["nights"] == ["n1"]
    assert p99["change_pct"] is not None  # published beside: the verdict table reads it (a dispute, if beyond)


def test_the_rounds_stop_at_the_look_that_decides_and_the_size_budget_cuts_the_rest():
    """Recorded rounds of a 10 % step on Triton: decided at the second look, 6 rounds; with a size budget of 110 s
    and rounds of 20 s the sixth round would not end within it: the size is not done, left for the next night, and
    its records carry the first look's interval (4 rounds; the fifth waits for the next look)."""
    group = {"duet_id": "d", "points": [POINT]}
    records = [record(m, "regression") for m in METRICS]
    replay = Replay(rounds={"d.size0": trial("triton/onnx/heavy", "10")["rounds"]})
    state = size_point(records, group, 0, night_of(replay), {})
    assert state["rounds"] == 6 and state["done"] and state["stop_reason"].startswith("settled at look 2 of 4")
    assert len(replay.calls) == 6 and all(r["verdict"] == "pending" for r in records)  # settled with the night's
    assert all(r["size"]["looks"]["taken"] == 2 for r in records)
    replay = Replay(rounds={"d.size0": trial("triton/onnx/heavy", "10")["rounds"]})
    records = [record(m, "regression") for m in METRICS]
    state = size_point(records, group, 0, night_of(replay, size_budget_s=110.0), {})
    assert state["rounds"] == 5 and not state["done"] and "budget of 110 s" in state["stop_reason"]
    assert records[0]["size"]["rounds"] == 4 and records[0]["size"]["looks"]["taken"] == 1
    assert group["sizes"]["0"]["looks"] == {"looks": [4, 6, 8, 12], "of": 4}


def test_a_size_carried_from_an_earlier_night_goes_on_with_its_schedule():
    group = {"duet_id": "d", "points": [POINT]}
    rounds = trial("triton/onnx/heavy", "10")["rounds"]
    carried = {"work": {"size": {"schedule": {"looks": [4, 6, 8, 12], "of": 4}, "done": False}},
               "rounds": [{**r, "night": "n1"} for r in rounds[:5]]}
    replay = Replay(rounds={"d.size0": rounds})
    records = [record(m, "regression") for m in METRICS]
    state = size_point(records, group, 0, night_of(replay, size_rounds=8), carried)
    assert replay.calls == [("d.size0.size", 5)]  # one round more reaches the second look, where it is decided
    assert state["schedule"] == {"looks": [4, 6, 8, 12], "of": 4}  # not tonight's size_rounds (8)
    assert records[0]["size"]["nights"] == ["n1", "tonight"]
