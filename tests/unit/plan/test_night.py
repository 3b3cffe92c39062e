"""The night's clock as later steps read it from the plan's `night` record (tasks/plan/night.py)."""

from tasks.plan.night import answer_cells, measure_deadline, regress_deadline


def test_deadlines_are_the_start_plus_the_planned_offsets():
    night = {"started_at_s": 1000.0, "measure_end_s": 2400.0, "regress_end_s": 3300.0, "answer_cells": ["a", "b"]}
    assert measure_deadline(night) == 3400.0
    assert regress_deadline(night) == 4300.0
    assert answer_cells(night) == frozenset({"a", "b"})


def test_no_budget_no_deadline():
    assert measure_deadline({}) is None and regress_deadline({}) is None and answer_cells({}) == frozenset()
    assert regress_deadline({"measure_end_s": 10.0, "regress_end_s": 20.0}) is None  # a dry plan: never started
