"""Traces (tasks/loadgen/trace.py): the file format read back to the nanosecond, its refusals by line, the digest,
the replay's schedule and settings."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.trace import FORMAT_LINE, NS, Trace, TraceReplay, read_trace, write_trace


def _trace(*offsets_s: float, name: str = "t") -> Trace:
    return Trace(name, np.round(np.asarray(offsets_s) * NS).astype(np.int64))


def test_a_written_trace_reads_back_to_the_nanosecond_and_comments_keep_its_digest(tmp_path):
    trace = Trace("burst", np.array([0, 1, 1, 250_000_001, 3 * NS + 7], dtype=np.int64), shape={"kind": "x"})
    path = write_trace(tmp_path / "burst.csv", trace, made_by="a test")
    back = read_trace(path)
    assert np.array_equal(back.offsets_ns, trace.offsets_ns) and back.digest == trace.digest
    assert back.name == "burst" and back.shape == {"kind": "x"} and back.label == f"trace:burst@{trace.digest}"
    reworded = tmp_path / "reworded.csv"
    reworded.write_text(path.read_text().replace("# made by: a test", "# made by: someone else\n# more words"))
    assert read_trace(reworded).digest == trace.digest
    assert _trace(0.0, 1.0).digest != _trace(0.0, 1.000000001).digest  # one offset moved: another trace


@pytest.mark.parametrize(("body", "field", "rule"), [
    ("offset_s\n0.5\n0.25\n", "line 4", "must not decrease"),
    ("offset_s\n-1\n", "line 3", ">= 0"),
    ("offset_s\nsoon\n", "line 3", "number of seconds"),
    ("arrival\n0\n", "line 2", "header 'offset_s'"),
    ("offset_s\n", "trace", "at least one"),
    ("# shape: [1]\noffset_s\n0\n", "line 2", "JSON object"),
])
def test_a_bad_trace_file_is_refused_naming_its_line(tmp_path, body, field, rule):
    path = tmp_path / "bad.csv"
    path.write_text(f"{FORMAT_LINE}\n{body}")
    with pytest.raises(ConfigError, match=rule) as raised:
        read_trace(path)
    assert field in raised.value.field


def test_a_file_without_the_format_line_is_refused(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("offset_s\n0\n")
    with pytest.raises(ConfigError, match="must start with the line"):
        read_trace(path)


def test_speed_scales_the_schedule_and_the_workers_share_it_exactly():
    trace = _trace(0.0, 0.1, 0.1, 0.35, 1.0, 2.0, 2.5)
    assert np.array_equal(trace.schedule_ns(2.0), np.round(trace.offsets_ns / 2).astype(np.int64))
    parts = [trace.schedule_ns(1.0, stride=3, offset=i) for i in range(3)]
    assert np.array_equal(np.sort(np.concatenate(parts)), trace.offsets_ns)
    with pytest.raises(ConfigError, match="trace speed"):
        TraceReplay(trace, speed=0.0)


def test_a_replays_settings_take_in_its_last_arrival_and_the_schedule_is_the_trace():
    trace = _trace(0.0, 0.5, 1.25, 3.0)
    settings = TraceReplay(trace, speed=2.0).settings(LoadSettings(mode="concurrency", load=4, warmup_s=0.5,
                                                                   duration_s=10.0, window_s=0.5))
    assert settings.mode == "rate" and settings.warmup_s == 0.5
    # the engine sends the schedule's times below warm-up + duration: every arrival, the last (1.5 s) included
    assert settings.warmup_s + settings.duration_s > trace.replay_s(2.0) == 1.5
    assert settings.load == pytest.approx(4 / 1.5) and settings.window_s == 0.5 and not settings.stop_when_stable
    long = Trace("long", np.array([0, 4000 * NS], dtype=np.int64))
    with pytest.raises(ConfigError, match="raise the speed"):
        TraceReplay(long).settings(LoadSettings())


def test_a_planned_trace_is_found_by_name_and_a_changed_one_fails_its_cell(tmp_path, monkeypatch):
    from tasks.loadgen.trace import TRACES_ENV, load_trace, planned_replay_s, replay_of, trace_catalogue

    assert "synthetic-day" in trace_catalogue()
    with pytest.raises(ConfigError, match=r"traces='nope': must be one of the traces \[.*'synthetic-day'"):
        load_trace("nope")
    monkeypatch.setenv(TRACES_ENV, str(tmp_path))
    write_trace(tmp_path / "mine.csv", _trace(0.0, 0.5, 1.0, name="mine"), made_by="a test")
    label = load_trace("mine").label
    replay = replay_of(label, 2.0)
    assert replay.speed == 2.0 and replay.length_s == 0.5
    assert planned_replay_s(label, 1.0) == pytest.approx(1.001)
    assert planned_replay_s(label, 1.0, search=True) == pytest.approx(3 * 1.001)
    write_trace(tmp_path / "mine.csv", _trace(0.0, 0.5, 1.5, name="mine"), made_by="an edit")
    with pytest.raises(ConfigError, match="trace mine changed since the run was planned"):
        replay_of(label, 1.0)
