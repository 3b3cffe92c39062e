"""The night's regression work (tasks/regress/night_duets.py) with recorded pairs and rounds and no server (the
measuring functions replay them, tests/recorded_duets.py): tonight's A/A duet first, then each changed load point's
duet, size and attribution in the night's order; the deadline cuts what would not end before it, which is left for the
next night and finished there on the same looks; every row of the verdict table, counted."""

from __future__ import annotations

import json

from tasks.plan.cells import Session
from tasks.regress.night_duets import count_verdicts, merge_duets, run_duets
from tests.recorded_duets import Replay, cell, changed_night, equal_pairs, planned, trial

DUET_ID = "duet0.mlp.onnx.custom"
ONE, FOUR = cell(load=1.0), cell(load=4.0)
SESSIONS = [Session("s0", "mlp", "onnx", "custom", (ONE, FOUR))]


def run_night(replay: Replay, run: dict, documents: dict | None = None, aa: bool = False) -> dict:
    regressions = changed_night([ONE, FOUR], run, documents)
    if aa:  # the control cell's A/A duet: the same inputs on both sides
        regressions["aa"] = {**regressions["duets"][0], "duet_id": "aa.control", "points": [regressions["duets"][0]
                                                                                            ["points"][0]]}
    out = run_duets(run, [], regressions, measuring=replay.measuring())
    return json.loads(json.dumps(out))


def records_at(out: dict, load: float) -> dict[str, dict]:
    return {r["metric"]: r for r in out["records"] if r.get("kind") == "duet" and r["load"] == load}


def step_replay(**kw) -> Replay:
    recorded = trial("triton/onnx/heavy", "10")
    return Replay(pairs={DUET_ID: recorded["pairs"], "aa.control": equal_pairs("triton/onnx/heavy")},
                  rounds={f"{DUET_ID}.size0": recorded["rounds"], f"{DUET_ID}.size1": recorded["rounds"]}, **kw)


def test_the_aa_duet_first_then_the_answers_point_its_duet_and_size_before_the_next_point():
    replay = step_replay()
    run = planned(SESSIONS, {"answer_cells": [FOUR.cell_id]})
    out = run_night(replay, run, aa=True)
    kinds = [(duet_id.split(".")[0] if "size" not in duet_id else "size" + duet_id.split("size")[1][0])
             for duet_id, _ in replay.calls]
    # the A/A's 4 pairs, then concurrency 4 (an answer's cell): its 6 pairs, its rounds; then concurrency 1
    assert kinds[:4] == ["aa"] * 4 and kinds[4:10] == ["duet0"] * 6 and set(kinds[10:16]) == {"size1"}
    assert kinds[16:22] == ["duet0"] * 6 and set(kinds[22:]) == {"size0"}
    assert [e["load"] for e in out["order"]] == [4.0, 1.0]
    assert len(out["aa"]["measured"]["pairs"]) == 4 and out["aa"]["noise"]
    cpu = records_at(out, 4.0)["server_cpu_us_per_request"]
    assert cpu["verdict"] == "regression" and cpu["duet"]["looks"] == {"looks": [3, 6], "of": 2, "taken": 2, "at": 6}
    assert cpu["size"]["looks"]["taken"] == 2 and cpu["size"]["rounds"] == 6  # decided at the second look
    assert cpu["left"] is None and out["left"] == 0


def test_the_deadline_leaves_later_work_for_the_next_night_which_finishes_it_on_the_same_looks():
    # 200 s: concurrency 4's duet (6 x 10 s) and 6 rounds (6 x 20 s), then 2 pairs of concurrency 1's duet
    replay = step_replay(t=1_000_000.0)
    first = run_night(replay, planned(SESSIONS, {"started_at_s": 1_000_000.0, "regress_end_s": 200.0,
                                                 "answer_cells": [FOUR.cell_id]}, run_id="night2"))
    assert replay.t <= 1_000_200.0  # nothing ran past the deadline
    assert records_at(first, 4.0)["server_cpu_us_per_request"]["verdict"] == "regression"
    cut = records_at(first, 1.0)["server_cpu_us_per_request"]
    assert cut["verdict"] == "undecided" and cut["duet"]["measured_pairs"] == 2
    assert cut["left"].startswith("left for the next night: left its duet (2 of up to 6 pairs, look 0 of 2)")
    assert "left for the next night" in cut["reason"]
    assert first["undecided"] == 4 and first["not_settled"] == 4 and first["left"] == 4
    # the next night, the same change on the same host: concurrency 1 goes on from its third pair, on the looks it
    # started on; concurrency 4, settled (a regression), is measured afresh
    replay = step_replay(t=2_000_000.0)
    second = run_night(replay, planned(SESSIONS, {"started_at_s": 2_000_000.0, "regress_end_s": 1000.0},
                                       run_id="night3"), {"night2": first})
    assert replay.calls[:4] == [(DUET_ID, 2), (DUET_ID, 3), (DUET_ID, 4), (DUET_ID, 5)]
    assert replay.calls[10] == (DUET_ID, 0)
    done = records_at(second, 1.0)["server_cpu_us_per_request"]
    assert done["duet"]["nights"] == ["night2", "night3"] and done["duet"]["looks"]["taken"] == 2
    assert records_at(second, 4.0)["server_cpu_us_per_request"]["duet"]["nights"] == ["night3"]
    assert done["verdict"] == "regression" and done["left"] is None
    assert second["duets"][0]["work"]["0"]["carried_from"] == "night2"


def test_every_row_of_the_verdict_table_is_counted_apart():
    """Recorded duet pairs of a changed-but-equal night beside the rounds of a 10 % step: throughput's duet decided
    no change but its size lies beyond -5 % (disputed); p50's duet is undecided and its size, read as the detector,
    wholly beyond +5 % (a regression); p99's and CPU's are undecided both ways (undecided)."""
    replay = Replay(pairs={DUET_ID: equal_pairs("custom/onnx/heavy")},
                    rounds={f"{DUET_ID}.size0": trial("custom/onnx/heavy", "10")["rounds"]})
    run = planned([Session("s0", "mlp", "onnx", "custom", (ONE,))])
    regressions = changed_night([ONE], run)
    out = run_duets(run, [], regressions, measuring=replay.measuring())
    verdicts = {m: (r["duet_verdict"], r["verdict"]) for m, r in records_at(out, 1.0).items()}
    assert verdicts == {"throughput_rps": ("no_change", "disputed"), "latency_ms_p50": ("undecided", "regression"),
                        "latency_ms_p99": ("undecided", "undecided"),
                        "server_cpu_us_per_request": ("undecided", "undecided")}
    p50 = records_at(out, 1.0)["latency_ms_p50"]
    assert "read as the detector (3 such size(s) tonight)" in p50["reason"]  # m: the three undecided duets
    assert (out["regressions"], out["disputed"], out["undecided"], out["not_settled"]) == (1, 1, 2, 3)
    # the hosts' tasks put together settle the verdicts again on every host's sizes
    merged = merge_duets(regressions, [out])
    assert count_verdicts(merged["records"]) == count_verdicts(out["records"])
