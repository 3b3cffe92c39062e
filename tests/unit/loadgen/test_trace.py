"""Traces (tasks/loadgen/trace.py): the file format read back to the nanosecond, its refusals by line, the digest,
the replay's schedule and settings; load shapes (load_shapes.py) and access logs (access_log.py) made traces."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.access_log import spread_within_seconds, trace_from_log
from tasks.loadgen.http_engine import arrival_schedule_ns
from tasks.loadgen.load_shapes import shape_trace
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


def test_a_steady_shape_is_the_constant_open_loops_schedule():
    """A step shape at one rate is the steady open loop: the same send times, to the nanosecond's rounding."""
    trace = shape_trace("step", {"rates_rps": [20.0], "step_s": 2.0})
    steady = arrival_schedule_ns(LoadSettings(mode="rate", load=20.0, warmup_s=0.0, duration_s=2.0, window_s=0.5))
    assert trace.arrivals == steady.size == 40
    assert np.abs(trace.offsets_ns - steady).max() <= 1_000  # the grid's float sums: under a microsecond


def test_shapes_follow_their_rates():
    step = shape_trace("step", {"rates_rps": [10.0, 0.0, 30.0], "step_s": 1.0})
    seconds = np.bincount((step.offsets_ns // NS).astype(np.int64), minlength=3)
    assert seconds.tolist() == [10, 0, 30]  # nothing while the rate is 0
    spike = shape_trace("spike", {"base_rps": 5.0, "spike_rps": 100.0, "spike_at_s": 2.0, "spike_s": 0.5,
                                  "length_s": 4.0})
    inside = ((spike.offsets_ns >= 2 * NS) & (spike.offsets_ns < 2.5 * NS)).sum()
    assert inside == 50 and spike.arrivals == 68  # R(4 s) = 5 x 4 + 95 x 0.5 = 67.5: arrivals 0 to 67
    day = shape_trace("day", {"mean_rps": 10.0, "peak_ratio": 1.5, "length_s": 60.0})
    quarters = np.bincount((day.offsets_ns // (15 * NS)).astype(np.int64), minlength=4)
    assert day.arrivals == 600 and quarters[1] > quarters[0] and quarters[2] > quarters[3]  # the peak half-way
    ramp = shape_trace("ramp", {"from_rps": 0.0, "to_rps": 20.0, "length_s": 10.0})
    assert ramp.arrivals == 100 and np.all(np.diff(ramp.offsets_ns) > 0)


def test_poisson_shapes_are_seeded_and_keep_their_parameters():
    params = {"mean_rps": 20.0, "peak_ratio": 1.8, "length_s": 30.0}
    one, again, other = (shape_trace("day", params, "poisson", seed) for seed in (1, 1, 2))
    assert one.digest == again.digest != other.digest
    assert abs(one.arrivals - 600) < 5 * 600 ** 0.5
    assert one.shape == {"kind": "day", **params, "arrival": "poisson", "seed": 1}


@pytest.mark.parametrize(("kind", "params", "field"), [
    ("wave", {}, "shape"),
    ("day", {"mean_rps": 4, "peak_ratio": 2.5, "length_s": 10}, "shape peak_ratio"),
    ("spike", {"base_rps": 1, "spike_rps": 9, "spike_at_s": 9, "spike_s": 2, "length_s": 10}, "shape spike_at_s"),
    ("step", {"rates_rps": [], "step_s": 1}, "shape rates_rps"),
    ("ramp", {"from_rps": 1, "to_rps": 2, "length_s": "long"}, "shape length_s"),
    ("step", {"rates_rps": [0.0], "step_s": 1}, "shape"),
])
def test_bad_shape_parameters_are_refused_by_name(kind, params, field):
    with pytest.raises(ConfigError) as raised:
        shape_trace(kind, params)
    assert raised.value.field == field


def test_an_access_log_in_the_common_format_spreads_each_second(tmp_path):
    log = tmp_path / "access.log"
    log.write_text(
        '127.0.0.1 - - [07/Dec/2026:13:55:36 +0000] "POST /v2/models/m/infer HTTP/1.1" 200 12\n'
        '127.0.0.1 - - [07/Dec/2026:13:55:36 +0000] "POST /v2/models/m/infer HTTP/1.1" 200 12\n'
        '127.0.0.1 - - [07/Dec/2026:13:55:35 +0000] "POST /v2/models/m/infer HTTP/1.1" 200 12\n'
        '127.0.0.1 - - [07/Dec/2026:13:55:38 +0000] "GET /v2/health/ready HTTP/1.1" 200 0\n'
        'a line with no time\n')
    made = trace_from_log(log, "clf", match=r"POST /v2/models/.+/infer")
    assert (made.lines, made.kept, made.unmatched, made.untimed, made.reordered) == (5, 3, 2, 0, True)
    assert made.trace.offsets_ns.tolist() == [0, NS, int(1.5 * NS)]
    third = NS // 3
    assert spread_within_seconds(np.array([5, 5, 5, 6]) * NS).tolist() == [5 * NS, 5 * NS + third,
                                                                            5 * NS + 2 * third, 6 * NS]


def test_iso_and_epoch_logs_keep_their_fractions(tmp_path):
    iso = tmp_path / "app.jsonl"
    iso.write_text('{"time": "2026-12-07T13:55:36.100Z", "path": "/predict"}\n'
                   '{"time": "2026-12-07T13:55:36.350+00:00", "path": "/predict"}\n')
    assert trace_from_log(iso, "iso").trace.offsets_ns.tolist() == [0, 250_000_000]
    epoch = tmp_path / "epoch.log"
    epoch.write_text("1796651736.125 POST /infer\n1796651737.000 POST /infer\nnoise 12 34\n")
    made = trace_from_log(epoch, "epoch")
    assert made.trace.offsets_ns.tolist() == [0, 875_000_000] and made.untimed == 1
    with pytest.raises(ConfigError, match="no line with a iso timestamp"):
        trace_from_log(epoch, "iso")
