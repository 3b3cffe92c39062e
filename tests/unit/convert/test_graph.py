"""The converter graph (tasks/convert/graph.py): formats, paths from each source, and an orchestrator that never
imports a framework."""

from __future__ import annotations

from tasks.convert.graph import FORMATS, find_path, reachable_formats
from tasks.core.spec import load_spec


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


def test_the_orchestrator_never_imports_a_framework():
    import subprocess
    import sys

    code = ("import sys, tasks.convert, tasks.pipeline; heavy = {'torch', 'tensorflow', 'onnx', 'onnxruntime'}; "
            "assert not heavy & set(sys.modules), heavy & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
