"""benchmarks/duet_nights.py's reading of a recording: each stack's pass-through (no servers: recorded figures)."""

from benchmarks.duet_nights import stack_pass_through


def _cell(base_us: float, extra_us: float, seen_pct: float) -> dict:
    """A cell whose one step costs `extra_us` more engine time a call and whose duets saw `seen_pct`."""
    solo = [{"throughput_rps": 1e6 / base_us, "server_cpu_us_per_request": base_us}] * 3
    judged = [{"metric": "throughput_rps", "change_pct": -seen_pct},
              {"metric": "server_cpu_us_per_request", "change_pct": seen_pct}]
    return {"solo": {"base": solo, "step": solo}, "engine": {"base": [100.0] * 3, "step": [100.0 + extra_us] * 3},
            "steps": {"step": [{"judged": judged}] * 3}}


def test_a_stacks_pass_through_is_set_by_the_model_its_duets_pass_least_through():
    data = {"stacks": {"custom/onnx/light": _cell(1000.0, 100.0, 9.0),  # a 10 % step seen at about 0.9
                       "custom/onnx/heavy": _cell(1000.0, 100.0, 5.0),  # ... at about 0.5
                       "triton/onnx/light": _cell(1000.0, 10.0, 5.0)}}  # a 1 % step: noise, not a share
    shares = stack_pass_through(data)
    assert 0.45 < shares[("custom", "onnx")] < 0.6
    assert ("triton", "onnx") not in shares
