"""What tonight knows of each cell (tasks/plan/candidates.py): the stacks that may be a model's best on their last
figures, their best wire, and so each cell's class."""

from __future__ import annotations

from tasks.plan.candidates import cell_past, classify
from tasks.plan.cells import make_plan
from tests.unit.plan.test_night import config, night, sweep_rows


def test_last_nights_figures_make_the_candidates_and_their_best_wire():
    plan = make_plan(config())
    rows = sweep_rows("triton", "binary", "kserve_v2_binary", 1000.0) + sweep_rows(
        "triton", "grpc", "kserve_v2_grpc", 600.0) + sweep_rows("custom", "binary", "kserve_v2_binary", 300.0)
    pasts = {c.cell_id: cell_past(c, [night("r1", rows)]) for c in plan.cells}
    classes = classify(plan, pasts)
    assert classes["mlp.onnx.triton.process.cpu.b1.concurrency-sweep4.binary"] == "answers"  # the fastest
    assert classes["mlp.onnx.triton.process.cpu.b1.concurrency-sweep4.grpc"] == "wires"  # not its best wire
    # the custom service is 3.3 x slower and 3.3 x dearer: not a candidate, its sweep just a sweep
    assert classes["mlp.onnx.custom.process.cpu.b1.concurrency-sweep4.binary"] == "sweeps"
