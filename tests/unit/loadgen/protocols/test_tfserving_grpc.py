"""TF Serving's gRPC wire as a load codec without a server: Predict requests and responses round-trip."""

from __future__ import annotations

import numpy as np

from tasks.loadgen.protocols.base import BAD_RESPONSE, OK
from tests.wire_samples import INPUTS, OUTPUTS, codec


def test_tfserving_grpc_is_a_load_codec():
    from tasks.loadgen.protocols.tfserving_grpc import decode_predict_request, encode_predict_response

    c = codec("tfserving_grpc")
    assert c.transport == "grpc" and c.grpc_method.endswith("PredictionService/Predict")
    name, inputs = decode_predict_request(c.request_bytes())
    assert name == "m" and np.array_equal(inputs["input"], INPUTS["input"])
    assert c.check(0, encode_predict_response(OUTPUTS)) == OK
    assert c.check(0, encode_predict_response({"output": np.zeros((2, 10), np.float32)})) == BAD_RESPONSE
