"""Triton python-backend model: ONNX Runtime or TorchScript on the CPU, one engine call per batch of requests.

Copied as `<repository>/<model>/1/model.py` by tasks/serve/servers/triton.py for local (process) runs, where the
tritonserver from the nvidia-pytriton wheel has no native onnxruntime/pytorch backend. config.pbtxt parameters:
`engine` (onnxruntime | torchscript), `model_filename` (next to this file), `num_threads` (intra-op threads).

With dynamic batching Triton hands `execute` several requests at once: their inputs are concatenated along the
batch axis, the engine runs once, and the outputs are split back per request. A request whose inputs cannot be
read fails alone; an engine failure fails every request of that batch.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.input_names = [t["name"] for t in config["input"]]
        self.output_names = [t["name"] for t in config["output"]]
        self.output_dtypes = {t["name"]: pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]}
        path = os.path.join(args["model_repository"], args["model_version"], params["model_filename"])
        threads = int(params.get("num_threads", "1"))
        engine = params["engine"]
        if engine == "onnxruntime":
            self._load_onnx(path, threads)
        elif engine == "torchscript":
            self._load_torchscript(path, threads)
        else:
            raise ValueError(f"parameter engine={engine!r}: must be one of ['onnxruntime', 'torchscript']")

    def _load_onnx(self, path, threads):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        model_inputs = [i.name for i in session.get_inputs()]
        model_outputs = [o.name for o in session.get_outputs()]
        # The config names follow the spec; a model file with other names is fed by position.
        feed_names = self.input_names if set(self.input_names) == set(model_inputs) else model_inputs
        fetch_names = (self.output_names if set(self.output_names) <= set(model_outputs)
                       else model_outputs[:len(self.output_names)])

        def run(batch):
            return session.run(fetch_names, dict(zip(feed_names, batch, strict=True)))

        self._run = run

    def _load_torchscript(self, path, threads):
        import torch

        torch.set_num_threads(threads)
        module = torch.jit.load(path, map_location="cpu").eval()

        def run(batch):
            with torch.inference_mode():
                out = module(*[torch.from_numpy(b) for b in batch])
            outs = out if isinstance(out, (tuple, list)) else (out,)
            return [o.numpy() for o in outs]

        self._run = run

    def execute(self, requests):
        responses = [None] * len(requests)
        feeds, sizes, accepted = [], [], []
        for i, request in enumerate(requests):
            try:
                arrays = [pb_utils.get_input_tensor_by_name(request, n).as_numpy() for n in self.input_names]
            except Exception as exc:  # a missing input fails this request only
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"bad request: {exc}"))
                continue
            feeds.append(arrays)
            sizes.append(arrays[0].shape[0])
            accepted.append(i)
        if not accepted:
            return responses
        batch = [np.concatenate([f[k] for f in feeds]) if len(feeds) > 1 else feeds[0][k]
                 for k in range(len(self.input_names))]
        try:
            outputs = self._run(batch)
        except Exception as exc:
            for i in accepted:
                responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"inference failed: {exc}"))
            return responses
        offset = 0
        for i, size in zip(accepted, sizes, strict=True):
            responses[i] = pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor(name, np.ascontiguousarray(out[offset:offset + size], dtype=self.output_dtypes[name]))
                for name, out in zip(self.output_names, outputs, strict=True)])
            offset += size
        return responses

    def finalize(self):
        self._run = None
