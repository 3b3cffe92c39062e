"""The host-noise benchmark's analysis (benchmarks/host_noise.py): its figures mean what docs/regressions.md says."""

from __future__ import annotations

import math
import random

from benchmarks.host_noise import DEFAULT_DATA, lagged_correlation, main, means_of, robust_spread, with_neighbours


def test_lagged_correlation_reads_how_long_a_spell_lasts():
    rng = random.Random(7)
    spells, white, level = [], [], 0.0
    for _ in range(3000):
        level = 0.8 * level + rng.gauss(0, 1)  # AR(1): a spell decays by 0.8 a step
        spells.append(level)
        white.append(rng.gauss(0, 1))
    assert abs(lagged_correlation(spells, 1) - 0.8) < 0.05
    assert abs(lagged_correlation(spells, 3) - 0.8 ** 3) < 0.07
    assert abs(lagged_correlation(white, 1)) < 0.06
    assert math.isnan(lagged_correlation(spells[:5], 1))  # too few pairs to say


def test_means_of_takes_consecutive_runs_and_drops_the_rest():
    assert means_of([1, 3, 5, 7, 9], 2) == [2, 6]


def test_dividing_by_the_neighbours_removes_what_the_two_stacks_share():
    rng = random.Random(3)
    rows, host = [], 0.0
    for session in range(400):
        host = 0.97 * host + rng.gauss(0, 0.025)  # the host's state (spells), shared by both stacks
        fmt = ("onnx", "torchscript")[session % 2]
        rows.append({"session": float(session), "format": fmt, "load": 4.0,
                     "throughput_rps": 2000 * math.exp(host + rng.gauss(0, 0.01))})
    raw = robust_spread([math.log(r["throughput_rps"]) for r in rows if r["format"] == "onnx"])
    pairs = with_neighbours(rows, "onnx", 4.0, "throughput_rps")
    assert len(pairs) == 199  # every ONNX session but the first, which has no session before it
    assert lagged_correlation([a for a, _ in pairs], 0, [b for _, b in pairs]) > 0.9
    left = [a - b for a, b in pairs]
    assert robust_spread(left) < raw / 3  # the shared state is gone: the stacks' own noise is left


def test_the_shipped_recording_is_analysed_per_cell(capsys):
    assert main(["analyse", "--data", str(DEFAULT_DATA)]) == 0
    out = capsys.readouterr().out
    for cell in ("onnx/c1", "onnx/c4", "torchscript/c1", "torchscript/c4"):
        assert out.count(f"  {cell}: ") == 3  # one line per metric
    assert "too few sessions" not in out
