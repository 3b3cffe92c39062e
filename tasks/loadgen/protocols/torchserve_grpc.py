"""TorchServe's gRPC inference API (`InferenceAPIsService/Predictions`, port `grpc_inference`) with raw tensors.

TorchServe ships its `inference.proto` inside the frontend's jar, not as Python stubs, and the orchestrator has
no protobuf compiler (grpcio-tools is not one of its packages, and a code generator at run time would be one more
moving part), so the two messages a prediction needs are declared here, field for field as that proto has them,
and built by the protobuf runtime the orchestrator already has (tritonclient's):

    PredictionsRequest { string model_name = 1; string model_version = 2; map<string, bytes> input = 3; }
    PredictionResponse { bytes prediction = 1; }

(the proto's optional `sequence_id` and `status` fields, for streaming, are left out: unknown fields parse and
are ignored). The request's one input is `tensors`: the inputs' raw bytes in the spec's order, the framing of
`torchserve_raw`, which our handler reads; `prediction` is the outputs' raw bytes. The message is serialized once
and sent as is (`grpc_engine`); status codes map to error kinds as in `kserve_v2_grpc`.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar

from tasks.loadgen.protocols.base import BAD_RESPONSE
from tasks.loadgen.protocols.kserve_v2_grpc import status_kind
from tasks.loadgen.protocols.torchserve_raw import RawCodec

PACKAGE = "org.pytorch.serve.grpc.inference"
PREDICTIONS_METHOD = f"/{PACKAGE}.InferenceAPIsService/Predictions"
RAW_INPUT = "tensors"  # the input map's key our handler reads raw tensors from


@cache
def messages() -> tuple[type, type]:
    """(PredictionsRequest, PredictionResponse) as message classes of a private descriptor pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="serving_eval/torchserve_inference.proto", package=PACKAGE,
                                               syntax="proto3")
    request = proto.message_type.add(name="PredictionsRequest")
    request.field.add(name="model_name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    request.field.add(name="model_version", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry = request.nested_type.add(name="InputEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=field.TYPE_BYTES, label=field.LABEL_OPTIONAL)
    request.field.add(name="input", number=3, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                      type_name=f".{PACKAGE}.PredictionsRequest.InputEntry")
    response = proto.message_type.add(name="PredictionResponse")
    response.field.add(name="prediction", number=1, type=field.TYPE_BYTES, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
                 for name in ("PredictionsRequest", "PredictionResponse"))


class TorchServeGrpc(RawCodec):
    name = "torchserve_grpc"
    transport: ClassVar[str] = "grpc"
    grpc_method: ClassVar[str] = PREDICTIONS_METHOD

    def request_bytes(self) -> bytes:
        request_type, self.response_type = messages()
        return request_type(model_name=self.model_name, input={RAW_INPUT: self.raw_request()}).SerializeToString()

    def prediction(self, body: bytes) -> bytes:
        if not hasattr(self, "response_type"):
            self.response_type = messages()[1]
        return self.response_type.FromString(body).prediction

    def check(self, status: int, body: bytes) -> int:
        if status != 0:
            return status_kind(status)
        try:
            return self.check_raw(self.prediction(body))
        except Exception:  # noqa: BLE001 - protobuf's DecodeError or a short body: a bad response
            return BAD_RESPONSE

    def decode(self, body: bytes):
        return super().decode(self.prediction(body))

