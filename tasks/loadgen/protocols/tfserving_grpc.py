"""TensorFlow Serving gRPC Predict, with the protobuf messages encoded by hand (no tensorflow-serving-api).

`tensorflow-serving-api` depends on all of TensorFlow, which the orchestrator never installs. Predict needs
only four small messages, so they are written here in protobuf wire format, with the field numbers of
tensorflow_serving/apis/{predict,model}.proto and tensorflow/core/framework/{tensor,tensor_shape}.proto:

    PredictRequest  { ModelSpec model_spec = 1; map<string, TensorProto> inputs = 2; }
    PredictResponse { map<string, TensorProto> outputs = 1; ModelSpec model_spec = 2; }
    ModelSpec       { string name = 1; string signature_name = 3; }
    TensorProto     { DataType dtype = 1; TensorShapeProto tensor_shape = 2; bytes tensor_content = 4;
                      float_val = 5; double_val = 6; int_val = 7; int64_val = 10; half_val = 13 (packed) }
    TensorShapeProto { repeated Dim dim = 2; }  Dim { int64 size = 1; }

`TFServingGrpc` is the load generator's codec for it (the gRPC engine sends the request, encoded once, as is);
`predict` is one call, for smoke and parity checks, with grpcio, which the orchestrator has.
"""

from __future__ import annotations

import struct
from typing import ClassVar

import numpy as np

from tasks.loadgen.protocols.base import BAD_RESPONSE, OK, Codec
from tasks.loadgen.protocols.kserve_v2_grpc import status_kind

PREDICT_METHOD = "/tensorflow.serving.PredictionService/Predict"
DEFAULT_SIGNATURE = "serving_default"
PREDICT_TIMEOUT_S = 10.0
# tensorflow DataType enum values -> numpy dtypes (little-endian, as tensor_content is)
DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<f8"), 3: np.dtype("<i4"), 9: np.dtype("<i8"), 19: np.dtype("<f2")}
NP_TO_DTYPE = {dt.name: code for code, dt in DTYPES.items()}
VARINT, I64, LEN, I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    key = _varint(number << 3 | wire_type)
    if wire_type == VARINT:
        return key + _varint(int(payload))
    return key + _varint(len(payload)) + payload  # LEN


def encode_tensor(array: np.ndarray) -> bytes:
    """A TensorProto with dtype, shape and the values as raw little-endian tensor_content."""
    if array.dtype.name not in NP_TO_DTYPE:
        raise ValueError(f"dtype={array.dtype.name!r}: must be one of {sorted(NP_TO_DTYPE)} for TF Serving gRPC")
    dtype = DTYPES[NP_TO_DTYPE[array.dtype.name]]
    shape = b"".join(_field(2, LEN, _field(1, VARINT, size)) for size in array.shape)
    return (_field(1, VARINT, NP_TO_DTYPE[array.dtype.name]) + _field(2, LEN, shape)
            + _field(4, LEN, np.ascontiguousarray(array, dtype=dtype).tobytes()))


