"""TorchServe REST inference (`POST /predictions/<model>`) with the JSON body our handler reads.

Request `{"inputs": [[...], ...]}` (one input; several inputs go as `{"inputs": {name: [[...]]}}`), response
`{"outputs": [[...], ...]}` (several outputs: `{"outputs": {name: [[...]]}}`). The handler that reads this is
`docker/torchserve/handler.py`; BentoML's generated service takes the same body (`bentoml_json`).
"""

from __future__ import annotations

import json

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import JsonCodec


def rows_body(inputs: dict[str, np.ndarray]) -> bytes:
    """`{"inputs": nested list}` for one input, `{"inputs": {name: nested list}}` for several."""
    if len(inputs) == 1:
        return json.dumps({"inputs": next(iter(inputs.values())).tolist()}).encode()
    return json.dumps({"inputs": {name: array.tolist() for name, array in inputs.items()}}).encode()


def rows_outputs(body: bytes, output_names: list[str]) -> dict[str, np.ndarray]:
    """The `outputs` of a response as arrays named after the spec's outputs (a bare list is the one output: what
    a batchable BentoML API returns)."""
    data = json.loads(body)
    outputs = data if isinstance(data, list) else data["outputs"]
    if isinstance(outputs, dict):
        return {name: np.asarray(value, dtype=np.float64) for name, value in outputs.items()}
    if len(output_names) != 1:
        raise ValueError(f"outputs: a single list was returned, but {len(output_names)} outputs were expected")
    return {output_names[0]: np.asarray(outputs, dtype=np.float64)}


class TorchServeRest(JsonCodec):
    name = "torchserve_rest"

    def path(self) -> str:
        return f"/predictions/{self.model_name}"

    def request_bytes(self) -> bytes:
        return build_request("POST", self.host, self.port, self.path(), rows_body(self.inputs))

    def outputs_match(self, body: bytes) -> bool:
        outputs = rows_outputs(body, list(self.output_shapes))
        return all(name in outputs and outputs[name].shape == tuple(expected)
                   for name, expected in self.output_shapes.items())

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        return rows_outputs(body, list(self.output_shapes))
