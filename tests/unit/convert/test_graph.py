"""The converter graph and request checks: paths, unreachable formats, dtypes, the TensorRT skip (no runtime)."""

from __future__ import annotations

import textwrap

import pytest

from tasks.convert import FORMATS, ConversionSkipped, check_conversion, convert, find_path, reachable_formats
from tasks.convert.tensorrt import SKIP_REASON, gpu_skip_reason
from tasks.core.errors import ConfigError
from tasks.core.spec import load_spec, parse_spec


def hops(model: str, fmt: str) -> list[str]:
    return [h.name for h in find_path(load_spec(model), fmt)]


def test_formats():
    assert FORMATS == ("onnx", "torchscript", "savedmodel", "tensorrt")


def test_paths_from_each_source():
    assert hops("mlp", "onnx") == ["torch->onnx"]
    assert hops("mlp", "torchscript") == ["torch->torchscript"]
    assert hops("tiny-cnn", "tensorrt") == ["torch->onnx", "onnx->tensorrt"]
    assert hops("tiny-cnn-tf", "savedmodel") == ["keras->savedmodel"]
    assert hops("tiny-cnn-tf", "onnx") == ["keras->savedmodel", "savedmodel->onnx"]
    assert hops("resnet50-tf", "tensorrt") == ["keras->savedmodel", "savedmodel->onnx", "onnx->tensorrt"]
    assert reachable_formats("onnx") == ["onnx", "tensorrt"]
    assert reachable_formats("torchscript") == ["onnx", "torchscript", "tensorrt"]


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


def test_tensorrt_is_skipped_without_a_gpu():
    if gpu_skip_reason() is None:
        pytest.skip("this host has an NVIDIA GPU: benchmarks/gpu_check.sh checks the TensorRT path")
    with pytest.raises(ConversionSkipped) as err:
        convert(load_spec("tiny-cnn"), "tensorrt", options={"precision": "fp16"})
    assert err.value.reason.startswith(SKIP_REASON)


def test_skipped_conversion_skips_its_cells():
    if gpu_skip_reason() is None:
        pytest.skip("this host has an NVIDIA GPU")
    from tasks.measure.session import measure_session
    from tasks.pipeline import convert_step

    converted = convert_step({"model": "tiny-cnn", "format": "tensorrt"}, log=lambda _: None)
    assert converted["skipped"].startswith(SKIP_REASON)
    assert converted["error"] is None and converted["artifact"] is None
    run = {"run_id": "r", "logical_date": "2026-01-01", "started_at": "t", "schema_version": 1, "code": {},
           "host": {}, "run_dir": "/nonexistent"}
    cell = {"cell_id": "c", "model": "tiny-cnn", "format": "tensorrt", "server": "triton", "launcher": "process",
            "device": "gpu", "batch_size": 1, "mode": "concurrency", "load": 1.0}
    session = {"session_id": "s", "server": "triton", "model": "tiny-cnn", "format": "tensorrt", "cells": [cell]}
    from tasks.plan.cells import Session
    from tasks.plan.config import RunConfig

    rows = measure_session(Session.from_dict(session), [converted], run, config=RunConfig())["rows"]
    assert [(r["status"], r["reason"][:len(SKIP_REASON)]) for r in rows] == [("skipped", SKIP_REASON)]


def test_the_orchestrator_never_imports_a_framework():
    import subprocess
    import sys

    code = ("import sys, tasks.convert, tasks.pipeline; heavy = {'torch', 'tensorflow', 'onnx', 'onnxruntime'}; "
            "assert not heavy & set(sys.modules), heavy & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
