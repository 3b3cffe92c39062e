"""Load shapes (tasks/loadgen/load_shapes.py): generated traces that follow their rates, seeded, their parameters
kept, bad parameters refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.http_engine import arrival_schedule_ns
from tasks.loadgen.load_shapes import shape_trace
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.trace import NS


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
