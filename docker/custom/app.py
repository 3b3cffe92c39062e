"""Entry point of the `custom` runtime: a hand-written FastAPI service over ONNX Runtime.

It speaks the KServe v2 REST inference protocol (the same client drives Triton, KServe and this), and is
deliberately what a team would write itself: one process, one model, JSON in and out. The engine follows the
model file: `*.onnx` ONNX Runtime, `*.pt` TorchScript (torch), `*.savedmodel/` TensorFlow SavedModel.

    python docker/custom/app.py --host 127.0.0.1 --port 8000 --model-dir DIR --model-name NAME
"""

# No `from __future__ import annotations`: FastAPI resolves handler annotations at runtime.

import argparse
import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
from uvicorn.protocols.http.auto import AutoHTTPProtocol

SERVER_NAME = "serving-eval-custom"
SERVER_VERSION = "0.1.0"
LOGGED_FAILURES = 20
CONFIG_ENV = "SERVING_EVAL_CUSTOM_APP"  # the model of the workers, when uvicorn runs several
V2_DTYPES = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32}
NP_TO_V2 = {np.dtype(v).name: k for k, v in V2_DTYPES.items()}


class NoDelayHTTPProtocol(AutoHTTPProtocol):
    """uvicorn's HTTP protocol with TCP_NODELAY set on every connection.

    asyncio sets TCP_NODELAY on accepted sockets only when the listener says IPPROTO_TCP, and uvicorn's
    multi-worker path binds its listener with protocol 0 (uvicorn issue #3149): with `--workers 2` every
    keep-alive response then waits ~40 ms for the client's delayed ACK (Nagle), and the MLP served 90 req/s
    instead of 4,400. Set here, one worker or several serve alike.
    """

    def connection_made(self, transport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


class OnnxEngine:
    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.version = f"onnxruntime {ort.__version__}"

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.output_names, self.session.run(self.output_names, inputs), strict=True))


class TorchScriptEngine:
    def __init__(self, path: Path, threads: int, input_names: list[str], output_names: list[str]) -> None:
        import torch

        torch.set_num_threads(threads)
        self.torch = torch
        self.module = torch.jit.load(str(path), map_location="cpu").eval()
        self.input_names, self.output_names = input_names, output_names
        self.inputs = {n: type("Input", (), {"name": n, "type": "tensor", "shape": []})() for n in input_names}
        self.version = f"torch {torch.__version__}"

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self.torch.inference_mode():
            out = self.module(*(self.torch.from_numpy(inputs[n]) for n in self.input_names))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return {n: o.numpy() for n, o in zip(self.output_names, outs, strict=False)}


class SavedModelEngine:
    def __init__(self, path: Path, threads: int, output_names: list[str]) -> None:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        self.tf = tf
        self.fn = tf.saved_model.load(str(path)).signatures["serving_default"]
        names = sorted(self.fn.structured_input_signature[1])
        self.inputs = {n: type("Input", (), {"name": n, "type": "tensor", "shape": []})() for n in names}
        self.output_names = output_names
        self.version = f"tensorflow {tf.__version__}"

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = self.fn(**{n: self.tf.constant(v) for n, v in inputs.items()})
        names = self.output_names or sorted(out)
        return {n: out[n].numpy() for n in names}


def load_engine(model_dir: Path, threads: int, input_names: list[str], output_names: list[str]):
    """The engine for the one model file in `model_dir`, chosen by its kind."""
    if not model_dir.is_dir():
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    for path in sorted(model_dir.iterdir()):
        if path.suffix == ".onnx":
            return OnnxEngine(path, threads)
        if path.suffix == ".pt":
            return TorchScriptEngine(path, threads, input_names, output_names)
        if path.suffix == ".savedmodel" or (path / "saved_model.pb").is_file():
            return SavedModelEngine(path, threads, output_names)
    raise FileNotFoundError(f"no .onnx model, .pt TorchScript or SavedModel directory in {model_dir}")


