"""References (tasks/regress/references.py): each cell against its newest accepted night."""

from __future__ import annotations

import json

from tasks.measure.inputs import inputs_sha
from tasks.regress.references import find_references
from tests.unit.measure.test_inputs import _inputs


def _row(run_id: str, date: str, inputs: dict, **extra) -> dict:
    return {"model": "resnet50", "format": "onnx", "server": "custom", "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": 2.0, "config_id": "default", "protocol": "kserve_v2_rest",
            "cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None, "status": "ok", "run_id": run_id,
            "logical_date": date, "inputs": json.dumps(inputs), "inputs_sha": inputs_sha(inputs), **extra}


def test_each_cell_is_compared_with_its_newest_accepted_night():
    old, new = _inputs(), _inputs(model__sha256="41ab" * 16)
    history = [_row("n1", "2026-01-01", old), _row("n2", "2026-01-02", old), _row("n3", "2026-01-03", new)]
    judged_n3 = {"n3": [{**{k: history[2][k] for k in ("model", "format", "server", "launcher", "device",
                                                        "batch_size", "mode", "load", "config_id", "protocol")},
                         "host": "EPYC|2|None", "verdict": "regression"}]}
    (ref,) = find_references([_row("tonight", "2026-01-04", new)], history, judged_n3)
    assert ref.state == "changed" and ref.reference["run_id"] == "n2"  # n3 was a regression: not accepted
    (ref,) = find_references([_row("tonight", "2026-01-04", new)], history, {})
    assert ref.state == "no_change" and ref.reference["run_id"] == "n3"
    (ref,) = find_references([_row("tonight", "2026-01-04", new, cpu_model="Xeon")], history, {})
    assert ref.state == "no_history"  # another host is never a reference
    legacy = [{**history[0], "inputs": None, "inputs_sha": None}]
    (ref,) = find_references([_row("tonight", "2026-01-04", new)], legacy, {})
    assert ref.state == "no_inputs"


def test_a_night_that_left_a_change_not_settled_or_unfinished_is_nobodys_reference():
    """The next night judges the same change again: against the night before it, never against the unsettled one."""
    old, new = _inputs(), _inputs(model__sha256="41ab" * 16)
    history = [_row("n1", "2026-01-01", old), _row("n2", "2026-01-02", new)]
    key = {k: history[1][k] for k in ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load",
                                      "config_id", "protocol")}
    for record in ({"verdict": "undecided"}, {"verdict": "disputed"},
                   {"verdict": "regression", "left": "left for the next night: left its size"},
                   {"verdict": "no_change", "left": "left for the next night: left its attribution"}):
        earlier = {"n2": [{**key, "host": "EPYC|2|None", "kind": "duet", **record}]}
        (ref,) = find_references([_row("tonight", "2026-01-03", new)], history, earlier)
        assert ref.state == "changed" and ref.reference["run_id"] == "n1", record
    settled = {"n2": [{**key, "host": "EPYC|2|None", "kind": "duet", "verdict": "no_change", "left": None}]}
    (ref,) = find_references([_row("tonight", "2026-01-03", new)], history, settled)
    assert ref.state == "no_change" and ref.reference["run_id"] == "n2"