def encode_predict_request(model_name: str, inputs: dict[str, np.ndarray],
                           signature_name: str = DEFAULT_SIGNATURE) -> bytes:
    spec = _field(1, LEN, model_name.encode()) + _field(3, LEN, signature_name.encode())
    entries = b"".join(_field(2, LEN, _field(1, LEN, name.encode()) + _field(2, LEN, encode_tensor(a)))
                       for name, a in inputs.items())
    return _field(1, LEN, spec) + entries


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint in protobuf message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of every field of one message, in order."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = _read_varint(data, pos)
        elif wire_type == LEN:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire_type in (I64, I32):
            size = 8 if wire_type == I64 else 4
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ValueError(f"wire type {wire_type}: unsupported (groups are not used by these messages)")
        out.append((number, wire_type, value))
    return out


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_tensor(data: bytes) -> np.ndarray:
    dtype_code, shape, content = 0, [], None
    values: list = []
    for number, wire_type, value in fields(data):
        if number == 1:
            dtype_code = value
        elif number == 2:
            shape = [next((_signed64(v) for n, _, v in fields(dim) if n == 1), 0)
                     for n, _, dim in fields(value) if n == 2]
        elif number == 4:
            content = value
        elif number in (5, 6) and wire_type == LEN:  # packed float_val / double_val
            values += np.frombuffer(value, "<f4" if number == 5 else "<f8").tolist()
        elif number in (5, 6):
            values.append(struct.unpack("<f" if number == 5 else "<d", value)[0])
        elif number in (7, 10, 13) and wire_type == LEN:  # packed int_val / int64_val / half_val (varints)
            pos = 0
            while pos < len(value):
                v, pos = _read_varint(value, pos)
                values.append(v)
        elif number in (7, 10, 13):
            values.append(value)
    if dtype_code not in DTYPES:
        raise ValueError(f"TensorProto.dtype={dtype_code}: unsupported, must be one of {sorted(DTYPES)}")
    dtype = DTYPES[dtype_code]
    if content is not None:
        return np.frombuffer(content, dtype).reshape(shape).copy()
    if dtype_code == 19:  # half_val carries the float16 bit patterns
        array = np.asarray(values, np.uint16).view(np.float16)
    elif dtype.kind == "i":
        array = np.asarray([_signed64(v) for v in values], dtype)
    else:
        array = np.asarray(values, dtype)
    count = int(np.prod(shape)) if shape else 1
    if array.size == 1 and count > 1:  # protobuf's shorthand: one value repeated
        array = np.full(count, array[0], dtype)
    return array.reshape(shape)


def _tensor_map(data: bytes, map_field: int) -> dict[str, np.ndarray]:
    out = {}
    for number, _, entry in fields(data):
        if number == map_field:
            parts = {n: v for n, _, v in fields(entry)}
            out[parts.get(1, b"").decode()] = decode_tensor(parts.get(2, b""))
    return out


def decode_predict_request(data: bytes) -> tuple[str, dict[str, np.ndarray]]:
    """(model name, inputs) of a PredictRequest (used by test stand-ins)."""
    spec = next((v for n, _, v in fields(data) if n == 1), b"")
    name = next((v.decode() for n, _, v in fields(spec) if n == 1), "")
    return name, _tensor_map(data, 2)


def encode_predict_response(outputs: dict[str, np.ndarray], model_name: str = "") -> bytes:
    entries = b"".join(_field(1, LEN, _field(1, LEN, name.encode()) + _field(2, LEN, encode_tensor(a)))
                       for name, a in outputs.items())
    return entries + (_field(2, LEN, _field(1, LEN, model_name.encode())) if model_name else b"")


def decode_predict_response(data: bytes) -> dict[str, np.ndarray]:
    return _tensor_map(data, 1)


def predict(host: str, port: int, model_name: str, inputs: dict[str, np.ndarray],
            timeout_s: float = PREDICT_TIMEOUT_S, signature_name: str = DEFAULT_SIGNATURE) -> dict[str, np.ndarray]:
    """One Predict call over gRPC (insecure channel: the server is on loopback); the outputs by name."""
    import grpc

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        call = channel.unary_unary(PREDICT_METHOD)  # no serializers: bytes in, bytes out
        reply = call(encode_predict_request(model_name, inputs, signature_name), timeout=timeout_s)
    return decode_predict_response(reply)


class TFServingGrpc(Codec):
    """PredictionService/Predict as a load-generator codec: tensors as `tensor_content`, outputs shape-checked."""

    name = "tfserving_grpc"
    transport: ClassVar[str] = "grpc"
    grpc_method: ClassVar[str] = PREDICT_METHOD

    def request_bytes(self) -> bytes:
        return encode_predict_request(self.model_name, self.inputs)

    def check(self, status: int, body: bytes) -> int:
        if status != 0:
            return status_kind(status)
        if self.sampled_out(body):
            return OK if body else BAD_RESPONSE
        try:
            outputs = decode_predict_response(body)
        except (ValueError, IndexError, KeyError, struct.error):
            return BAD_RESPONSE
        if not outputs:
            return BAD_RESPONSE
        return OK if all(name in outputs and outputs[name].shape == tuple(expected)
                         for name, expected in self.output_shapes.items()) else BAD_RESPONSE

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        return decode_predict_response(body)
