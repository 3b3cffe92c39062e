"""Entry point of the `custom` runtime: a hand-written FastAPI service over ONNX Runtime.

It speaks the KServe v2 REST inference protocol (the same client drives Triton, KServe and this), and is
deliberately what a team would write itself: one process, one model, JSON in and out, and the KServe v2 binary
tensor data extension for teams that want the tensors as bytes (a JSON header whose length the
`Inference-Header-Content-Length` header gives, then each input's raw little-endian bytes; outputs come back the
same way when the request asks for them with `binary_data_output` or an output's `binary_data`). The engine follows
the model file: `*.onnx` ONNX Runtime, `*.pt` TorchScript (torch), `*.savedmodel/` TensorFlow SavedModel.

Where each request's time goes is measured here and served at `GET /metrics` (Prometheus text): per successful
inference, from its whole body received, decoding the request into arrays, the engine, encoding the response,
and the handler's whole time from the body to the response object (timed on its own: the parts leave out only
the response object's making; the body's arrival and the socket writes are outside it), summed since the start.
Every worker process adds its own into a small file of its own in the timing folder (`--timing-dir`, a private
temporary one by default), and `/metrics` sums the files, so the figures hold for several workers too.

    python docker/custom/app.py --host 127.0.0.1 --port 8000 --model-dir DIR --model-name NAME
"""

# No `from __future__ import annotations`: FastAPI resolves handler annotations at runtime.

import argparse
import atexit
import json
import mmap
import os
import shutil
import socket
import struct
import sys
import tempfile
from pathlib import Path
from time import perf_counter_ns

import numpy as np
from uvicorn.protocols.http.auto import AutoHTTPProtocol

SERVER_NAME = "serving-eval-custom"
SERVER_VERSION = "0.1.0"
LOGGED_FAILURES = 20
CONFIG_ENV = "SERVING_EVAL_CUSTOM_APP"  # the model of the workers, when uvicorn runs several
V2_DTYPES = {"FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "INT64": np.int64, "INT32": np.int32,
             "INT8": np.int8, "UINT8": np.uint8, "BOOL": np.bool_}
NP_TO_V2 = {np.dtype(v).name: k for k, v in V2_DTYPES.items()}
HEADER_LENGTH = "inference-header-content-length"
TIMING_FIELDS = ("requests", "decode_ns", "infer_ns", "encode_ns", "total_ns")
TIMING_LAYOUT = struct.Struct("<5q")
TIMING_PREFIX = "timing-"


class Timing:
    """This process's sums of where its requests' time went, kept in its own file of the timing folder."""

    def __init__(self, directory: Path) -> None:
        self.values = [0] * len(TIMING_FIELDS)
        path = directory / f"{TIMING_PREFIX}{os.getpid()}.bin"
        with open(path, "wb") as f:
            f.write(bytes(TIMING_LAYOUT.size))
        self.file = open(path, "r+b")  # kept open for the process's life
        self.map = mmap.mmap(self.file.fileno(), TIMING_LAYOUT.size)

    def add(self, decode_ns: int, infer_ns: int, encode_ns: int, total_ns: int) -> None:
        v = self.values
        v[0] += 1
        v[1] += decode_ns
        v[2] += infer_ns
        v[3] += encode_ns
        v[4] += total_ns
        TIMING_LAYOUT.pack_into(self.map, 0, *v)


def read_timing(directory: Path) -> list[int]:
    """The sums of every worker's timing file (a worker that has gone keeps its requests in them)."""
    totals = [0] * len(TIMING_FIELDS)
    for path in directory.glob(f"{TIMING_PREFIX}*.bin"):
        data = path.read_bytes()
        if len(data) == TIMING_LAYOUT.size:
            totals = [a + b for a, b in zip(totals, TIMING_LAYOUT.unpack(data), strict=True)]
    return totals


def timing_text(directory: Path) -> str:
    """The timing sums as Prometheus text: requests, and seconds per part."""
    requests, decode_ns, infer_ns, encode_ns, total_ns = read_timing(directory)
    lines = ["# HELP serving_eval_requests_total successful inference requests timed",
             "# TYPE serving_eval_requests_total counter", f"serving_eval_requests_total {requests}",
             "# HELP serving_eval_request_seconds_total time in the handler per part, summed over those requests",
             "# TYPE serving_eval_request_seconds_total counter"]
    for part, ns in (("decode", decode_ns), ("infer", infer_ns), ("encode", encode_ns), ("total", total_ns)):
        lines.append(f'serving_eval_request_seconds_total{{part="{part}"}} {ns / 1e9:.9f}')
    return "\n".join(lines) + "\n"


def decode_request(body: bytes, header_length: str | None) -> tuple[dict[str, np.ndarray], dict]:
    """The inputs of a KServe v2 request (JSON, or a JSON header and binary tensors) and its JSON part."""
    if header_length is None:
        request = json.loads(body)
        blob, offset = b"", 0
    else:
        length = int(header_length)
        request = json.loads(body[:length])
        blob, offset = body, length
    inputs = {}
    for item in request["inputs"]:
        dtype = np.dtype(V2_DTYPES[item["datatype"]])
        shape = [int(d) for d in item["shape"]]
        size = (item.get("parameters") or {}).get("binary_data_size")
        if size is None:
            inputs[item["name"]] = np.asarray(item["data"], dtype=dtype).reshape(shape)
            continue
        count = int(size) // dtype.itemsize
        if count * dtype.itemsize != int(size) or offset + int(size) > len(blob):
            raise ValueError(f"input {item['name']}: binary_data_size {size} does not fit the body")
        inputs[item["name"]] = np.frombuffer(blob, dtype.newbyteorder("<"), count=count, offset=offset).reshape(shape)
        offset += int(size)
    if blob and offset != len(blob):
        raise ValueError(f"the body holds {len(blob) - offset} bytes after its inputs' binary data")
    return inputs, request


