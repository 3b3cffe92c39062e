"""TensorFlow Serving REST predict API, columnar ("inputs") format.

Request:  POST /v1/models/<name>:predict  {"inputs": {"<input>": <nested list>, ...}}
Response: {"outputs": {"<output>": <nested list>, ...}}, or {"outputs": <nested list>} when the signature
has a single output (TF Serving drops the name then); {"error": "..."} with a 4xx/5xx status on failure.
"""

from __future__ import annotations

import json

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import BAD_RESPONSE, HTTP_STATUS, OK, Codec


def nested_shape(value: object) -> tuple[int, ...]:
    """Shape of a nested JSON list, read along its first elements (cheap; ragged lists are not detected)."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


class TFServingRest(Codec):
    name = "tfserving_rest"

    def path(self) -> str:
        return f"/v1/models/{self.model_name}:predict"

    def body(self) -> bytes:
        return json.dumps({"inputs": {n: a.tolist() for n, a in self.inputs.items()}}).encode()

    def request_bytes(self) -> bytes:
        return build_request("POST", self.host, self.port, self.path(), self.body())

    def named_outputs(self, outputs: object) -> dict[str, object]:
        """The response's outputs by name; a bare (single-output) value takes the one expected output's name."""
        if isinstance(outputs, dict):
            return outputs
        if len(self.output_shapes) != 1:
            raise ValueError(f"outputs: a single unnamed output, but {len(self.output_shapes)} outputs expected "
                             f"({sorted(self.output_shapes)})")
        return {next(iter(self.output_shapes)): outputs}

    def check(self, status: int, body: bytes) -> int:
        if status != 200:
            return HTTP_STATUS
        if self.sampled_out(body):
            return OK if body.startswith(b"{") and b'"error"' not in body[:64] else BAD_RESPONSE
        try:
            data = json.loads(body)
            if "error" in data:
                return BAD_RESPONSE
            outputs = self.named_outputs(data["outputs"])
            for name, expected in self.output_shapes.items():
                if name not in outputs or nested_shape(outputs[name]) != tuple(expected):
                    return BAD_RESPONSE
        except (ValueError, KeyError, TypeError, AttributeError):
            return BAD_RESPONSE
        return OK

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        data = json.loads(body)
        if "error" in data:
            raise ValueError(f"TF Serving error response: {data['error']}")
        return {n: np.asarray(v) for n, v in self.named_outputs(data["outputs"]).items()}
