"""TorchServe handler for a TorchScript model: JSON rows or raw tensor bytes in, the same kind out (no
ts.torch_handler dependency).

Packed into every `.mar` that `tasks/serve/servers/torchserve.py` builds, with `handler_config.json` beside
it (input/output names, dtypes and shapes, intra-op threads):

    JSON     request  {"inputs": [[...], ...]}          one input; several: {"inputs": {name: [[...]]}}
             response {"outputs": [[...], ...]}         one output; several: {"outputs": {name: [[...]]}}
    raw      request  the inputs' little-endian bytes one after another in the config's order, as the REST body
                      with `Content-Type: application/octet-stream` or as the gRPC input `tensors`; the batch
                      size is the body's length over one sample's bytes
             response the outputs' bytes one after another in the config's order and dtypes

With TorchServe's server-side batching (batchSize > 1 at registration), several requests arrive in one
`data` list: their rows are concatenated along the batch axis, run once and split back per request.

Where the handler's time goes is reported through TorchServe's own metrics (counters in its Prometheus
endpoint): DECODE/INFER/ENCODE_METRIC, milliseconds summed over requests (a batch's time counts once for each
of its requests, as Triton counts it).
"""

import json
import os
import time

import numpy as np
import torch

CONFIG_FILE = "handler_config.json"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64, "int32": torch.int32}
RAW_CONTENT_TYPE = "application/octet-stream"
RAW_INPUT = "tensors"  # the gRPC input map's key of raw tensors (tasks/loadgen/protocols/torchserve_grpc.py)
DECODE_METRIC, INFER_METRIC, ENCODE_METRIC = "ServingEvalDecodeMs", "ServingEvalInferMs", "ServingEvalEncodeMs"


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
        self.sample_bytes = [np.dtype(s["dtype"]).itemsize * int(np.prod(s["shape"][1:]))
                             for s in self.config["inputs"]]
        self.initialized = True

    @staticmethod
    def _raw(item, index, context):
        """The raw tensor bytes of a request, or None when it is a JSON request."""
        if not isinstance(item, dict):
            return None
        if RAW_INPUT in item:
            return item[RAW_INPUT]
        body = item.get("body")
        if isinstance(body, (bytes, bytearray)):
            try:
                declared = (context.get_request_header(index, "body") or {}).get("content-type") or ""
            except (AttributeError, IndexError, KeyError, TypeError):
                declared = ""
            if declared.split(";")[0].strip() == RAW_CONTENT_TYPE:
                return body
        return None

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

    def _raw_tensors(self, raw):
        """The inputs of a raw request (one sample's bytes of every input, times the batch size)."""
        per_sample = sum(self.sample_bytes)
        if not raw or len(raw) % per_sample:
            raise ValueError(f"raw request of {len(raw)} bytes: must be a whole number of samples of {per_sample} "
                             "bytes (the inputs' bytes in the config's order)")
        batch = len(raw) // per_sample
        buffer = raw if isinstance(raw, bytearray) else bytearray(raw)  # writable: torch shares it without a warning
        tensors, offset = [], 0
        for spec, size in zip(self.config["inputs"], self.sample_bytes, strict=True):
            array = np.frombuffer(buffer, np.dtype(spec["dtype"]).newbyteorder("<"), count=batch * size //
                                  np.dtype(spec["dtype"]).itemsize, offset=offset)
            tensors.append(torch.from_numpy(array.reshape(batch, *spec["shape"][1:])))
            offset += batch * size
        return tensors

    def handle(self, data, context):
        started = time.perf_counter()
        raws = [self._raw(item, i, context) for i, item in enumerate(data)]
        requests = [self._raw_tensors(raw) if raw is not None else self._tensors(self._body(item))
                    for raw, item in zip(raws, data, strict=True)]
        sizes = [req[0].shape[0] for req in requests]
        batch = [torch.cat([req[i] for req in requests]) if len(requests) > 1 else requests[0][i]
                 for i in range(len(self.config["inputs"]))]
        decoded = time.perf_counter()
        with torch.inference_mode():
            result = self.model(*batch)
        inferred = time.perf_counter()
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        names = [o["name"] for o in self.config["outputs"]]
        dtypes = [np.dtype(o["dtype"]).newbyteorder("<") for o in self.config["outputs"]]
        responses, start = [], 0
        for index, (size, raw) in enumerate(zip(sizes, raws, strict=True)):
            parts = [out[start:start + size] for out in outputs]
            start += size
            if raw is not None:
                responses.append(b"".join(np.ascontiguousarray(p.numpy(), dtype=d).tobytes()
                                          for p, d in zip(parts, dtypes, strict=True)))
                context.set_response_content_type(index, RAW_CONTENT_TYPE)
            else:
                rows = [p.tolist() for p in parts]
                responses.append({"outputs": rows[0] if len(rows) == 1 else dict(zip(names, rows, strict=True))})
        encoded = time.perf_counter()
        self._report(context, len(data), decoded - started, inferred - decoded, encoded - inferred)
        return responses

    @staticmethod
    def _report(context, requests, decode_s, infer_s, encode_s):
        """Add each part's time (ms, once per request of the batch) to TorchServe's counters."""
        metrics = getattr(context, "metrics", None)
        if metrics is None:
            return
        for name, seconds in ((DECODE_METRIC, decode_s), (INFER_METRIC, infer_s), (ENCODE_METRIC, encode_s)):
            metrics.add_counter(name, seconds * 1000.0 * requests, dimensions=[])
