"""The order of the night's regression work (tasks/regress/order.py): the answers' cells first in each round, one
load point of every changed cell before a second, a sweep's answer point (its fastest within the bound) first."""

from __future__ import annotations

from tasks.plan.cells import Plan, Session
from tasks.regress.order import work_order
from tests.recorded_duets import cell, planned

FIELDS = ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load", "protocol")


def point(c, load: float, mode: str = "concurrency") -> dict:
    return {"batch_size": c.batch_size, "mode": mode, "load": load, "protocol": c.protocol}


def row(c, load: float, throughput_rps: float, verdict: str = "holds", mode: str = "concurrency") -> dict:
    return {**{k: getattr(c, k) for k in FIELDS}, "mode": mode, "load": load, "config_id": "default", "status": "ok",
            "throughput_rps": throughput_rps, "p99_bound_ms": 100.0,
            "p99_bounds": f'{{"100": {{"verdict": "{verdict}"}}}}', "p99_bound_verdict": verdict}


def group(duet_id: str, c, points: list[dict]) -> dict:
    return {"duet_id": duet_id, "session": {k: getattr(c, k) for k in FIELDS[:5]} | {"config_id": "default"},
            "points": points}


def test_answers_first_in_each_round_and_one_point_per_cell_before_a_second():
    """Three changed cells: custom's concurrency sweep (an answer: its points at 1, 2 and 4, the fastest within the
    100 ms bound at 2), triton's single point, and kserve's single point (an answer). Round 1: the answers' first
    points (custom's sweep at 2, kserve), then triton's; round 2: the sweep's next fastest, then its last."""
    sweep, triton, kserve = (cell("custom", 4.0, "concurrency-sweep"), cell("triton", 1.0), cell("kserve", 1.0))
    sessions = [Session("s0", "mlp", "onnx", "custom", (sweep,)), Session("s1", "mlp", "onnx", "triton", (triton,)),
                Session("s2", "mlp", "onnx", "kserve", (kserve,))]
    plan = Plan.from_dict(planned(sessions, {"answer_cells": [sweep.cell_id, kserve.cell_id]}, p99_bound_ms=100.0))
    rows = [row(sweep, 1.0, 100.0), row(sweep, 2.0, 180.0), row(sweep, 4.0, 200.0, verdict="fails"),
            row(triton, 1.0, 90.0), row(kserve, 1.0, 80.0)]
    groups = [group("d0", sweep, [point(sweep, 1.0), point(sweep, 2.0), point(sweep, 4.0)]),
              group("d1", triton, [point(triton, 1.0)]), group("d2", kserve, [point(kserve, 1.0)])]
    order = work_order(groups, rows, plan)
    assert [(e["duet_id"], e["load"], e["round"], e["answer"]) for e in order] == [
        ("d0", 2.0, 1, True), ("d2", 1.0, 1, True), ("d1", 1.0, 1, False),
        ("d0", 4.0, 2, True), ("d0", 1.0, 3, True)]
    assert order[0]["cell_id"] == sweep.cell_id and order[0]["point"] == 1


def test_without_a_budget_the_plans_order_and_a_point_of_no_planned_cell_last():
    one, two = cell("custom", 1.0), cell("custom", 4.0)
    plan = Plan.from_dict(planned([Session("s0", "mlp", "onnx", "custom", (one, two))]))
    groups = [group("d0", one, [point(one, 4.0), point(one, 8.0), point(one, 1.0)])]
    order = work_order(groups, [row(one, 1.0, 10.0), row(two, 4.0, 20.0)], plan)
    assert [(e["load"], e["cell_id"]) for e in order] == [(1.0, one.cell_id), (4.0, two.cell_id), (8.0, None)]
