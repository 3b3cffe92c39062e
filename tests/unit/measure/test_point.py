"""One load point (tasks/measure/point.py): a contended point is measured again once, then judged."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

import tasks.measure.point as point_module
from tasks.core import progress
from tasks.measure.hoststate import HostState
from tasks.plan.cells import Cell
from tasks.plan.config import RunConfig
from tasks.plan.night import NightClock
from tasks.validate.outcome import ServerHealth


def _state(neighbour: float) -> HostState:
    return HostState(window_s=2.0, cores=2, server_cores=1, neighbour_cpu_pct=neighbour, steal_pct=1.0,
                     server_cpus_neighbour_pct=5.0, server_cpu_share_pct=80.0, server_cpu_wait_pct=2.0,
                     host_cpu_pressure_pct=None, load_avg_1m=1.0)


@pytest.mark.parametrize(("neighbours", "status", "remeasured"), [
    ((5.0,), "ok", False),  # quiet: measured once
    ((62.0, 8.0), "ok", True),  # contended, then quiet: the second measurement's figures, ok
    ((62.0, 58.0), "contended", True),  # contended twice: kept, marked, both readings in the reason
])
def test_a_contended_point_is_measured_again_once_then_judged(monkeypatch, neighbours, status, remeasured):
    runs = iter(neighbours)
    calls = []

    def fake_run_point(ctx, life, cell):
        neighbour = next(runs)
        calls.append(neighbour)
        measurement = SimpleNamespace(to_dict=lambda: {"requests": 100, "errors": 0, "error_rate": 0.0,
                                                       "errors_by_kind": {}})
        state = _state(neighbour)
        return point_module.PointRun({"throughput_rps": 1000.0 - neighbour, **state.row_fields(),
                                        "host_state": state.to_json()}, measurement, None, state,
                                       ServerHealth(None, True))

    monkeypatch.setattr(point_module, "run_point", fake_run_point)
    run = {"run_id": "r", "logical_date": "d", "started_at": "s", "schema_version": "1.5", "code": {}, "host": {}}
    ctx = SimpleNamespace(config=RunConfig(quiet_wait_s=0.0), run=run,
                          budget=SimpleNamespace(cpus=(1,), generator_cpus=(0,)), clock=None, left=lambda: "",
                          night_end_s=lambda: None)
    live = SimpleNamespace(server=SimpleNamespace(name="custom"), server_version="1", startup_s=1.0,
                           runtime_image="venv", runtime_image_kind="venv", restarts=0, handle=None)
    life = SimpleNamespace(live=live, served={}, timeline={"cells": {}}, inputs=None, profile=None,
                           best_holding_rps=0.0)
    cell = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency", 2.0)
    row, _ = point_module.measure_point(ctx, life, cell)
    assert calls == list(neighbours) and row["status"] == status and row["remeasured"] is remeasured
    assert row["throughput_rps"] == 1000.0 - neighbours[-1]  # the last measurement's figures
    if status == "contended":
        assert row["reason"].startswith("other work used 62 % of the host's CPU") and "still other work 58 %" in \
            row["reason"]
        assert json.loads(row["host_state"])["first"]["host"]["neighbour_cpu_pct"] == 62.0
    else:
        assert row["reason"] is None
    events = life.timeline["cells"][cell.cell_id]
    assert ("quiet_wait" in events) is remeasured


@pytest.mark.parametrize(("best_holding_rps", "lengthened"), [(0.0, True), (2000.0, False)])
def test_an_undecided_point_that_could_be_the_best_is_measured_again_for_max_point_s(
        monkeypatch, best_holding_rps, lengthened):
    settings_seen = []

    def fake_run_point(ctx, life, cell, settings=None):
        settings_seen.append(settings.duration_s if settings is not None else ctx.config.duration_s)
        first = settings is None
        measurement = SimpleNamespace(to_dict=lambda: {"requests": 100, "errors": 0, "error_rate": 0.0,
                                                       "errors_by_kind": {}})
        state = _state(5.0)
        fields = {"throughput_rps": 1000.0, "latency_samples": 40 if first else 500,
                  "p99_bound_verdict": "undecided" if first else "holds", **state.row_fields(),
                  "host_state": state.to_json()}
        return point_module.PointRun(fields, measurement, None, state, ServerHealth(None, True))

    cell = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency", 2.0)
    with progress.listening() as events:
        row, life = _lengthening_point(monkeypatch, fake_run_point, cell, best_holding_rps)
    assert row["lengthened"] is lengthened and row["status"] == "ok"
    # a progress line for the look (when there was one) and one for the point, in that order
    assert [e.kind for e in events] == (["look", "point"] if lengthened else ["point"])
    assert events[-1].left == "cell 1 of 1 of the session" and "1000.0 req/s" in events[-1].figure
    if lengthened:
        assert settings_seen == [4.0, 30.0] and row["latency_samples"] == 500 and row["p99_bound_verdict"] == "holds"
        assert life.best_holding_rps == 1000.0  # the next point must beat it to be lengthened
        assert life.timeline["cells"][cell.cell_id]["lengthen"][0]["first_requests"] == 40
    else:
        assert settings_seen == [4.0] and row["p99_bound_verdict"] == "undecided"


def test_a_longer_look_whose_requests_failed_replaces_the_first_as_a_finding(monkeypatch):
    def fake_run_point(ctx, life, cell, settings=None):
        first = settings is None
        errors = 0 if first else 120  # over 30 s the queue outgrew request_timeout_s
        measurement = SimpleNamespace(to_dict=lambda: {"requests": 400, "errors": errors, "error_rate": errors / 400,
                                                       "errors_by_kind": {"timeout": errors} if errors else {}})
        state = _state(5.0)
        fields = {"throughput_rps": 10.0, "latency_samples": 40 if first else 400,
                  "p99_bound_verdict": "undecided" if first else "fails", **state.row_fields(),
                  "host_state": state.to_json()}
        return point_module.PointRun(fields, measurement, None, state, ServerHealth(None, True))

    cell = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "rate", 10.0)
    row, life = _lengthening_point(monkeypatch, fake_run_point, cell)
    assert row["lengthened"] is True and row["status"] == "failed" and "timeout" in row["reason"]
    assert row["latency_samples"] == 400 and "not_counted" not in life.timeline["cells"][cell.cell_id]["lengthen"][0]


def _lengthening_point(monkeypatch, fake_run_point, cell: Cell, best_holding_rps: float = 0.0, clock=None):
    """`cell` measured by `measure_point` in a run that lengthens (max_point_s 30), its looks by `fake_run_point`,
    under the night's `clock` (None: no budget): (row, server life)."""
    monkeypatch.setattr(point_module, "run_point", fake_run_point)
    run = {"run_id": "r", "logical_date": "d", "started_at": "s", "schema_version": "1.8", "code": {}, "host": {}}
    config = RunConfig(quiet_wait_s=0.0, p99_bound_ms=100.0, duration_s=4.0, warmup_s=0.5, window_s=1.0,
                       max_point_s=30.0)
    ctx = SimpleNamespace(config=config, run=run, budget=SimpleNamespace(cpus=(1,), generator_cpus=(0,)),
                          load_settings=lambda cell: point_module.LoadSettings(duration_s=4.0, window_s=1.0),
                          clock=clock, left=lambda: "cell 1 of 1 of the session", night_end_s=lambda: None)
    live = SimpleNamespace(server=SimpleNamespace(name="custom"), server_version="1", startup_s=1.0,
                           runtime_image="venv", runtime_image_kind="venv", restarts=0, handle=None)
    life = SimpleNamespace(live=live, served={}, timeline={"cells": {}}, inputs=None, profile=None,
                           best_holding_rps=best_holding_rps)
    return point_module.measure_point(ctx, life, cell)[0], life


