"""TorchServe REST inference (`POST /predictions/<model>`) with raw tensor bytes: no JSON on either side.

Request: `Content-Type: application/octet-stream`, the body the model's inputs' bytes one after another in the
spec's order (little-endian, row major, no header). Our handler (`docker/torchserve/handler.py`) knows the
inputs' names, dtypes and per-sample shapes from its `handler_config.json` and reads the batch size from the
body's length. Response: the outputs' bytes one after another in the spec's order, in their spec dtypes; the
client knows their shapes (batch axis included) and dtypes, so its length alone says whether it is whole, and
every response's length is checked; its arrays are read on the rule of `Codec.sampled_out`.

The same framing travels over TorchServe's gRPC inference API (`torchserve_grpc`).
"""

from __future__ import annotations

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import BAD_RESPONSE, HTTP_STATUS, OK, Codec

RAW_CONTENT_TYPE = "application/octet-stream"


def raw_inputs(inputs: dict[str, np.ndarray]) -> bytes:
    """Every input's little-endian bytes, in order."""
    return b"".join(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes() for a in inputs.values())


def raw_layout(shapes: dict[str, tuple[int, ...]], dtypes: dict[str, str]) -> list[tuple[str, tuple, np.dtype]]:
    """(name, shape, little-endian dtype) of every output in order; ValueError when a dtype is not known."""
    missing = [name for name in shapes if name not in dtypes]
    if missing:
        raise ValueError(f"outputs {missing}: raw tensors need the outputs' dtypes (the spec's), none were given")
    return [(name, tuple(shape), np.dtype(dtypes[name]).newbyteorder("<")) for name, shape in shapes.items()]


def raw_size(layout: list[tuple[str, tuple, np.dtype]]) -> int:
    return sum(dtype.itemsize * int(np.prod(shape)) for _, shape, dtype in layout)


def split_raw(body: bytes, layout: list[tuple[str, tuple, np.dtype]]) -> dict[str, np.ndarray]:
    """The outputs of a raw response by name; ValueError when its length is not theirs."""
    if len(body) != raw_size(layout):
        raise ValueError(f"raw response of {len(body)} bytes: the outputs need exactly {raw_size(layout)}")
    out, offset = {}, 0
    for name, shape, dtype in layout:
        count = int(np.prod(shape))
        out[name] = np.frombuffer(body, dtype, count=count, offset=offset).reshape(shape)
        offset += count * dtype.itemsize
    return out


class RawCodec(Codec):
    """What the raw framings share: the outputs' layout and length, the check and the decode."""

    _layout: list | None = None
    _expected_bytes = -1

    @property
    def layout(self) -> list[tuple[str, tuple, np.dtype]]:
        if self._layout is None:
            self._layout = raw_layout(self.output_shapes, self.output_dtypes)
            self._expected_bytes = raw_size(self._layout)
        return self._layout

    def check_raw(self, body: bytes) -> int:
        if len(body) != self._expected_bytes:
            return BAD_RESPONSE
        if not self.sampled_out(body):
            split_raw(body, self._layout)
        return OK

    def raw_request(self) -> bytes:
        """The inputs' bytes; the outputs' layout is fixed here, so missing dtypes fail at encoding, once."""
        self.layout  # noqa: B018
        return raw_inputs(self.inputs)

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        return split_raw(body, self.layout)


class TorchServeRaw(RawCodec):
    name = "torchserve_raw"

    def request_bytes(self) -> bytes:
        return build_request("POST", self.host, self.port, f"/predictions/{self.model_name}", self.raw_request(),
                             content_type=RAW_CONTENT_TYPE)

    def check(self, status: int, body: bytes) -> int:
        return self.check_raw(body) if status == 200 else HTTP_STATUS
