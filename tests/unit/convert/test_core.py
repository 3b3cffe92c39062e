"""Conversion requests (tasks/convert/core.py) checked before any runtime: unreachable formats, unknown formats,
dtypes a format cannot carry."""

from __future__ import annotations

import textwrap

import pytest

from tasks.convert.core import check_conversion, convert
from tasks.core.errors import ConfigError
from tasks.core.spec import load_spec, parse_spec


def test_impossible_request_names_the_reachable_formats():
    with pytest.raises(ConfigError) as err:
        check_conversion(load_spec("tiny-cnn-tf"), "torchscript")
    message = str(err.value)
    assert "model tiny-cnn-tf: formats" in message
    assert "reachable formats: ['onnx', 'savedmodel', 'tensorrt']" in message
    with pytest.raises(ConfigError, match="model mlp: formats='savedmodel'.*reachable formats"):
        check_conversion(load_spec("mlp"), "savedmodel")


def test_unknown_format_is_rejected_naming_model_and_field():
    with pytest.raises(ConfigError, match=r"model mlp: formats='openvino': must be one of"):
        convert(load_spec("mlp"), "openvino")


def test_a_dtype_the_format_cannot_carry_is_rejected(tmp_path):
    path = tmp_path / "f64.yaml"
    path.write_text(textwrap.dedent("""
        name: f64
        source:
          framework: torch
          builder: models.builders.torch_models:build_mlp
          args: {in_features: 4, hidden: 8, out_features: 2}
        inputs: [{name: input, dtype: float64, shape: [-1, 4]}]
        outputs: [{name: output, dtype: float32, shape: [-1, 2]}]
    """))
    spec = parse_spec(path)
    assert check_conversion(spec, "onnx")
    with pytest.raises(ConfigError) as err:
        convert(spec, "tensorrt")  # rejected before any GPU check, runtime or server
    assert "model f64: inputs[0].dtype='float64': tensorrt cannot carry it" in str(err.value)
