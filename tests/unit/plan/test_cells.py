"""The plan: conversions and server sessions from a run config; impossible requests refused up front."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig


def test_sessions_cover_each_server_format_pair_with_every_load_point():
    plan = make_plan(RunConfig.from_params({"models": ["mlp"], "formats": ["onnx", "torchscript"],
                                            "servers": ["custom", "torchserve"], "concurrencies": [1, 2, 4],
                                            "batch_sizes": [1, 8]}))
    assert [s.session_id for s in plan.sessions] == [
        "mlp.onnx.custom.process.cpu", "mlp.torchscript.custom.process.cpu", "mlp.torchscript.torchserve.process.cpu"]
    assert all(len(s.cells) == 6 for s in plan.sessions)
    assert plan.conversions == [{"model": "mlp", "format": "onnx"}, {"model": "mlp", "format": "torchscript"}]
    assert len({c.cell_id for c in plan.cells}) == len(plan.cells) == 18


def test_formats_a_model_cannot_reach_are_left_out_for_that_model():
    plan = make_plan(RunConfig.from_params({"models": ["mlp", "tiny-cnn-tf"], "formats": ["onnx", "savedmodel"],
                                            "servers": ["custom"]}))
    assert {(s.model, s.format) for s in plan.sessions} == {
        ("mlp", "onnx"), ("tiny-cnn-tf", "onnx"), ("tiny-cnn-tf", "savedmodel")}


@pytest.mark.parametrize(("conf", "match"), [
    ({"models": ["mlp"], "formats": ["savedmodel"]}, "model mlp: formats.*reachable formats"),
    ({"servers": ["torchserve"], "formats": ["onnx"]}, "servers='torchserve'.*serves formats"),
    ({"models": ["nope"]}, "models='nope'"),
])
def test_impossible_requests_are_refused_before_anything_starts(conf, match):
    with pytest.raises(ConfigError, match=match):
        make_plan(RunConfig.from_params(conf))
