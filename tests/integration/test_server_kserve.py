"""KServe: a real server per supported format (ONNX, TorchScript; v2 and v1 REST)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tasks.core.spec import make_inputs
from tasks.serve.servers.kserve import KServeServer
from tests.helpers import post, reference_outputs, serve_and_check

BATCH_SIZES = (1, 4)


@pytest.fixture(scope="module")
def references(mlp_torchscript, mlp_spec):
    return {b: reference_outputs(mlp_torchscript, mlp_spec, b) for b in BATCH_SIZES}


class V1CheckingKServe(KServeServer):
    """KServe that also answers a v1 REST request correctly before it reports its version (in the session)."""

    references: dict = {}
    spec = None

    def version(self, endpoint) -> str:
        x = make_inputs(self.spec, 4)["input"]
        status, body = post(f"{endpoint.base_url}/v1/models/{endpoint.model_name}:predict",
                            json.dumps({"instances": x.tolist()}).encode())
        assert status == 200, body[:300]
        np.testing.assert_allclose(json.loads(body)["predictions"], self.references[4]["output"],
                                   atol=self.spec.parity_atol, rtol=self.spec.parity_rtol)
        return super().version(endpoint)


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_kserve_serves(fmt, request, mlp_spec, references, log_dir):
    artifact = request.getfixturevalue(f"mlp_{fmt}")
    server = V1CheckingKServe()
    server.references, server.spec = references, mlp_spec
    seen = serve_and_check(server, artifact, mlp_spec, log_dir, references, "kserve 0.21.0")
    assert len(seen["pids"]) == 1  # REST and gRPC in one process
