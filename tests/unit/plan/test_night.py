"""The night's budget (tasks/plan/night.py): the classes of cells, the order a night takes them in, what it defers and
why, K, and the clock later steps read. The last nights are written by hand as the store would give them back."""

from __future__ import annotations

import json

import pytest

from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig
from tasks.plan.night import (
    NightClock,
    answer_cells,
    fit_night,
    measure_deadline,
    night_lines,
    night_outcome,
    regress_deadline,
)
from tasks.plan.past_nights import PastNight

BOUND_MS = 100.0


def config(**overrides) -> RunConfig:
    """Two stacks on the MLP (Triton: json, binary, grpc; the custom service: json, binary), a doubling sweep and a
    rate search, overload bursts, the control covered by the custom service's own cells."""
    values = {"models": ["mlp"], "formats": ["onnx"], "servers": ["triton", "custom"], "protocols": ["best"],
              "mode": "both", "concurrency_sweep": "doubling", "concurrencies": [4], "rate_search": True,
              "rates": [10.0], "p99_bound_ms": BOUND_MS, "overload": True, "duration_s": 4.0, "warmup_s": 1.0,
              "window_s": 1.0, "night_budget_s": 3600.0, **overrides}
    return RunConfig.from_params(values)


def holds(rps: float, **extra) -> dict:
    """An ok row whose p99 holds the run's bound."""
    return {"status": "ok", "throughput_rps": rps, "server_core_s_per_1k": 1000.0 / rps,
            "p99_bounds": json.dumps({f"{BOUND_MS:g}": {"verdict": "holds", "exceed": 0, "more_requests": None}}),
            **extra}


def sweep_rows(server: str, wire: str, codec: str, rps: float) -> list[dict]:
    return [{"model": "mlp", "format": "onnx", "server": server, "launcher": "process", "device": "cpu",
             "batch_size": 1, "mode": "concurrency", "load": float(c), "protocol": codec, "wire": wire,
             **holds(rps * c / 4)} for c in (1, 2, 4)]


def rows_for(cells) -> list[dict]:
    """Ok rows of `cells` as a night that measured them publishes them (a sweep: one point)."""
    rows = []
    for cell in cells:
        if cell.skip:
            continue
        mode = {"concurrency-sweep": "concurrency", "rate-search": "rate"}.get(cell.mode, cell.mode)
        rows.append({"model": cell.model, "format": cell.format, "server": cell.server, "launcher": cell.launcher,
                     "device": cell.device, "batch_size": cell.batch_size, "mode": mode,
                     "load": 1.0 if mode == "concurrency" else cell.load, "protocol": cell.protocol,
                     "wire": cell.wire, **holds(500.0)})
    return rows


def night(run_id: str, rows: list[dict], deferred: list[str] = (), timelines: list[dict] = ()) -> PastNight:
    return PastNight(run_id, f"2026-12-0{run_id[-1]}T02:00:00+00:00", "complete", {}, rows, list(timelines),
                     night={"deferred": [{"cell_id": c} for c in deferred]})


def test_a_first_night_takes_every_stack_as_a_candidate_on_each_efficient_wire():
    plan = make_plan(config())
    classes = fit_night(plan, []).night["classes"]
    assert classes["mlp.onnx.triton.process.cpu.b1.concurrency-sweep4.binary"] == "answers"
    assert classes["mlp.onnx.triton.process.cpu.b1.concurrency-sweep4.grpc"] == "answers"
    assert classes["mlp.onnx.custom.process.cpu.b1.concurrency-sweep4.binary"] == "answers"
    assert classes["mlp.onnx.triton.process.cpu.b1.concurrency-sweep4"] == "wires"  # JSON beside faster wires
    assert classes["mlp.onnx.triton.process.cpu.b1.rate-search10.binary"] == "sweeps"
    assert classes["mlp.onnx.triton.process.cpu.b1.overload3.grpc"] == "overload"


def test_a_small_budget_runs_the_control_and_the_answers_first_and_defers_the_rest_with_why():
    fitted = fit_night(make_plan(config(night_budget_s=700.0)), [])
    record = fitted.night
    run = [c.cell_id for s in fitted.sessions for c in s.cells]
    control = "mlp.onnx.custom.process.cpu.b1.concurrency-sweep4"  # covers the control: measured every night
    assert run[0] == control  # the control's session first
    classes = record["classes"]
    answers = sorted(c for c, k in classes.items() if k == "answers")
    assert len(answers) == 3 and set(answers) <= set(run) and sorted(record["answer_cells"]) == answers
    deferred = {d["cell_id"]: d for d in record["deferred"]}
    assert deferred and set(run).isdisjoint(deferred)
    assert {d["class"] for d in deferred.values()} <= {"sweeps", "wires", "overload"}
    assert all("budget" in d["reason"] or "capacity" in d["reason"] for d in deferred.values())
    assert all(d["age"] is None and d["last_run_id"] is None for d in deferred.values())  # never measured
    assert isinstance(record["coverage"]["K"], int) and record["coverage"]["K"] >= 2


def test_the_fit_keeps_within_the_budget_and_says_what_each_stage_is_planned_to_cost():
    fitted = fit_night(make_plan(config(night_budget_s=900.0)), [])
    record = fitted.night
    assert set(record["stages"]) >= {"plan", "conversions", "measure", "validate", "regress_check", "regress",
                                     "publish"}
    assert sum(s["planned_s"] for s in record["stages"].values()) <= 900.0
    assert record["measure_end_s"] < record["regress_end_s"] < 900.0
    assert any("coverage every" in line or "cannot all be covered" in line for line in night_lines(record))


