"""TorchServe's raw-bytes wire without a server: the request body and the response check."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.loadgen.protocols import get_codec
from tasks.loadgen.protocols.base import BAD_RESPONSE, HTTP_STATUS, OK
from tasks.loadgen.protocols.torchserve_raw import TorchServeRaw
from tests.wire_samples import INPUTS, OUTPUTS, SHAPES, codec, http_body


def test_torchserve_raw_request_and_response():
    c = codec("torchserve_raw")
    headers, body = http_body(c.request_bytes())
    assert headers["Content-Type"] == "application/octet-stream"
    assert body == INPUTS["input"].tobytes() + INPUTS["ids"].tobytes()
    assert c.payload_size(c.request_bytes()) == len(body)
    response = OUTPUTS["output"].tobytes() + OUTPUTS["pooled"].tobytes()
    assert c.check(200, response) == OK and c.check(200, response[:-1]) == BAD_RESPONSE
    assert c.check(503, response) == HTTP_STATUS
    np.testing.assert_array_equal(c.decode(response)["pooled"], OUTPUTS["pooled"])
    with pytest.raises(ValueError, match="need the outputs' dtypes"):
        get_codec("torchserve_raw")("h", 1, "m", INPUTS, SHAPES).request_bytes()  # fails at encoding, once


def test_the_protocol_name_is_this_codec():
    assert get_codec("torchserve_raw") is TorchServeRaw
