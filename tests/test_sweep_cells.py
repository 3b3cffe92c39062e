"""Sweeps in the DAG: one planned sweep cell per (model, format, server, batch size) whose rows are the points
it measured; the expected row count and the 'session died' rows follow the sweep's own rows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tasks.core.errors import ConfigError
from tasks.core.results import SCHEMA_VERSION
from tasks.measure import sweep as measure_sweep
from tasks.measure.context import ServerLife, SessionContext, base_row
from tasks.pipeline import collect_results
from tasks.plan.cells import expected_rows, make_plan
from tasks.plan.config import RunConfig


def test_sweeps_plan_one_cell_per_batch_size():
    plan = make_plan(RunConfig.from_params({"concurrency_sweep": "doubling", "concurrencies": [1, 16],
                                            "batch_sizes": [1, 8]}))
    assert [(c.mode, c.load, c.batch_size) for c in plan.cells] == [
        ("concurrency-sweep", 16.0, 1), ("concurrency-sweep", 16.0, 8)]
    plan = make_plan(RunConfig.from_params({"mode": "rate", "rates": [200, 50], "rate_search": True,
                                            "p99_bound_ms": 20, "control_cell": "none"}))
    assert [(c.mode, c.load) for c in plan.cells] == [("rate-search", 50.0)]
    # the sweep settings of the other mode change nothing
    assert [c.mode for c in make_plan(RunConfig.from_params({"rate_search": True})).cells] == ["concurrency"] * 2


@pytest.mark.parametrize(("params", "field"), [
    ({"mode": "rate", "rate_search": True}, "p99_bound_ms"),
    ({"p99_bound_ms": 0}, "p99_bound_ms"),
    ({"concurrency_sweep": "tripling"}, "concurrency_sweep"),
])
def test_bad_sweep_inputs_name_the_field(params, field):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_params(params)
    assert info.value.field == field


def _fake_points(monkeypatch, capacity_rps: float):
    """Replace the real load point: throughput saturates at `capacity_rps`, p99 grows past it."""
    def fake_point(ctx, life, cell):
        load = cell.load
        rps = min(load * 1000.0, capacity_rps) if cell.mode == "concurrency" else min(load, capacity_rps)
        p99 = 1.0 + max(0.0, load * (1000.0 if cell.mode == "concurrency" else 1.0) / capacity_rps - 1) * 50
        row = {**base_row(ctx.run, cell), "status": "ok", "throughput_rps": rps, "latency_ms_p99": p99}
        m = SimpleNamespace(throughput_rps=rps, latency_ms_p99=p99, requests=100, error_rate=0.0,
                            generator_saturated=False)
        return row, m

    monkeypatch.setattr(measure_sweep, "measure_point", fake_point)


RUN = {"run_id": "r", "logical_date": "d", "started_at": "s", "schema_version": SCHEMA_VERSION, "code": {},
       "host": {}}


def sweep(config: RunConfig, timeline: dict | None = None) -> tuple[list[dict], object]:
    """The plan's one sweep cell measured by `measure_sweep` (its points faked by `_fake_points`)."""
    plan = make_plan(config)
    (session,) = plan.sessions
    ctx = SessionContext(session, RUN, config, budget=None, artifact=None, spec=None)
    life = ServerLife(live=None, served={}, timeline=timeline if timeline is not None else {"cells": {}})
    return measure_sweep.measure_sweep(ctx, life, session.cells[0]), plan


def test_a_sweep_cell_yields_one_row_per_point_with_unique_keys(monkeypatch):
    _fake_points(monkeypatch, capacity_rps=3500)
    config = RunConfig.from_params({"concurrency_sweep": "doubling", "concurrencies": [64]})
    timeline = {"cells": {}}
    rows, plan = sweep(config, timeline)
    (cell,) = plan.cells
    assert [(r["mode"], r["load"]) for r in rows] == [("concurrency", 1.0), ("concurrency", 2.0),
                                                     ("concurrency", 4.0), ("concurrency", 8.0)]
    assert "throughput rose" in timeline["cells"][cell.cell_id]["sweep"]["stop_reason"]
    assert expected_rows(plan.sessions, rows) == 4
    started = {"run": RUN, **plan.to_dict()}
    collected = collect_results(started, [{"rows": rows, "timeline": {}}])
    assert len(collected["rows"]) == 4  # no spurious "session failed" row for the sweep's bound (64)

    config = RunConfig.from_params({"mode": "rate", "rates": [100], "rate_search": True, "p99_bound_ms": 10,
                                    "control_cell": "none"})
    rows, _ = sweep(config)
    loads = [r["load"] for r in rows]
    assert len(set(loads)) == len(loads) and all(r["mode"] == "rate" for r in rows)
    bound_rps = 3500 * (1 + 9 / 50)  # where the fake's p99 crosses 10 ms
    assert max(r["load"] for r in rows if r["latency_ms_p99"] <= 10) == pytest.approx(bound_rps, rel=0.05)


def test_a_sweep_whose_session_died_owes_one_failed_row():
    plan = make_plan(RunConfig.from_params({"concurrency_sweep": "doubling", "concurrencies": [8]}))
    collected = collect_results({"run": RUN, **plan.to_dict()}, [None])
    (row,) = collected["rows"]
    assert (row["mode"], row["load"], row["status"]) == ("concurrency-sweep", 8.0, "failed")
    assert expected_rows(plan.sessions, collected["rows"]) == 1
