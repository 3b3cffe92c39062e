"""KServe v2 gRPC in the load generator (tasks/loadgen/protocols/kserve_v2_grpc.py) without a server: the
request encoding and response check against tritonclient, `protocols: [grpc]` in the plan (a stack without gRPC
gets skipped cells). Against a real Triton: tests/integration/test_loadgen_grpc.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.protocols import get_codec
from tasks.loadgen.protocols.base import BAD_RESPONSE, CONNECTION, HTTP_STATUS, OK, TIMEOUT
from tasks.loadgen.protocols.kserve_v2_grpc import decode_response
from tasks.measure.point import load_endpoint
from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig
from tasks.serve.base import Endpoint

INPUTS = {"input": np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32),
          "ids": np.arange(16, dtype=np.int64).reshape(8, 2)}


def _codec(model_name: str = "mlp", shapes: dict | None = None):
    return get_codec("kserve_v2_grpc")("127.0.0.1", 1, model_name, INPUTS, shapes or {"output": (8, 10)})


def test_request_is_tritonclients_own_encoding_and_round_trips():
    from tritonclient.grpc import InferInput, service_pb2
    from tritonclient.grpc._utils import _get_inference_request

    ours = _codec().request_bytes()
    theirs = []
    for name, array in INPUTS.items():
        infer_input = InferInput(name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT64")
        infer_input.set_data_from_numpy(array)
        theirs.append(infer_input)
    reference = _get_inference_request("mlp", theirs, "", "", None, 0, False, False, 0, None, None)
    assert ours == reference.SerializeToString()
    request = service_pb2.ModelInferRequest.FromString(ours)
    assert request.model_name == "mlp" and [i.name for i in request.inputs] == list(INPUTS)
    for tensor, raw, (name, array) in zip(request.inputs, request.raw_input_contents, INPUTS.items(), strict=True):
        assert tuple(tensor.shape) == array.shape
        np.testing.assert_array_equal(np.frombuffer(raw, array.dtype).reshape(tensor.shape), array, err_msg=name)


def _response(shape: tuple[int, ...], raw: bool = True) -> bytes:
    from tritonclient.grpc import service_pb2

    values = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    response = service_pb2.ModelInferResponse(model_name="mlp")
    out = response.outputs.add(name="output", datatype="FP32", shape=list(shape))
    if raw:
        response.raw_output_contents.append(values.tobytes())
    else:
        out.contents.fp32_contents.extend(values.ravel().tolist())
    return response.SerializeToString()


def test_response_checked_and_decoded_like_tritonclient():
    from tritonclient.grpc import InferResult, service_pb2

    codec = _codec()
    body = _response((8, 10))
    assert codec.check(0, body) == OK
    expected = InferResult(service_pb2.ModelInferResponse.FromString(body)).as_numpy("output")
    np.testing.assert_array_equal(codec.decode(body)["output"], expected)
    np.testing.assert_array_equal(decode_response(service_pb2.ModelInferResponse.FromString(
        _response((8, 10), raw=False)))["output"], expected)  # typed contents instead of raw bytes
    assert codec.check(0, _response((4, 10))) == BAD_RESPONSE  # wrong batch axis: an error, not a success
    assert codec.check(0, b"\xff\xff\xff") == BAD_RESPONSE
    assert codec.check(0, service_pb2.ModelInferResponse(model_name="mlp").SerializeToString()) == BAD_RESPONSE


@pytest.mark.parametrize(("status", "kind"), [
    ("OK", OK), ("NOT_FOUND", HTTP_STATUS), ("INVALID_ARGUMENT", HTTP_STATUS), ("INTERNAL", HTTP_STATUS),
    ("DEADLINE_EXCEEDED", TIMEOUT), ("UNAVAILABLE", CONNECTION)])
def test_grpc_status_codes_map_to_error_kinds(status, kind):
    import grpc

    code = getattr(grpc.StatusCode, status).value[0]
    assert _codec().check(code, _response((8, 10)) if code == 0 else b"") == kind


def test_unsupported_dtype_names_input_and_rule():
    codec = get_codec("kserve_v2_grpc")("127.0.0.1", 1, "m", {"text": np.array(["a"], dtype=object)}, {})
    with pytest.raises(ValueError, match="input 'text' dtype='object': must be one of"):
        codec.request_bytes()


def test_protocols_grpc_plans_grpc_cells_and_skips_a_stack_without_it():
    plan = make_plan(RunConfig.from_params({"servers": ["triton", "kserve", "custom"], "protocols": ["grpc"]}))
    cells = [c for s in plan.sessions if s.role != "control" for c in s.cells]
    assert {(c.server, c.protocol, c.wire) for c in cells if not c.skip} == {
        ("triton", "kserve_v2_grpc", "grpc"), ("kserve", "kserve_v2_grpc", "grpc")}
    custom = [c for c in cells if c.server == "custom"]
    assert custom and all(c.skip.startswith("server custom has no grpc wire: ") and c.protocol == "grpc"
                          for c in custom)  # planned, never measured over another wire
    assert [s.cells[0].protocol for s in plan.sessions if s.role == "control"] == ["kserve_v2_rest"]
    no_control = RunConfig.from_params({"servers": ["triton"], "control_cell": "none"})
    assert {c.protocol for c in make_plan(no_control).cells} == {"kserve_v2_rest"}
    with pytest.raises(ConfigError, match="protocols='http2'"):
        RunConfig.from_params({"protocols": ["http2"]})


def test_load_endpoint_is_the_grpc_port_for_the_grpc_protocol():
    from tasks.serve.servers import get_server

    endpoint = Endpoint("127.0.0.1", 8000, "mlp", "kserve_v2_rest", {"http": 8000, "grpc": 8001})
    live = SimpleNamespace(endpoint=endpoint, server=get_server("triton"))
    assert load_endpoint(live, "kserve_v2_rest") is endpoint
    grpc_endpoint = load_endpoint(live, "kserve_v2_grpc")
    assert (grpc_endpoint.port, grpc_endpoint.protocol) == (8001, "kserve_v2_grpc")
    with pytest.raises(ConfigError, match="server 'custom' speaks \\['kserve_v2_binary', 'kserve_v2_rest'\\]"):
        load_endpoint(SimpleNamespace(endpoint=endpoint, server=get_server("custom")), "kserve_v2_grpc")
