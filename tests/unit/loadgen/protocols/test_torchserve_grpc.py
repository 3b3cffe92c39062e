"""TorchServe's gRPC messages without a server: the proto's field numbers, read by a protobuf wire parser."""

from __future__ import annotations

import numpy as np

from tasks.loadgen.protocols import get_codec
from tasks.loadgen.protocols.base import BAD_RESPONSE, OK
from tasks.loadgen.protocols.torchserve_grpc import TorchServeGrpc
from tests.wire_samples import INPUTS, OUTPUTS, codec


def test_torchserve_grpc_messages_have_the_protos_field_numbers():
    from tasks.loadgen.protocols.tfserving_grpc import LEN, fields

    c = codec("torchserve_grpc")
    assert c.transport == "grpc"
    assert c.grpc_method == "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions"
    request = c.request_bytes()
    parsed = {number: value for number, _, value in fields(request)}
    assert parsed[1] == b"m"  # model_name = 1
    entry = {number: value for number, wire, value in fields(parsed[3]) if wire == LEN}  # map<string, bytes> input = 3
    assert entry == {1: b"tensors", 2: INPUTS["input"].tobytes() + INPUTS["ids"].tobytes()}
    prediction = OUTPUTS["output"].tobytes() + OUTPUTS["pooled"].tobytes()
    reply = b"\x0a" + bytes([0x80 | (len(prediction) & 0x7F), len(prediction) >> 7]) + prediction  # prediction = 1
    assert c.check(0, reply) == OK
    np.testing.assert_array_equal(c.decode(reply)["output"], OUTPUTS["output"])
    assert c.check(0, reply[:-3]) == BAD_RESPONSE and c.check(14, b"") != OK


def test_the_protocol_name_is_this_codec():
    assert get_codec("torchserve_grpc") is TorchServeGrpc
