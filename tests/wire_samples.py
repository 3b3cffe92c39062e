"""Sample tensors and a codec factory shared by the wire tests (tests/unit/loadgen/protocols/): two inputs of
different dtypes and two outputs, so each codec's order, shapes and dtypes are exercised."""

from __future__ import annotations

import numpy as np

from tasks.loadgen.protocols import get_codec

INPUTS = {"input": np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32),
          "ids": np.arange(8, dtype=np.int64).reshape(4, 2)}
SHAPES = {"output": (4, 10), "pooled": (4, 3)}
DTYPES = {"output": "float32", "pooled": "float32"}
OUTPUTS = {"output": np.arange(40, dtype=np.float32).reshape(4, 10), "pooled": np.ones((4, 3), np.float32)}


def codec(name: str, shapes: dict | None = None):
    return get_codec(name)("127.0.0.1", 1, "m", INPUTS, shapes or SHAPES, DTYPES)


def http_body(raw: bytes) -> tuple[dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    return headers, body
