"""benchmarks/night_budget.py: a published night's budget in figures, read from its run folder."""

from __future__ import annotations

import json

import pytest

from benchmarks.night_budget import night_summary, print_summary


def test_a_nights_stages_classes_and_leftovers_are_read_from_its_folder(tmp_path, capsys):
    night = {"budget_s": 3600.0, "elapsed_s": 3420.0, "planned_s": 3550.0,
             "stages": {"measure": {"planned_s": 3000.0, "actual_s": 2900.0}, "plan": {"planned_s": 15.0}},
             "classes": {"a": "answers", "b": "wires", "c": "wires"},
             "deferred": [{"cell_id": "c", "class": "wires", "when": "measure"}],
             "coverage": {"K": 3, "overdue": []}, "changed_cells": {"a": ["runtime custom"]}}
    regressions = {"records": [{"kind": "duet", "verdict": "regression"},
                               {"kind": "duet", "verdict": "undecided", "reason": "left for the next night: 2 of 4"}]}
    for name, value in (("night.json", night), ("regressions.json", regressions),
                        ("manifest.json", {"run_id": "r1", "status": "complete"})):
        (tmp_path / name).write_text(json.dumps(value))
    summary = night_summary(tmp_path)
    assert summary["classes"] == {"answers": {"planned": 1, "deferred": 0}, "wires": {"planned": 2, "deferred": 1}}
    assert (summary["deferred"], summary["deferred_at_run"], summary["K"], summary["changed"], summary["left"]) == \
        (1, 1, 3, 1, 1)
    assert list(summary["stages"]) == ["plan", "measure"]  # in the night's order
    print_summary(summary)
    out = capsys.readouterr().out
    assert "57.0 of 60 min (95 % of its budget)" in out and "measuring" in out and "2900" in out


def test_a_run_without_a_budget_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no night.json"):
        night_summary(tmp_path)
