"""The codec interface: encode a request once, check every response."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

# Error kinds recorded per request (0 = ok). Kept small and fixed so recordings merge across processes.
OK = 0
# not_sent: an open-loop request that was due but found no connection before the load point's time bound.
ERROR_KINDS = {1: "http_status", 2: "bad_response", 3: "timeout", 4: "connection", 5: "not_sent"}
HTTP_STATUS, BAD_RESPONSE, TIMEOUT, CONNECTION, NOT_SENT = 1, 2, 3, 4, 5


FULL_CHECK_MAX_BYTES = 65536  # larger responses have their shape parsed on every FULL_CHECK_EVERY-th one only
FULL_CHECK_EVERY = 64


class Codec(ABC):
    name: ClassVar[str]
    transport: ClassVar[str] = "http"  # the engine that carries it: "http" (http_engine.py) or "grpc" (grpc_engine.py)
    grpc_method: ClassVar[str] = ""  # gRPC codecs: the unary method their message is sent on
    _large_seen = 0

    def __init__(self, host: str, port: int, model_name: str, inputs: dict[str, np.ndarray],
                 output_shapes: dict[str, tuple[int, ...]], output_dtypes: dict[str, str] | None = None) -> None:
        self.host, self.port, self.model_name = host, port, model_name
        self.inputs = inputs
        self.output_shapes = output_shapes  # expected output shapes, batch axis filled in
        self.output_dtypes = output_dtypes or {}  # numpy dtype names: what a wire without a header needs to read

    def sampled_out(self, body: bytes) -> bool:
        """True when this (large) response skips the full parse: decoding every large JSON body would make the
        generator, not the server, set the pace. Its status and framing are still checked by the caller."""
        if len(body) <= FULL_CHECK_MAX_BYTES:
            return False
        self._large_seen += 1
        return self._large_seen % FULL_CHECK_EVERY != 0

    @abstractmethod
    def request_bytes(self) -> bytes:
        """The whole request, encoded once per (model, batch size) and sent as is."""

    def payload_size(self, request: bytes) -> int:
        """The bytes of `request` (from `request_bytes`) that carry the tensors: an HTTP request's body, a gRPC
        message whole (HTTP headers and HTTP/2 framing are not counted)."""
        if self.transport == "grpc":
            return len(request)
        head_end = request.find(b"\r\n\r\n")
        return len(request) - head_end - 4 if head_end >= 0 else len(request)

    @abstractmethod
    def check(self, status: int, body: bytes) -> int:
        """OK (0) or the error kind of a response: an error is never counted as a fast success."""

    @abstractmethod
    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        """The outputs of a response (used by parity checks against a live server)."""


class JsonCodec(Codec):
    """A JSON-over-HTTP codec: a 200 status, a JSON body, then the protocol's own check of the outputs."""

    def check(self, status: int, body: bytes) -> int:
        if status != 200:
            return HTTP_STATUS
        if self.sampled_out(body):
            return OK if self.looks_whole(body) else BAD_RESPONSE
        try:
            return OK if self.outputs_match(body) else BAD_RESPONSE
        except (ValueError, KeyError, TypeError, AttributeError):  # not the JSON the protocol promises
            return BAD_RESPONSE

    def looks_whole(self, body: bytes) -> bool:
        """The cheap check of a large response that skips the full parse."""
        return body[:1] in (b"{", b"[")

    @abstractmethod
    def outputs_match(self, body: bytes) -> bool:
        """Parse the body; True when every expected output is there with its expected shape."""