def create_app(engine: OnnxEngine, model_name: str):
    from fastapi import FastAPI, Request, Response

    app = FastAPI(title=SERVER_NAME, version=SERVER_VERSION)
    failures = {"count": 0}

    def error(status: int, message: str) -> Response:
        return Response(json.dumps({"error": message}), status_code=status, media_type="application/json")

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    @app.get(f"/v2/models/{model_name}/ready")
    def ready() -> dict:
        return {"ready": True}

    @app.get("/v2")
    def server_metadata() -> dict:
        return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": [], "engine": engine.version}

    @app.get(f"/v2/models/{model_name}")
    def model_metadata() -> dict:
        return {"name": model_name, "platform": engine.version, "inputs": [
            {"name": i.name, "datatype": i.type, "shape": i.shape} for i in engine.inputs.values()]}

    @app.post("/v2/models/{name}/infer")
    async def infer(name: str, request: Request) -> Response:
        if name != model_name:
            return error(404, f"unknown model {name!r}; this server serves {model_name!r}")
        try:
            body = json.loads(await request.body())
            inputs = {}
            for item in body["inputs"]:
                dtype = V2_DTYPES[item["datatype"]]
                inputs[item["name"]] = np.asarray(item["data"], dtype=dtype).reshape(item["shape"])
        except (KeyError, ValueError, TypeError) as exc:
            return error(400, f"bad inference request: {type(exc).__name__}: {exc}")
        try:
            outputs = engine(inputs)
        except Exception as exc:  # noqa: BLE001 - the engine's message is what the client needs
            failures["count"] += 1
            if failures["count"] <= LOGGED_FAILURES:  # the first few reach the log; every one reaches its client
                print(f"{SERVER_NAME}: inference failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return error(500, f"inference failed: {exc}")
        payload = {"model_name": model_name, "outputs": [
            {"name": k, "shape": list(v.shape), "datatype": NP_TO_V2.get(v.dtype.name, "FP32"),
             "data": v.ravel().tolist()} for k, v in outputs.items()]}
        return Response(json.dumps(payload), media_type="application/json")

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of each worker's engine")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes, each with the model")
    parser.add_argument("--inputs", default="", help="input names in the model's positional order (TorchScript)")
    parser.add_argument("--outputs", default="", help="output names in the model's order")
    args = parser.parse_args(argv)

    import uvicorn

    print(f"{SERVER_NAME} {SERVER_VERSION}: loading model {args.model_name!r} from {args.model_dir} "
          f"({args.workers} worker(s), {args.threads} intra-op thread(s) each)", flush=True)
    # Start-up, shutdown and errors go to the log; no line per request (the access log costs the server CPU
    # while it is being measured, and the same rule holds for every stack).
    serving = {"host": args.host, "port": args.port, "log_level": "info", "access_log": False,
               "http": NoDelayHTTPProtocol}
    if args.workers > 1:  # uvicorn's workers share the listening socket; each imports this module and loads the model
        if str(Path(__file__).parent) not in sys.path:  # run through a wrapper (runpy): the workers import us by name
            sys.path.insert(0, str(Path(__file__).parent))
        serving["http"] = f"{Path(__file__).stem}:NoDelayHTTPProtocol"  # by name: the config goes to the workers
        os.environ[CONFIG_ENV] = json.dumps({"model_dir": str(args.model_dir), "threads": args.threads,
                                             "inputs": args.inputs, "outputs": args.outputs,
                                             "model_name": args.model_name})
        uvicorn.run(f"{Path(__file__).stem}:app_from_env", factory=True, workers=args.workers, **serving)
        return 0
    engine = load_engine(args.model_dir, args.threads, *split_names(args.inputs, args.outputs))
    print(f"{SERVER_NAME}: {engine.version} ready; serving on {args.host}:{args.port}", flush=True)
    uvicorn.run(create_app(engine, args.model_name), **serving)
    return 0


def split_names(inputs: str, outputs: str) -> tuple[list[str], list[str]]:
    return [n for n in inputs.split(",") if n], [n for n in outputs.split(",") if n]


def app_from_env():
    """The app of one uvicorn worker (several workers): the model named in $SERVING_EVAL_CUSTOM_APP."""
    config = json.loads(os.environ[CONFIG_ENV])
    engine = load_engine(Path(config["model_dir"]), config["threads"], *split_names(config["inputs"],
                                                                                    config["outputs"]))
    print(f"{SERVER_NAME}: worker {os.getpid()}: {engine.version} ready", flush=True)
    return create_app(engine, config["model_name"])


if __name__ == "__main__":
    sys.exit(main())
