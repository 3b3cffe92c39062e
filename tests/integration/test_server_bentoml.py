"""BentoML: a real server per supported format (ONNX, TorchScript)."""

from __future__ import annotations

import pytest

from tasks.serve.servers.bentoml import BentoMLServer
from tests.helpers import reference_outputs, serve_and_check
from tests.unit.serve.servers.test_bentoml import BENTOML_VERSION

BATCH_SIZES = (1, 4)


@pytest.fixture(scope="module")
def references(mlp_torchscript, mlp_spec):
    return {b: reference_outputs(mlp_torchscript, mlp_spec, b) for b in BATCH_SIZES}


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_bentoml_serves(fmt, request, mlp_spec, references, log_dir):
    artifact = request.getfixturevalue(f"mlp_{fmt}")
    seen = serve_and_check(BentoMLServer(), artifact, mlp_spec, log_dir, references, f"bentoml {BENTOML_VERSION}")
    assert len(seen["pids"]) >= 2  # the circus arbiter and its worker
    assert seen["outside_group"], "the worker should have left the group (setsid): the stop must still end it"
