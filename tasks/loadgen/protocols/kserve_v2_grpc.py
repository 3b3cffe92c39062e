"""KServe v2 gRPC inference protocol (`inference.GRPCInferenceService/ModelInfer`): Triton and KServe speak it.

The ModelInferRequest is built once per (model, batch size) with the generated stubs tritonclient ships
(`tritonclient.grpc.service_pb2`), tensors as `raw_input_contents` (little-endian bytes, as tritonclient
sends them), and serialized; the engine (`tasks.loadgen.grpc_engine`) sends those bytes as is on a method
without serializers, so no protobuf is built per request. A response is parsed (upb) and its output shapes
checked; large responses are checked on every FULL_CHECK_EVERY-th one only (`Codec.sampled_out`).

`check` takes the call's gRPC status code (0 = OK) instead of an HTTP status. The error kinds stay the fixed
ones of `protocols.base`, so recordings merge whatever the protocol:
DEADLINE_EXCEEDED -> timeout; UNAVAILABLE (connection refused/lost) -> connection; any other non-OK status
(NOT_FOUND for an unknown model, INVALID_ARGUMENT, INTERNAL...) -> http_status, "the server answered with
an error status".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tasks.loadgen.protocols.base import BAD_RESPONSE, CONNECTION, HTTP_STATUS, OK, TIMEOUT, Codec

if TYPE_CHECKING:
    from tritonclient.grpc import service_pb2

MODEL_INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"
GRPC_DEADLINE_EXCEEDED, GRPC_UNAVAILABLE = 4, 14  # status codes fixed by the gRPC spec (grpc.StatusCode)
STATUS_KINDS = {GRPC_DEADLINE_EXCEEDED: TIMEOUT, GRPC_UNAVAILABLE: CONNECTION}
# numpy dtype name -> KServe v2 datatype (BYTES is not a raw numeric tensor and is left out)
NP_TO_V2 = {"bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
            "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float16": "FP16",
            "float32": "FP32", "float64": "FP64"}
V2_TO_NP = {v: k for k, v in NP_TO_V2.items()}
# KServe v2 datatype -> the typed `contents` field a server may answer with instead of raw_output_contents
V2_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
               "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
               "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
               "FP64": "fp64_contents"}


def _pb():
    """The generated KServe v2 messages (imported on first use: tritonclient.grpc takes ~0.3 s to import)."""
    from tritonclient.grpc import service_pb2

    return service_pb2


def status_kind(code: int) -> int:
    """The error kind of a gRPC status code (OK for 0)."""
    if code == 0:
        return OK
    return STATUS_KINDS.get(code, HTTP_STATUS)


def infer_request(model_name: str, inputs: dict[str, np.ndarray]) -> service_pb2.ModelInferRequest:
    """A ModelInferRequest with every input as raw little-endian bytes (tritonclient's own layout)."""
    request = _pb().ModelInferRequest(model_name=model_name)
    for name, array in inputs.items():
        datatype = NP_TO_V2.get(array.dtype.name)
        if datatype is None:
            raise ValueError(f"input {name!r} dtype={array.dtype.name!r}: must be one of {sorted(NP_TO_V2)} "
                             "for KServe v2 gRPC raw tensors")
        request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
        request.raw_input_contents.append(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
                                          .tobytes())
    return request


def decode_response(response: service_pb2.ModelInferResponse) -> dict[str, np.ndarray]:
    """The outputs of a ModelInferResponse by name (raw_output_contents, numeric datatypes)."""
    outputs = {}
    for index, out in enumerate(response.outputs):
        if out.datatype not in V2_TO_NP:
            raise ValueError(f"output {out.name!r} datatype={out.datatype!r}: must be one of {sorted(V2_TO_NP)}")
        dtype = np.dtype(V2_TO_NP[out.datatype]).newbyteorder("<")
        if index < len(response.raw_output_contents):
            values = np.frombuffer(response.raw_output_contents[index], dtype)
        elif out.datatype in V2_CONTENTS:
            values = np.asarray(getattr(out.contents, V2_CONTENTS[out.datatype]), dtype)
        else:
            raise ValueError(f"output {out.name!r} datatype={out.datatype!r}: must come as raw_output_contents")
        outputs[out.name] = values.reshape(tuple(out.shape))
    return outputs


class KServeV2Grpc(Codec):
    name = "kserve_v2_grpc"
    transport: ClassVar[str] = "grpc"
    grpc_method: ClassVar[str] = MODEL_INFER_METHOD

    def __init__(self, host: str, port: int, model_name: str, inputs: dict[str, np.ndarray],
                 output_shapes: dict[str, tuple[int, ...]], output_dtypes: dict[str, str] | None = None) -> None:
        super().__init__(host, port, model_name, inputs, output_shapes, output_dtypes)
        self.response_type = _pb().ModelInferResponse

    def request_bytes(self) -> bytes:
        return infer_request(self.model_name, self.inputs).SerializeToString()

    def check(self, status: int, body: bytes) -> int:
        if status != 0:
            return status_kind(status)
        if self.sampled_out(body):
            return OK if body else BAD_RESPONSE
        try:
            response = self.response_type.FromString(body)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError; any unparsable body is a bad response
            return BAD_RESPONSE
        if not response.outputs:
            return BAD_RESPONSE
        for out in response.outputs:
            expected = self.output_shapes.get(out.name)
            if expected is not None and tuple(out.shape) != expected:
                return BAD_RESPONSE
        return OK

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        return decode_response(self.response_type.FromString(body))