def test_a_night_without_a_budget_is_the_plan_unchanged():
    plan = make_plan(config(night_budget_s=None))
    assert fit_night(plan, []) is plan and plan.night == {}


def test_the_next_night_measures_the_cells_it_deferred_first():
    plan = make_plan(config())
    tight = config(night_budget_s=700.0)
    first = fit_night(make_plan(tight), [])
    measured = [c for s in first.sessions for c in s.cells]
    waited = {d["cell_id"] for d in first.night["deferred"]}
    last_night = night("r1", rows_for(measured), sorted(waited))
    second = fit_night(make_plan(tight), [last_night])
    ran = {c.cell_id for s in second.sessions for c in s.cells}
    classes = second.night["classes"]
    rolled = {c for c in ran if classes.get(c) not in ("answers", None) and c != "mlp.onnx.custom.process.cpu.b1."
              "concurrency-sweep4"}
    again = {d["cell_id"]: d for d in second.night["deferred"]}
    assert rolled & waited  # beyond the control and the answers, what waited last night goes first in its class:
    for cls in {classes.get(c) for c in rolled - waited}:  # a cell measured last night runs only where each of
        for cell in {c for c in waited if classes.get(c) == cls} - ran:  # its class that waited was too big
            assert "did not fit" in again[cell]["reason"], (cls, again[cell]["reason"])
    assert all(again[c]["waited"] == 1 for c in again if c in waited)
    assert all(again[c]["age"] == 1 and again[c]["last_run_id"] == "r1" for c in again if c not in waited)
    assert {c.cell_id for c in plan.cells} == ran | set(again)


def test_a_cell_unmeasured_for_k_nights_is_overdue_and_goes_before_the_others():
    plan = make_plan(config(night_budget_s=700.0))
    k = fit_night(plan, []).night["coverage"]["K"]
    others = [c for c in plan.cells if c.cell_id != TARGET]
    nights = [night(f"r{i}", rows_for(others), [TARGET]) for i in range(1, k + 1)]  # it waited K nights
    fitted = fit_night(plan, nights)
    assert TARGET in {c.cell_id for s in fitted.sessions for c in s.cells}
    small = make_plan(config(night_budget_s=400.0))  # room for the control and little else
    k_small = fit_night(small, []).night["coverage"]["K"]
    short = fit_night(small, [night(f"r{i}", rows_for(others), [TARGET]) for i in range(1, k_small + 1)])
    late = {d["cell_id"]: d for d in short.night["deferred"]}  # no room even for it: past K, and said so
    assert late[TARGET]["overdue"] and TARGET in short.night["coverage"]["overdue"]
    assert "overdue" in short.night["coverage"]["note"]


TARGET = "mlp.onnx.custom.process.cpu.b1.rate-search10.binary"


def test_an_overload_burst_needs_a_steady_cell_of_its_session_tonight():
    fitted = fit_night(make_plan(config(night_budget_s=700.0)), [])
    run_sessions = {s.session_id: {c.mode for c in s.cells} for s in fitted.sessions}
    for modes in run_sessions.values():
        if "overload" in modes:
            assert modes - {"overload"}, "a burst runs only where its session measures a capacity"


def test_the_clock_cuts_what_would_end_after_the_measuring_stage():
    night_record = {"started_at_s": 1000.0, "measure_end_s": 100.0, "regress_end_s": 200.0,
                    "cells": {"a": {"seconds": 30.0}}, "sessions": {"s": 5.0}, "answer_cells": ["a"]}
    assert measure_deadline(night_record) == 1100.0 and regress_deadline(night_record) == 1200.0
    assert answer_cells(night_record) == frozenset({"a"})
    clock = NightClock.of(night_record)
    assert clock.cut_cell("a", now=1060.0) is None  # 30 s planned, 40 s left
    assert "30 s planned, 20 s left" in clock.cut_cell("a", now=1080.0)
    assert NightClock.of({}) is None and NightClock.of({"measure_end_s": 1.0}) is None  # a dry plan: no clock


def test_the_night_as_it_went_has_each_stages_actual_seconds_and_the_clocks_deferrals():
    fitted = fit_night(make_plan(config(night_budget_s=700.0)), [])
    record = {**fitted.night, "started_at_s": 1000.0}
    cut = {"cell_id": "mlp.onnx.triton.process.cpu.b1.rate-search10.binary", "reason": "deferred by the night's "
           "clock: 90 s planned, 10 s left", "when": "measure"}
    outcome = night_outcome(record, [cut], {"plan": {"begin": 1000.0, "end": 1004.0},
                                            "measure": {"begin": 1030.0, "end": 1400.0}}, now_s=1590.0)
    assert outcome["elapsed_s"] == 590.0
    assert outcome["stages"]["plan"]["actual_s"] == 4.0 and outcome["stages"]["measure"]["actual_s"] == 370.0
    assert outcome["stages"]["validate"]["actual_s"] is None  # no clock: not known, never 0
    later = [d for d in outcome["deferred"] if d.get("when") == "measure"]
    assert later and later[0]["class"] == fitted.night["classes"][cut["cell_id"]]
    assert str(len(outcome["deferred"])) in outcome["coverage"]["note"]


@pytest.mark.parametrize("budget", [600.0, 1800.0])
def test_every_planned_cell_either_runs_or_is_deferred(budget):
    plan = make_plan(config(night_budget_s=budget))
    fitted = fit_night(plan, [])
    run = [c.cell_id for s in fitted.sessions for c in s.cells]
    deferred = [d["cell_id"] for d in fitted.night["deferred"]]
    assert sorted(run + deferred) == sorted(c.cell_id for c in plan.cells)
