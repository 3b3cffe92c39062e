"""What each stage of a night costs (tasks/plan/estimates.py): from the last nights' timelines where they measured
it, else from the Params (a first night)."""

from __future__ import annotations

import pytest

from tasks.plan.cells import Cell, Session
from tasks.plan.config import RunConfig
from tasks.plan.estimates import (
    FIXED_DEFAULTS_S,
    POINT_OVERHEAD_S,
    SESSION_OVERHEAD_S,
    Estimator,
    ceil_nights,
    cell_span_s,
)
from tasks.plan.past_nights import PastNight

SWEEP = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency-sweep", 4.0, "kserve_v2_binary", "binary")


def config(**overrides) -> RunConfig:
    return RunConfig(p99_bound_ms=100.0, duration_s=4.0, warmup_s=1.0, window_s=1.0, **overrides)


def timeline(offset: float, sweep_s: float, task_s: float) -> dict:
    """A server session's timeline: the sweep's two points (the second with a longer look) and the task's time."""
    t = 1000.0 + offset
    half = sweep_s / 4
    cells = {f"{SWEEP.cell_id}@1": {"load_begin": t, "load_end": t + half},
             f"{SWEEP.cell_id}@2": {"load_begin": t + half, "load_end": t + 2 * half,
                                     "lengthen": [{"begin": t + 2 * half, "end": t + sweep_s}]},
             f"{SWEEP.cell_id.replace('.binary', '')}@1": {"load_begin": t, "load_end": t + 500.0}}  # another wire
    return {"session_id": "s", "cells": cells, "task_begin": t - 10.0, "task_end": t - 10.0 + task_s}


def night(run_id: str, sweep_s: float, task_s: float, stages: dict | None = None) -> PastNight:
    return PastNight(run_id, "2026-12-01T02:00:00+00:00", "complete", {}, [], [timeline(0.0, sweep_s, task_s)],
                     night={"stages": stages or {}})


def test_a_cell_costs_the_median_of_its_last_nights_sweep_points_and_looks_included():
    nights = [night("r3", 40.0, 600.0), night("r2", 80.0, 600.0), night("r1", 30.0, 600.0), night("r0", 9e9, 1.0)]
    estimate = Estimator(config(), nights).cell(SWEEP)
    assert estimate.seconds == pytest.approx(40.0)  # the median of the newest three; the fourth night not read
    assert estimate.source == "last nights: r3, r2, r1"


def test_a_session_costs_its_task_less_its_points():
    nights = [night("r1", 40.0, 600.0)]
    own = Estimator(config(), nights).session(Session("s", "mlp", "onnx", "custom", (SWEEP,)))
    assert own.seconds == pytest.approx(600.0 - 40.0 - 500.0)  # both wires' points are the cells' time


def test_a_first_night_costs_the_params():
    costs = Estimator(config(max_point_s=30.0), [])
    sweep = costs.cell(SWEEP)  # doubling 1, 2, 4 and one longer look at max_point_s (the model's speed unknown)
    assert sweep.seconds == pytest.approx(3 * (1.0 + 4.0 + POINT_OVERHEAD_S) + (1.0 + 30.0))
    assert sweep.source.startswith("defaults")
    assert costs.session(Session("s", "mlp", "onnx", "custom", (SWEEP,))).seconds == SESSION_OVERHEAD_S
    assert {k: e.seconds for k, e in costs.fixed().items()} == FIXED_DEFAULTS_S


def test_a_longer_look_follows_the_models_speed_from_last_night():
    row = {"model": "mlp", "status": "ok", "mode": "concurrency", "load": 1.0, "throughput_rps": 100.0}
    costs = Estimator(config(max_point_s=30.0), [PastNight("r1", "d", "complete", {}, [row])])
    assert costs.model_rps("mlp") == 100.0
    assert 4.0 <= costs.look_s("mlp") < 30.0  # 1.25 x the requests a hold needs, at 100 req/s: under max_point_s
    assert costs.look_s("resnet50") == 30.0  # never measured: the longest


def test_the_fixed_stages_cost_their_last_actuals():
    nights = [night("r1", 40.0, 600.0, {"publish": {"planned_s": 90.0, "actual_s": 41.0}})]
    fixed = Estimator(config(), nights).fixed()
    assert fixed["publish"].seconds == 41.0 and fixed["publish"].source == "last nights: r1"
    assert fixed["validate"].seconds == FIXED_DEFAULTS_S["validate"]


def test_nights_needed():
    assert ceil_nights(100.0, 40.0) == 3 and ceil_nights(0.0, 40.0) == 1 and ceil_nights(10.0, 0.0) is None


def test_a_timeline_span_reads_only_the_cells_own_entries():
    events = timeline(0.0, 40.0, 600.0)["cells"]
    assert cell_span_s(events, SWEEP.cell_id) == pytest.approx(40.0)
    assert cell_span_s(events, "mlp.onnx.custom.process.cpu.b1.rate-search10.binary") is None
