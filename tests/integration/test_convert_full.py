"""Full-size catalogue models (ResNet-50, BERT base) convert with parity: slow, run with `-m slow`.

`make test` selects no marker, so these are skipped there unless `-m slow` is given; the benchmark
(benchmarks/convert_models.py) converts the same models and prints their times.
"""

from __future__ import annotations

import pytest

from tasks.convert import convert
from tasks.core.spec import load_spec

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(autouse=True)
def only_when_selected(request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("full-size conversion: run with `pytest -m slow` (or benchmarks/convert_models.py)")


@pytest.mark.parametrize(("model", "fmt"), [
    ("resnet50", "torchscript"), ("resnet50", "onnx"), ("bert-base", "torchscript"), ("bert-base", "onnx"),
    ("resnet50-tf", "savedmodel"), ("resnet50-tf", "onnx"),
])
def test_full_size_model_converts_with_parity(model, fmt):
    artifact = convert(load_spec(model), fmt, log=lambda _: None)
    assert artifact.parity_passed, artifact.record["parity"]
    assert {p["batch_size"] for p in artifact.record["parity"]} == {1, 4}
