"""TorchServe handler for a TorchScript model: JSON rows in, JSON rows out (no ts.torch_handler dependency).

Packed into every `.mar` that `tasks/serve/servers/torchserve.py` builds, with `handler_config.json` beside
it (input/output names and dtypes, intra-op threads):

    request   {"inputs": [[...], ...]}                 one input; several: {"inputs": {name: [[...]]}}
    response  {"outputs": [[...], ...]}                one output; several: {"outputs": {name: [[...]]}}

With TorchServe's server-side batching (batchSize > 1 at registration), several requests arrive in one
`data` list: their rows are concatenated along the batch axis, run once and split back per request.
"""

import json
import os

import torch

CONFIG_FILE = "handler_config.json"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64, "int32": torch.int32}


class RowsHandler:
    def __init__(self):
        self.model = None
        self.config = {}
        self.initialized = False

    def initialize(self, context):
        model_dir = context.system_properties["model_dir"]
        with open(os.path.join(model_dir, CONFIG_FILE)) as f:
            self.config = json.load(f)
        torch.set_num_threads(int(self.config.get("threads", 1)))
        torch.set_num_interop_threads(1)
        serialized = context.manifest["model"]["serializedFile"]
        self.model = torch.jit.load(os.path.join(model_dir, serialized), map_location="cpu").eval()
        self.initialized = True

    @staticmethod
    def _body(item):
        body = item.get("body") if isinstance(item, dict) else item
        if body is None and isinstance(item, dict):
            body = item.get("data")
        if isinstance(body, (bytes, bytearray)):
            body = json.loads(body.decode("utf-8"))
        elif isinstance(body, str):
            body = json.loads(body)
        if not isinstance(body, dict) or "inputs" not in body:
            raise ValueError('request body must be a JSON object with "inputs"')
        return body["inputs"]

    def _tensors(self, inputs):
        specs = self.config["inputs"]
        if not isinstance(inputs, dict):
            inputs = {specs[0]["name"]: inputs}
        tensors = []
        for spec in specs:
            x = torch.tensor(inputs[spec["name"]], dtype=DTYPES[spec["dtype"]])
            if x.dim() != len(spec["shape"]) or list(x.shape[1:]) != spec["shape"][1:]:
                raise ValueError(f"input {spec['name']}: shape {list(x.shape)} does not match {spec['shape']}")
            tensors.append(x)
        return tensors

    def handle(self, data, context):
        requests = [self._tensors(self._body(item)) for item in data]
        sizes = [req[0].shape[0] for req in requests]
        batch = [torch.cat([req[i] for req in requests]) for i in range(len(self.config["inputs"]))]
        with torch.inference_mode():
            result = self.model(*batch)
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        names = [o["name"] for o in self.config["outputs"]]
        responses, start = [], 0
        for size in sizes:
            parts = [out[start:start + size].tolist() for out in outputs]
            start += size
            responses.append({"outputs": parts[0] if len(parts) == 1 else dict(zip(names, parts, strict=True))})
        return responses
