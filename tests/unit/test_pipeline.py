"""Sweep cells in the pipeline (tasks/pipeline.py): one row per point with unique keys, a dead session owes one
failed row."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tasks.core.results import SCHEMA_VERSION
from tasks.measure import sweep as measure_sweep
from tasks.measure.bounds import run_bounds
from tasks.measure.context import ServerLife, SessionContext, base_row
from tasks.pipeline import collect_results
from tasks.plan.cells import expected_rows, make_plan
from tasks.plan.config import RunConfig


def _fake_points(monkeypatch, capacity_rps: float, samples: int = 1000):
    """Replace the real load point: throughput saturates at `capacity_rps`, p99 grows past it."""
    def fake_point(ctx, life, cell, **_options):
        load = cell.load
        rps = min(load * 1000.0, capacity_rps) if cell.mode == "concurrency" else min(load, capacity_rps)
        p99 = 1.0 + max(0.0, load * (1000.0 if cell.mode == "concurrency" else 1.0) / capacity_rps - 1) * 50
        row = {**base_row(ctx.run, cell), "status": "ok", "throughput_rps": rps, "latency_ms_p99": p99}
        # `samples` requests: none slower than a bound above the p99, a twentieth slower than one below it
        counts = tuple((b, 0 if p99 <= b else samples // 20, float(samples)) for b in run_bounds(ctx.config))
        m = SimpleNamespace(throughput_rps=rps, latency_ms_p99=p99, requests=samples, error_rate=0.0,
                            generator_saturated=False, latency_samples=samples, bound_counts=counts)
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
    planned = {"run": RUN, **plan.to_dict()}
    collected = collect_results(planned, [{"rows": rows, "timeline": {}}])
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


def test_a_rate_search_looks_longer_a_step_below_its_highest_passing_rate_and_publishes_that_look(monkeypatch):
    _fake_points(monkeypatch, capacity_rps=100, samples=30)  # 30 requests: no rate can hold on its first look
    looked = []

    def fake_lengthen(ctx, life, cell, row, first):
        looked.append(cell.load)
        counts = tuple((b, 0, 1000.0) for b in run_bounds(ctx.config))
        m = SimpleNamespace(**{**vars(first), "requests": 1000, "latency_samples": 1000, "bound_counts": counts})
        return {**row, "lengthened": True, "latency_samples": 1000}, m

    monkeypatch.setattr(measure_sweep, "lengthen_point", fake_lengthen)
    config = RunConfig.from_params({"mode": "rate", "rates": [20.0], "rate_search": True, "p99_bound_ms": 10,
                                    "max_point_s": 60, "control_cell": "none"})
    timeline = {"cells": {}}
    rows, plan = sweep(config, timeline)
    (cell,) = plan.cells
    # doubling 20, 40, 80 passes on the point estimate; 160 does not (p99 31 ms); p99 <= 10 ms up to 118 req/s
    assert [r["load"] for r in rows][:4] == [20.0, 40.0, 80.0, 160.0] and len(looked) == 1
    (longer,) = [r for r in rows if r.get("lengthened")]
    highest = max(r["load"] for r in rows if not r.get("lengthened") and r["latency_ms_p99"] <= 10)
    assert longer["load"] == looked[0] == pytest.approx(0.9 * highest) and longer["latency_samples"] == 1000
    assert len(rows) == len({r["load"] for r in rows})  # the longer look replaced its own point's row
    sweep_events = timeline["cells"][cell.cell_id]["sweep"]
    assert sweep_events["best_load"] == looked[0] and f"{looked[0]:g} req/s holds" in sweep_events["stop_reason"]


def test_a_work_folder_whose_results_wait_to_be_published_outlives_the_teardown(monkeypatch, tmp_path):
    """The teardown (sweep_host, run_pipeline's finally, a crashed run's sweep) removes a run's work folder unless
    a publish that failed kept its results there; those read back whole, and an unknown run is refused by name."""
    from tasks.core.errors import ConfigError
    from tasks.pipeline import cleanup_run_dir, keep_unpublished, read_unpublished, run_dir, unpublished_runs

    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path))
    done, waiting = run_dir("published run"), run_dir("manual__2026-12-07T02:00")
    for folder in (done, waiting):
        (folder / "logs").mkdir(parents=True)
        (folder / "logs" / "session.log").write_text("server log")
    planned = {"run": {"run_id": "manual__2026-12-07T02:00", "run_dir": str(waiting)}, "config": {}}
    collected = {"rows": [{"cell_id": "c", "throughput_rps": 1.5}], "timelines": [{"session_id": "s"}]}
    keep_unpublished(planned, collected, [{"model": "mlp"}], {"success": True}, {"records": []})

    assert cleanup_run_dir("published run") and not done.exists()
    assert not cleanup_run_dir("manual__2026-12-07T02:00")
    assert (waiting / "logs" / "session.log").read_text() == "server log"
    assert unpublished_runs() == ["manual__2026-12-07T02:00"]
    kept = read_unpublished("manual__2026-12-07T02:00")
    assert (kept["started"], kept["collected"], kept["regressions"]) == (planned, collected, {"records": []})
    with pytest.raises(ConfigError, match=r"run='published run'.*waiting: manual__2026-12-07T02:00"):
        read_unpublished("published run")