def test_a_longer_look_the_nights_clock_would_cut_is_not_taken(monkeypatch):
    looks = []

    def fake_run_point(ctx, life, cell, settings=None):
        looks.append(settings)
        measurement = SimpleNamespace(to_dict=lambda: {"requests": 100, "errors": 0, "error_rate": 0.0,
                                                       "errors_by_kind": {}})
        state = _state(5.0)
        fields = {"throughput_rps": 1000.0, "latency_samples": 40, "p99_bound_verdict": "undecided",
                  **state.row_fields(), "host_state": state.to_json()}
        return point_module.PointRun(fields, measurement, None, state, ServerHealth(None, True))

    cell = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency", 2.0)
    clock = NightClock(time.time() + 10.0, {}, {})  # 10 s left: a 30 s look would end after the measuring stage
    row, life = _lengthening_point(monkeypatch, fake_run_point, cell, clock=clock)
    assert looks == [None] and row["lengthened"] is False and row["p99_bound_verdict"] == "undecided"
    assert "not looked at: deferred by the night's clock" in life.timeline["cells"][cell.cell_id]["lengthen"][0][
        "not_counted"]


def test_a_points_progress_figure_names_its_bound_verdict_with_or_without_a_p99():
    figure = point_module.point_figure
    assert figure({"throughput_rps": 12.94, "latency_ms_p99": 81.6, "p99_bound_verdict": "holds",
                   "status": "ok"}) == "12.9 req/s, p99 82 ms (holds), ok"
    # a first look that ended undecided, before its longer look: no p99 published yet, the verdict still said
    assert figure({"throughput_rps": 4.2, "p99_bound_verdict": "undecided", "status": "ok"}) == \
        "4.2 req/s, p99 bound (undecided), ok"
    assert figure({"status": "failed"}) == "failed"
