"""TensorRT (tasks/convert/tensorrt.py): skipped without a GPU, and its cells skipped with it."""

from __future__ import annotations

import pytest

from tasks.convert import ConversionSkipped, convert
from tasks.convert.tensorrt import SKIP_REASON, gpu_skip_reason
from tasks.core.spec import load_spec


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
