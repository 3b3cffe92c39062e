"""KServe v2 REST with the binary tensor data extension: Triton, KServe and the custom service speak it.

Request (encoded once per model and batch size): a JSON header naming every input with its shape, datatype and
`"parameters": {"binary_data_size": N}`, and asking for every output in binary (`"parameters":
{"binary_data_output": true}` on the request), then the inputs' raw bytes (little-endian, row major, no padding)
in the header's order; the `Inference-Header-Content-Length` header gives the JSON header's length.

Response: a JSON header whose outputs carry `binary_data_size`, then their bytes in the header's order (an output
without it came as JSON `data`). The generator's client hands a codec the body only, so the header is read as the
one JSON value at the start of the body (`json.JSONDecoder.raw_decode` over the first bytes as latin-1: one
character per byte, so its end is a byte offset), and the body must be exactly that header plus the binary sizes
it declares. Every response's header is parsed and its shapes and sizes checked (a few kB, whatever the tensors
weigh); the outputs' arrays are read on the rule of `Codec.sampled_out`, as the JSON codecs read theirs.
"""

from __future__ import annotations

import json

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import BAD_RESPONSE, HTTP_STATUS, OK, Codec
from tasks.loadgen.protocols.kserve_v2_grpc import NP_TO_V2, V2_TO_NP

HEADER_LENGTH = "Inference-Header-Content-Length"
HEADER_PROBE_BYTES = 4096  # the JSON header is looked for in this many bytes first, then in 4x as many
_DECODER = json.JSONDecoder()


def encode_inputs(inputs: dict[str, np.ndarray], binary_outputs: bool = True) -> tuple[bytes, bytes]:
    """(JSON header, raw tensor bytes) of a binary-data request for these inputs."""
    header, blobs = [], []
    for name, array in inputs.items():
        datatype = NP_TO_V2.get(array.dtype.name)
        if datatype is None:
            raise ValueError(f"input {name!r} dtype={array.dtype.name!r}: must be one of {sorted(NP_TO_V2)} for "
                             "KServe v2 binary tensors")
        raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header.append({"name": name, "shape": list(array.shape), "datatype": datatype,
                       "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    request = {"inputs": header, **({"parameters": {"binary_data_output": True}} if binary_outputs else {})}
    return json.dumps(request, separators=(",", ":")).encode(), b"".join(blobs)


def split_body(body: bytes) -> tuple[dict, int]:
    """(the JSON header, the offset of the binary data) of a binary-data message; ValueError when the body is not
    a JSON header followed by exactly the bytes its tensors declare."""
    limit = HEADER_PROBE_BYTES
    while True:
        try:
            header, end = _DECODER.raw_decode(body[:limit].decode("latin-1"))
            break
        except json.JSONDecodeError:
            if limit >= len(body):
                raise ValueError("the body does not start with a whole JSON header") from None
            limit *= 4
    if not isinstance(header, dict):
        raise ValueError("the JSON header must be an object")
    tensors = header.get("outputs", header.get("inputs")) or []
    declared = sum(int((t.get("parameters") or {}).get("binary_data_size", 0)) for t in tensors)
    start = len(body) - declared
    if start < end or body[end:start].strip():
        raise ValueError(f"the body holds {len(body) - end} bytes after its JSON header; its tensors declare "
                         f"{declared}")
    return header, start


def decode_tensors(header: dict, body: bytes, start: int, key: str = "outputs") -> dict[str, np.ndarray]:
    """The tensors of a split message by name: binary ones read from the body from `start`, others from JSON."""
    out, offset = {}, start
    for tensor in header[key]:
        shape = tuple(int(d) for d in tensor["shape"])
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:
            out[tensor["name"]] = np.asarray(tensor["data"]).reshape(shape)
            continue
        datatype = tensor["datatype"]
        if datatype not in V2_TO_NP:
            raise ValueError(f"tensor {tensor['name']!r} datatype={datatype!r}: must be one of {sorted(V2_TO_NP)}")
        dtype = np.dtype(V2_TO_NP[datatype]).newbyteorder("<")
        size = int(size)
        if size != dtype.itemsize * int(np.prod(shape)):
            raise ValueError(f"tensor {tensor['name']!r}: binary_data_size {size} does not fit shape {list(shape)} "
                             f"of {datatype}")
        out[tensor["name"]] = np.frombuffer(body, dtype, count=size // dtype.itemsize, offset=offset).reshape(shape)
        offset += size
    return out


class KServeV2Binary(Codec):
    name = "kserve_v2_binary"

    def request_bytes(self) -> bytes:
        header, data = encode_inputs(self.inputs)
        return build_request("POST", self.host, self.port, f"/v2/models/{self.model_name}/infer", header + data,
                             content_type="application/octet-stream", headers={HEADER_LENGTH: str(len(header))})

    def check(self, status: int, body: bytes) -> int:
        if status != 200:
            return HTTP_STATUS
        try:
            header, start = split_body(body)
            if not header["outputs"]:
                return BAD_RESPONSE
            for out in header["outputs"]:
                expected = self.output_shapes.get(out["name"])
                if expected is not None and tuple(out["shape"]) != expected:
                    return BAD_RESPONSE
            if not self.sampled_out(body):
                decode_tensors(header, body, start)
        except (ValueError, KeyError, TypeError, AttributeError):
            return BAD_RESPONSE
        return OK

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        header, start = split_body(body)
        return decode_tensors(header, body, start)
