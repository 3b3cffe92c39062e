"""benchmarks/duet_nights.py's calibration and its reading of a recording (no servers: recorded figures)."""

import pytest

from benchmarks.duet_nights import calibrate, known_pct, readings, ruler_errors


def test_a_step_is_calibrated_from_the_engine_time_at_the_base_and_a_probe():
    # engine time a + b h^2 with b = 1e-4 us: the base (256) 26.6 us, the probe (384) 34.7 us
    b = 1e-4
    hidden = calibrate(20.0 + b * 256 ** 2, 20.0 + b * 384 ** 2, 256, 384, base_cpu_us=800.0, step_pct=10.0)
    assert b * (hidden ** 2 - 256 ** 2) == pytest.approx(80.0, rel=0.01)  # 10 % of 800 us more engine time


def _trial(base_cpu: float, duet_pct: float, split_pct: float, size: tuple[float, float, float]) -> dict:
    rounds = [{"sides": {"reference": {"server_cpu_us_per_request": base_cpu}}}] * 4
    judged = [{"metric": "server_cpu_us_per_request", "change_pct": duet_pct, "verdict": "regression"}]
    return {"duet": {"judged": judged, "seconds": 30.0}, "split": {"judged": [{**judged[0], "change_pct": split_pct}],
                                                                    "seconds": 30.0},
            "size": {"rounds": rounds, "seconds": 90.0, "sizes": {"server_cpu_us_per_request": {
                "change_pct": size[0], "change_ci": [size[1], size[2]], "rounds": 4}}}}


def test_each_ruler_is_read_against_the_engines_known_size():
    entry = {"engine": {"base": [100.0, 102.0, 98.0], "10": [180.0, 182.0, 178.0]},  # +80 us a call, round by round
             "trials": {"10": [_trial(800.0, 25.0, 12.0, (9.0, 6.0, 12.0))]}, "equal": []}
    trial = entry["trials"]["10"][0]
    assert known_pct(entry, "10", trial) == pytest.approx(10.0)  # 80 us over the 800 us of its own rounds
    (row,) = readings({"stacks": {"custom/onnx/light": entry}})
    assert row["found"] and row["ci"] == [6.0, 12.0]
    errors = ruler_errors([row])
    assert errors["size"]["median_error"] == pytest.approx(1.0) and errors["size"]["within"] == 1.0
    assert errors["duet"]["scale"] == pytest.approx(2.5) and errors["duet"]["within"] == 0.0
