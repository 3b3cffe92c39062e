"""The KServe v2 binary wire without a server: requests and responses against tritonclient's and the custom
service's own encoders and decoders, the sampled full check of large responses, and which wires each stack speaks."""

from __future__ import annotations

import importlib.util
import json

import numpy as np

from tasks.core.paths import DOCKER_DIR
from tasks.core.results import LEGACY_PROTOCOLS
from tasks.loadgen.protocols import get_codec
from tasks.loadgen.protocols.base import BAD_RESPONSE, FULL_CHECK_EVERY, HTTP_STATUS, OK
from tasks.loadgen.protocols.kserve_v2_binary import split_body
from tasks.serve.servers import SERVERS
from tests.wire_samples import INPUTS, OUTPUTS, codec, http_body


def custom_app():
    """docker/custom/app.py, the custom service's entry script, as a module (its encoders and decoders)."""
    spec = importlib.util.spec_from_file_location("custom_app", DOCKER_DIR / "custom" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_binary_request_is_read_by_tritonclient_and_by_the_custom_service_alike():
    from tritonclient.http import InferInput
    from tritonclient.http._utils import _get_inference_request

    raw = codec("kserve_v2_binary").request_bytes()
    headers, body = http_body(raw)
    length = int(headers["Inference-Header-Content-Length"])
    assert headers["Content-Type"] == "application/octet-stream" and int(headers["Content-Length"]) == len(body)
    header = json.loads(body[:length])
    assert header["parameters"] == {"binary_data_output": True}
    theirs = []
    for name, array in INPUTS.items():
        tensor = InferInput(name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT64")
        tensor.set_data_from_numpy(array, binary_data=True)
        theirs.append(tensor)
    their_body, their_length = _get_inference_request(theirs, "", None, 0, False, False, 0, None, None)
    assert body[length:] == their_body[their_length:]  # the same tensor bytes, in the same order
    their_header = json.loads(their_body[:their_length])
    assert [i["parameters"] for i in header["inputs"]] == [i["parameters"] for i in their_header["inputs"]]
    inputs, _ = custom_app().decode_request(body, str(length))
    for name, array in INPUTS.items():
        np.testing.assert_array_equal(inputs[name], array)


def test_binary_response_decoded_like_tritonclient_and_checked():
    from tritonclient.http import InferResult

    app = custom_app()
    body, headers = app.encode_response("m", OUTPUTS, True)
    length = int(headers["Inference-Header-Content-Length"])
    c = codec("kserve_v2_binary")
    assert split_body(body)[1] == length  # the header found from the body alone
    assert c.check(200, body) == OK
    theirs = InferResult.from_response_body(body, header_length=length)
    for name, array in OUTPUTS.items():
        np.testing.assert_array_equal(c.decode(body)[name], theirs.as_numpy(name))
        np.testing.assert_array_equal(c.decode(body)[name], array)
    json_only, _ = app.encode_response("m", OUTPUTS, set())  # binary outputs not given: JSON data still decodes
    np.testing.assert_array_equal(c.decode(json_only)["output"], OUTPUTS["output"])
    assert c.check(200, body[:-4]) == BAD_RESPONSE  # shorter than its header declares
    assert c.check(200, body + b"x") == BAD_RESPONSE
    assert c.check(500, body) == HTTP_STATUS
    assert codec("kserve_v2_binary", {"output": (2, 10)}).check(200, body) == BAD_RESPONSE  # wrong batch axis
    one, _ = app.encode_response("m", {"output": OUTPUTS["output"]}, {"output"})
    assert app.binary_outputs({"outputs": [{"name": "output", "parameters": {"binary_data": True}}]}) == {"output"}
    assert c.check(200, one) == OK  # an output per `binary_data` of its requested output


def test_large_binary_responses_parse_their_header_always_and_arrays_on_the_sampling_rule(monkeypatch):
    from tasks.loadgen.protocols import kserve_v2_binary

    big = {"output": np.zeros((4, 50_000), np.float32)}
    body, _ = custom_app().encode_response("m", big, True)
    c = get_codec("kserve_v2_binary")("h", 1, "m", INPUTS, {"output": (4, 50_000)}, {"output": "float32"})
    decoded = []
    real = kserve_v2_binary.decode_tensors
    monkeypatch.setattr(kserve_v2_binary, "decode_tensors", lambda *a: decoded.append(1) or real(*a))
    assert all(c.check(200, body) == OK for _ in range(2 * FULL_CHECK_EVERY))
    assert len(decoded) == 2  # every FULL_CHECK_EVERY-th large response has its arrays read
    assert c.check(200, body.replace(b"[4,50000]", b"[4,50001]").replace(b"[4, 50000]", b"[4, 50001]")) \
        == BAD_RESPONSE  # a wrong shape is caught without reading the arrays


def test_the_custom_services_timing_files_add_up_over_workers(tmp_path):
    app = custom_app()
    first = app.Timing(tmp_path)
    first.add(1_000_000, 2_000_000, 1_000_000, 4_000_000)
    (tmp_path / "timing-99999.bin").write_bytes(app.TIMING_LAYOUT.pack(2, 1, 2, 3, 6))  # another worker's file
    assert app.read_timing(tmp_path) == [3, 1_000_001, 2_000_002, 1_000_003, 4_000_006]
    assert 'serving_eval_request_seconds_total{part="total"} 0.004000006' in app.timing_text(tmp_path)


def test_every_server_declares_json_and_says_why_a_wire_is_missing():
    for name, cls in SERVERS.items():
        server = cls()
        assert "json" in server.wires and server.protocol == server.wires["json"].codec
        assert set(server.wires) | set(server.missing_wires) == {"json", "binary", "grpc"}, name
        for wire in server.wires.values():
            get_codec(wire.codec)
        assert server.timing_source
    assert LEGACY_PROTOCOLS == {name: cls().protocol for name, cls in SERVERS.items()}  # the REST JSON codec of 1.0
