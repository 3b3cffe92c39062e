"""Plain HTTP GET of a static path, status checked only: the null system under test (nginx's static file).

It measures the generator's own capacity and overhead, not a model server; `model_name` is the path
(without the leading slash) so it fits the codec interface unchanged.
"""

from __future__ import annotations

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import HTTP_STATUS, OK, Codec


class HttpGet(Codec):
    name = "http_get"

    def request_bytes(self) -> bytes:
        return build_request("GET", self.host, self.port, "/" + self.model_name.lstrip("/"))

    def check(self, status: int, body: bytes) -> int:
        return OK if status == 200 else HTTP_STATUS

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        return {"body": np.frombuffer(body, dtype=np.uint8)}
