"""Entry point of the `kserve` runtime: one model behind a KServe 0.21 ModelServer (REST v1/v2 and gRPC v2).

v2 REST takes JSON tensors or the binary tensor data extension (KServe's own `InferRequest.from_bytes`); outputs
go back as raw bytes when the request asks for them (or over gRPC with raw inputs), else as JSON.

    python docker/kserve/server.py --model_dir DIR --model_name NAME --http_port P --grpc_port G \
        [--bind_host 127.0.0.1] [--threads 1] [--enable_latency_logging false]

DIR holds `model.json` (model file, format, tensor names/dtypes/shapes) and the model file (ONNX or
TorchScript). KServe hard-codes its bind addresses (REST "0.0.0.0", gRPC "[::]") and has no host option, so
two small subclasses bind both to --bind_host instead; ModelServer.start() looks the classes up by name in
kserve.model_server. That covers workers=1, the only mode used here. KServe's own argparse also reads
sys.argv (parse_known_args) at import: the flags above that KServe knows mean the same to both.
"""

import argparse
import json
import logging
import os

import kserve
import kserve.model_server as ks_model_server
import numpy as np
from kserve import InferOutput, InferRequest, InferResponse
from kserve.protocol.grpc import server as ks_grpc
from kserve.protocol.rest import server as ks_rest

NP_TO_V2 = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "int64": "INT64", "int32": "INT32"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--model_name", required=True)
    parser.add_argument("--http_port", type=int, required=True)
    parser.add_argument("--grpc_port", type=int, required=True)
    parser.add_argument("--bind_host", default="127.0.0.1")
    parser.add_argument("--threads", type=int, default=1)
    args, _ = parser.parse_known_args()
    return args


def bind_to(host):
    """Make ModelServer bind REST and gRPC to `host` (KServe binds every interface)."""
    grpc_host = f"[{host}]" if ":" in host else host

    class BoundRESTServer(ks_rest.RESTServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.config.host = host  # uvicorn reads its Config when it starts serving

    class BoundGRPCServer(ks_grpc.GRPCServer):
        async def start(self, max_workers):
            real_server = ks_grpc.aio.server

            def server(*args, **kwargs):
                grpc_server = real_server(*args, **kwargs)
                add_port = grpc_server.add_insecure_port
                grpc_server.add_insecure_port = lambda address: add_port(address.replace("[::]", grpc_host))
                return grpc_server

            ks_grpc.aio.server = server
            try:
                await super().start(max_workers)
            finally:
                ks_grpc.aio.server = real_server

    ks_model_server.RESTServer = BoundRESTServer
    ks_model_server.GRPCServer = BoundGRPCServer


V2_DATATYPES = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "int64": "INT64", "int32": "INT32",
                "int8": "INT8", "uint8": "UINT8", "bool": "BOOL"}


def _tensor_metadata(tensor):
    return {"name": tensor["name"], "datatype": V2_DATATYPES.get(tensor["dtype"], tensor["dtype"].upper()),
            "shape": tensor["shape"]}


class ServedModel(kserve.Model):
    def __init__(self, name, model_dir, threads):
        super().__init__(name)
        with open(os.path.join(model_dir, "model.json")) as f:
            self.config = json.load(f)
        self.path = os.path.join(model_dir, self.config["model_file"])
        self.threads = threads
        self.load()

    def load(self):
        if self.config["format"] == "onnx":
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            self.session = ort.InferenceSession(self.path, options, providers=["CPUExecutionProvider"])
        else:
            import torch

            torch.set_num_threads(self.threads)
            self.module = torch.jit.load(self.path, map_location="cpu").eval()
        self.ready = True
        return self.ready

    def get_input_types(self):
        """The KServe v2 model metadata's inputs (GET /v2/models/<model>): names, datatypes, shapes."""
        return [_tensor_metadata(t) for t in self.config["inputs"]]

    def get_output_types(self):
        return [_tensor_metadata(t) for t in self.config["outputs"]]

    def run(self, arrays):
        names = [o["name"] for o in self.config["outputs"]]
        if self.config["format"] == "onnx":
            return dict(zip(names, self.session.run(names, arrays), strict=True))
        import torch

        with torch.inference_mode():
            result = self.module(*[torch.from_numpy(arrays[t["name"]]) for t in self.config["inputs"]])
        outputs = result if isinstance(result, (tuple, list)) else [result]
        return {name: o.numpy() for name, o in zip(names, outputs, strict=True)}

    def predict(self, payload, headers=None, response_headers=None):
        specs = self.config["inputs"]
        if isinstance(payload, InferRequest):  # v2 REST (JSON or binary tensors) and v2 gRPC
            given = {i.name: i.as_numpy() for i in payload.inputs}
            arrays = {t["name"]: np.ascontiguousarray(given[t["name"]], dtype=t["dtype"]) for t in specs}
            # the outputs as raw bytes (set_data_from_numpy's default); KServe's own encoders then write them in the
            # request's wire: JSON lists, the binary tensor data extension when asked for, raw_output_contents over
            # gRPC (an ndarray left in `data` breaks 0.21's to_grpc)
            infer_outputs = []
            for name, y in self.run(arrays).items():
                out = InferOutput(name=name, shape=list(y.shape), datatype=NP_TO_V2[y.dtype.name])
                out.set_data_from_numpy(y)
                infer_outputs.append(out)
            return InferResponse(response_id=payload.id or "", model_name=self.name, infer_outputs=infer_outputs,
                                 use_binary_outputs=payload.use_binary_outputs,
                                 requested_outputs=payload.request_outputs)
        # v1 REST: {"instances": [...]} (one input) -> {"predictions": [...]} (one output)
        if len(specs) != 1:
            raise ValueError("the v1 protocol serves single-input models only; use v2")
        outputs = self.run({specs[0]["name"]: np.asarray(payload["instances"], dtype=specs[0]["dtype"])})
        return {"predictions": next(iter(outputs.values())).tolist()}


def main():
    args = parse_args()
    bind_to(args.bind_host)
    model = ServedModel(args.model_name, args.model_dir, args.threads)
    server = kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1)
    # No access-log line per request (KServe configured uvicorn's logging in the constructor; uvicorn does not
    # reconfigure it): start-up and errors still reach the log. The same rule holds for every stack.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    server.start([model])


if __name__ == "__main__":
    main()