def binary_outputs(request: dict) -> set[str] | bool:
    """Which outputs the request asks for as binary data: True for all, else the names (maybe none)."""
    if (request.get("parameters") or {}).get("binary_data_output"):
        return True
    return {o["name"] for o in request.get("outputs") or [] if (o.get("parameters") or {}).get("binary_data")}


def encode_response(model_name: str, outputs: dict[str, np.ndarray], binary: set[str] | bool) -> tuple[bytes, dict]:
    """(body, extra headers) of the response: JSON, or a JSON header and the binary outputs after it."""
    described, blobs = [], []
    for name, value in outputs.items():
        entry = {"name": name, "shape": list(value.shape), "datatype": NP_TO_V2.get(value.dtype.name, "FP32")}
        if binary is True or name in binary:
            raw = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            entry["data"] = value.ravel().tolist()
        described.append(entry)
    header = json.dumps({"model_name": model_name, "outputs": described}).encode()
    if not blobs:
        return header, {}
    return header + b"".join(blobs), {"Inference-Header-Content-Length": str(len(header))}


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


def create_app(engine: OnnxEngine, model_name: str, timing_dir: Path):
    from fastapi import FastAPI, Request, Response

    app = FastAPI(title=SERVER_NAME, version=SERVER_VERSION)
    failures = {"count": 0}
    timing = Timing(timing_dir)

    def error(status: int, message: str) -> Response:
        return Response(json.dumps({"error": message}), status_code=status, media_type="application/json")

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    @app.get(f"/v2/models/{model_name}/ready")
    def ready() -> dict:
        return {"ready": True}

    @app.get("/v2")
    def server_metadata() -> dict:
        return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": ["binary_tensor_data"],
                "engine": engine.version}

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(timing_text(timing_dir), media_type="text/plain; version=0.0.4")

    @app.get(f"/v2/models/{model_name}")
    def model_metadata() -> dict:
        return {"name": model_name, "platform": engine.version, "inputs": [
            {"name": i.name, "datatype": i.type, "shape": i.shape} for i in engine.inputs.values()],
            "outputs": [{"name": name} for name in engine.output_names]}  # KServe v2 model metadata has both

    @app.post("/v2/models/{name}/infer")
    async def infer(name: str, request: Request) -> Response:
        if name != model_name:
            return error(404, f"unknown model {name!r}; this server serves {model_name!r}")
        body = await request.body()
        started = perf_counter_ns()  # the whole body is in: from here on the time is this request's own work
        try:
            inputs, parsed = decode_request(body, request.headers.get(HEADER_LENGTH))
        except (KeyError, ValueError, TypeError) as exc:
            return error(400, f"bad inference request: {type(exc).__name__}: {exc}")
        decoded = perf_counter_ns()
        try:
            outputs = engine(inputs)
        except Exception as exc:  # noqa: BLE001 - the engine's message is what the client needs
            failures["count"] += 1
            if failures["count"] <= LOGGED_FAILURES:  # the first few reach the log; every one reaches its client
                print(f"{SERVER_NAME}: inference failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return error(500, f"inference failed: {exc}")
        inferred = perf_counter_ns()
        payload, headers = encode_response(model_name, outputs, binary_outputs(parsed))
        encoded = perf_counter_ns()
        response = Response(payload, headers=headers,
                            media_type="application/octet-stream" if headers else "application/json")
        timing.add(decoded - started, inferred - decoded, encoded - inferred, perf_counter_ns() - started)
        return response

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
    parser.add_argument("--timing-dir", type=Path, default=None,
                        help="where the workers keep their timing sums (default: a private temporary folder)")
    args = parser.parse_args(argv)
    timing_dir = args.timing_dir
    if timing_dir is None:
        timing_dir = Path(tempfile.mkdtemp(prefix="serving-eval-custom-timing-"))
        atexit.register(shutil.rmtree, timing_dir, True)
    timing_dir.mkdir(parents=True, exist_ok=True)

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
                                             "model_name": args.model_name, "timing_dir": str(timing_dir)})
        uvicorn.run(f"{Path(__file__).stem}:app_from_env", factory=True, workers=args.workers, **serving)
        return 0
    engine = load_engine(args.model_dir, args.threads, *split_names(args.inputs, args.outputs))
    print(f"{SERVER_NAME}: {engine.version} ready; serving on {args.host}:{args.port}", flush=True)
    uvicorn.run(create_app(engine, args.model_name, timing_dir), **serving)
    return 0


def split_names(inputs: str, outputs: str) -> tuple[list[str], list[str]]:
    return [n for n in inputs.split(",") if n], [n for n in outputs.split(",") if n]


def app_from_env():
    """The app of one uvicorn worker (several workers): the model named in $SERVING_EVAL_CUSTOM_APP."""
    config = json.loads(os.environ[CONFIG_ENV])
    engine = load_engine(Path(config["model_dir"]), config["threads"], *split_names(config["inputs"],
                                                                                    config["outputs"]))
    print(f"{SERVER_NAME}: worker {os.getpid()}: {engine.version} ready", flush=True)
    return create_app(engine, config["model_name"], Path(config["timing_dir"]))


if __name__ == "__main__":
    sys.exit(main())
