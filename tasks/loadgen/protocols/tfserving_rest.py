"""TensorFlow Serving REST predict API, columnar ("inputs") format.

Request:  POST /v1/models/<name>:predict  {"inputs": {"<input>": <nested list>, ...}}
Response: {"outputs": {"<output>": <nested list>, ...}}, or {"outputs": <nested list>} when the signature
has a single output (TF Serving drops the name then); {"error": "..."} with a 4xx/5xx status on failure.
"""

from __future__ import annotations

import json

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import JsonCodec


def nested_shape(value: object) -> tuple[int, ...]:
    """Shape of a nested JSON list, read along its first elements (cheap; ragged lists are not detected)."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


class TFServingRest(JsonCodec):
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

    def looks_whole(self, body: bytes) -> bool:
        return body.startswith(b"{") and b'"error"' not in body[:64]

    def outputs_match(self, body: bytes) -> bool:
        data = json.loads(body)
        if "error" in data:
            return False
        outputs = self.named_outputs(data["outputs"])
        return all(name in outputs and nested_shape(outputs[name]) == tuple(expected)
                   for name, expected in self.output_shapes.items())

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        data = json.loads(body)
        if "error" in data:
            raise ValueError(f"TF Serving error response: {data['error']}")
        return {n: np.asarray(v) for n, v in self.named_outputs(data["outputs"]).items()}
