"""TorchServe: a real server per supported format (TorchScript)."""

from __future__ import annotations

import pytest

from tasks.serve.servers.torchserve import TorchServeServer
from tests.helpers import reference_outputs, serve_and_check

BATCH_SIZES = (1, 4)


@pytest.fixture(scope="module")
def references(mlp_torchscript, mlp_spec):
    return {b: reference_outputs(mlp_torchscript, mlp_spec, b) for b in BATCH_SIZES}


@pytest.mark.integration
def test_torchserve_serves_torchscript(mlp_torchscript, mlp_spec, references, log_dir):
    seen = serve_and_check(TorchServeServer(), mlp_torchscript, mlp_spec, log_dir, references, "torchserve 0.12.0")
    assert len(seen["pids"]) >= 3  # launcher, JVM, one Python worker
