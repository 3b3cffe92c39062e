"""KServe v2 REST inference protocol (JSON tensors): Triton, KServe and the custom service speak it."""

from __future__ import annotations

import json

import numpy as np

from tasks.loadgen.http import build_request
from tasks.loadgen.protocols.base import JsonCodec

NP_TO_V2 = {"float32": "FP32", "float16": "FP16", "int64": "INT64", "int32": "INT32"}


class KServeV2Rest(JsonCodec):
    name = "kserve_v2_rest"

    def body(self) -> bytes:
        return json.dumps({"inputs": [
            {"name": n, "shape": list(a.shape), "datatype": NP_TO_V2[a.dtype.name], "data": a.ravel().tolist()}
            for n, a in self.inputs.items()]}).encode()

    def request_bytes(self) -> bytes:
        return build_request("POST", self.host, self.port, f"/v2/models/{self.model_name}/infer", self.body())

    def outputs_match(self, body: bytes) -> bool:
        for out in json.loads(body)["outputs"]:
            expected = self.output_shapes.get(out["name"])
            if expected is not None and tuple(out["shape"]) != expected:
                return False
        return True

    def decode(self, body: bytes) -> dict[str, np.ndarray]:
        return {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in json.loads(body)["outputs"]}
