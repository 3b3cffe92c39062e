"""Progress lines (tasks/core/progress.py): what ended, its figure, its seconds, what is left and when the night
ends, on stdout and to every listener; a step's `stage` line; a heartbeat at most every so often."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks.core import progress


def test_a_line_says_what_ended_its_figure_seconds_what_is_left_and_when_the_night_ends(capsys):
    ends = datetime(2026, 12, 7, 9, 31, tzinfo=UTC).timestamp()
    with progress.listening() as events:
        progress.emit("point", "mlp/onnx/custom concurrency 4 (binary)", "2492.2 req/s, ok", 10.24,
                      "cell 3 of 12 of the session", ends)
    line = ("progress point: mlp/onnx/custom concurrency 4 (binary): 2492.2 req/s, ok, in 10 s; cell 3 of 12 of "
            "the session; the night ends about 09:31 UTC")
    assert capsys.readouterr().out == line + "\n"
    assert [e.line() for e in events] == [line] and events[0].seconds == 10.2
    progress.emit("stage", "validation")
    assert events == [events[0]]  # the listener is gone after its block
    with pytest.raises(ValueError, match="progress kind 'cell': must be one of stage, session, point"):
        progress.emit("cell", "x")


def test_a_step_says_when_it_ended_with_its_figure():
    @progress.stage("validation", lambda out: "passed" if out["success"] else "failed")
    def validate_step(rows):
        return {"success": bool(rows)}

    with progress.listening() as events:
        assert validate_step([1]) == {"success": True}
    (event,) = events
    assert (event.kind, event.what, event.figure) == ("stage", "validation", "passed")
    assert event.seconds is not None and event.seconds >= 0 and validate_step.__name__ == "validate_step"


def test_a_heartbeat_waits_its_interval_between_lines():
    beat = progress.Heartbeat("mlp.onnx.custom.process.cpu.b1.concurrency4", 120.0, every_s=3600.0)
    with progress.listening() as events:
        beat.beat("window 1")
    assert events == []  # too soon
    beat = progress.Heartbeat("mlp.onnx.custom.process.cpu.b1.concurrency4", 120.0, every_s=0.0)
    with progress.listening() as events:
        beat.beat("window 2: 2400 req/s")
    (event,) = events
    assert event.kind == "heartbeat" and event.what.startswith("still measuring mlp.onnx")
    assert event.left.endswith("of 120 s") and event.figure == "window 2: 2400 req/s"
