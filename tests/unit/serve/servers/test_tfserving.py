"""TensorFlow Serving: model layout, run spec, skip reason, readiness, and the REST predict codec.

This machine has neither a `tensorflow_model_server` binary nor a Docker engine, and the orchestrator has
no TensorFlow. So:
- the SavedModel is a fake directory of the right shape (saved_model.pb + variables/) — real SavedModels
  arrive with the converters issue (convert-tf runtime), and the layout code only copies the directory;
- the REST API is a stand-in: a stdlib http.server on 127.0.0.1 that answers like TF Serving's
  `GET /v1/models/<name>` and `POST /v1/models/<name>:predict` (columnar format) for a fixed linear model.
  It checks our encoding, decoding, readiness and version logic and the load generator's HTTP client
  against TF Serving's documented wire format, not TF Serving itself;
- gRPC Predict uses hand-written protobuf messages: they are checked against the protobuf runtime (messages
  declared here from TF Serving's field numbers) and a grpcio stand-in server.
A run in the official container (`launcher=docker`) stays to do on a host with Docker.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from tasks.convert import Artifact
from tasks.core.errors import ConfigError
from tasks.loadgen.http_engine import closed_loop
from tasks.loadgen.protocols import get_codec
from tasks.loadgen.protocols.base import BAD_RESPONSE, HTTP_STATUS, OK
from tasks.loadgen.protocols.tfserving_rest import TFServingRest, nested_shape
from tasks.loadgen.settings import LoadSettings
from tasks.serve.base import Endpoint
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server
from tasks.serve.servers.tfserving import (
    BATCHING_CONFIG,
    IMAGE_CPU,
    IMAGE_GPU,
    MODELS_CONFIG,
    MODELS_HOST_CONFIG,
    NEEDS_DOCKER,
    TFServingServer,
)

IN_FEATURES, OUT_FEATURES = 64, 10
WEIGHTS = np.random.default_rng(7).normal(size=(IN_FEATURES, OUT_FEATURES)).astype(np.float32)
BIAS = np.linspace(-1, 1, OUT_FEATURES, dtype=np.float32)


def fake_savedmodel(root: Path) -> Path:
    """A directory shaped like a SavedModel, with placeholder bytes (no TensorFlow in the orchestrator)."""
    (root / "variables").mkdir(parents=True)
    (root / "saved_model.pb").write_bytes(b"\x08\x01fake-saved-model")
    (root / "variables" / "variables.index").write_bytes(b"fake-index")
    (root / "variables" / "variables.data-00000-of-00001").write_bytes(b"fake-data")
    return root


def artifact(path: Path, fmt: str = "savedmodel") -> Artifact:
    return Artifact(model="mlp", format=fmt, path=str(path), sha256="0" * 64, key="fake", cache_hit=False,
                    record={"parity": []})


# --- layout and run spec ---------------------------------------------------------------------------------

def test_layout_without_batching(tmp_path, mlp_spec):
    server = TFServingServer()
    layout = server.write_layout(artifact(fake_savedmodel(tmp_path / "sm")), mlp_spec, tmp_path / "work")
    assert (layout / "mlp" / "1" / "saved_model.pb").read_bytes() == b"\x08\x01fake-saved-model"
    assert (layout / "mlp" / "1" / "variables" / "variables.index").is_file()
    config = (layout / MODELS_CONFIG).read_text()
    assert config.startswith("model_config_list {")
    assert 'name: "mlp"' in config and 'base_path: "/models/mlp"' in config
    assert 'model_platform: "tensorflow"' in config
    assert f'base_path: "{(layout / "mlp").resolve()}"' in (layout / MODELS_HOST_CONFIG).read_text()
    assert not (layout / BATCHING_CONFIG).exists()
    assert config.count("{") == config.count("}")


def test_layout_with_batching(tmp_path, mlp_spec):
    options = ServingOptions(max_batch_size=16, dynamic_batching=True, batch_delay_us=2500, instances=2)
    layout = TFServingServer(options).write_layout(artifact(fake_savedmodel(tmp_path / "sm")), mlp_spec,
                                                   tmp_path / "work")
    batching = (layout / BATCHING_CONFIG).read_text()
    assert "max_batch_size { value: 16 }" in batching
    assert "batch_timeout_micros { value: 2500 }" in batching
    assert "num_batch_threads { value: 2 }" in batching


@pytest.mark.parametrize("device, image", [("cpu", IMAGE_CPU), ("gpu", IMAGE_GPU)])
def test_run_spec(tmp_path, mlp_spec, device, image):
    server = TFServingServer(ServingOptions(device=device, dynamic_batching=True))
    layout = server.write_layout(artifact(fake_savedmodel(tmp_path / "sm")), mlp_spec, tmp_path / "work")
    spec = server.run_spec(layout, mlp_spec, {"http": 18501, "grpc": 18500})
    assert spec.image == image and spec.device == device
    assert image.startswith("tensorflow/serving:") and image.split(":")[1][0].isdigit()  # pinned, not latest
    assert spec.container_ports == {"http": 8501, "grpc": 8500}
    assert spec.mounts == {str(layout.resolve()): "/models"}
    assert spec.container_argv == ("--port=8500", "--rest_api_port=8501", "--model_config_file=/models/models.config",
                                   "--monitoring_config_file=/models/monitoring.config",
                                   "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1",
                                   "--enable_batching=true", "--batching_parameters_file=/models/batching.config")
    assert spec.argv[0] == "tensorflow_model_server"
    assert "--port=18500" in spec.argv and "--rest_api_port=18501" in spec.argv
    assert f"--model_config_file={layout.resolve()}/{MODELS_HOST_CONFIG}" in spec.argv


def test_refuses_wrong_artifacts(tmp_path, mlp_spec):
    server = TFServingServer()
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"onnx")
    with pytest.raises(ConfigError, match="format"):
        server.write_layout(artifact(onnx, "onnx"), mlp_spec, tmp_path / "work")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="artifact.path.*saved_model.pb"):
        server.write_layout(artifact(tmp_path / "empty"), mlp_spec, tmp_path / "work")


def test_skip_reason(tmp_path, monkeypatch):
    server = get_server("tfserving")
    monkeypatch.setenv("PATH", str(tmp_path))  # no tensorflow_model_server anywhere
    assert server.skip_reason("process") == NEEDS_DOCKER
    assert "needs Docker" in NEEDS_DOCKER and "launcher=docker" in NEEDS_DOCKER
    monkeypatch.setattr("tasks.serve.servers.tfserving.official_unavailable_reason", lambda ref: None)
    assert server.skip_reason("docker") is None  # the official image is on the engine, or a registry serves it
    monkeypatch.setattr("tasks.serve.servers.tfserving.official_unavailable_reason", lambda ref: f"needs {ref}")
    assert server.skip_reason("docker") == "needs tensorflow/serving:2.18.0"  # where none does: skipped, saying so
    binary = tmp_path / "tensorflow_model_server"
    binary.write_text("#!/bin/sh\n")
    os.chmod(binary, 0o755)
    assert server.skip_reason("process") is None  # someone has the binary: let it run


# --- a stand-in for TF Serving's REST API (see the module docstring) --------------------------------------

class StandIn(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like TF Serving; the load generator relies on it
    status_calls = 0
    loading_calls = 2  # the first status answers say LOADING: readiness must wait for AVAILABLE

    def log_message(self, *args) -> None:
        pass

    def reply(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path != "/v1/models/mlp":
            return self.reply(404, {"error": f"Servable not found for request: Latest({self.path})"})
        type(self).status_calls += 1
        state = "LOADING" if type(self).status_calls <= self.loading_calls else "AVAILABLE"
        self.reply(200, {"model_version_status": [
            {"version": "1", "state": state, "status": {"error_code": "OK", "error_message": ""}}]})

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v1/models/mlp:predict":
            return self.reply(404, {"error": "Servable not found"})
        try:
            x = np.asarray(json.loads(data)["inputs"]["input"], dtype=np.float32)
            y = x @ WEIGHTS + BIAS
        except (KeyError, ValueError, TypeError) as exc:
            return self.reply(400, {"error": f"bad request: {exc}"})
        self.reply(200, {"outputs": y.tolist()})  # single output: TF Serving omits its name


@pytest.fixture()
def standin():
    StandIn.status_calls = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def exchange(port: int, request: bytes) -> tuple[int, bytes]:
    """Send pre-encoded request bytes (as the load generator does) and read one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = int(next(line.split(b":")[1] for line in lines if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += sock.recv(65536)
    return int(head[9:12]), body


def codec(port: int, batch: int = 4, model: str = "mlp") -> TFServingRest:
    x = np.random.default_rng(batch).normal(size=(batch, IN_FEATURES)).astype(np.float32)
    return get_codec("tfserving_rest")("127.0.0.1", port, model, {"input": x}, {"output": (batch, OUT_FEATURES)})


def test_codec_against_standin(standin):
    c = codec(standin, batch=4)
    assert c.request_bytes().startswith(b"POST /v1/models/mlp:predict HTTP/1.1\r\n")
    status, body = exchange(standin, c.request_bytes())
    assert c.check(status, body) == OK
    out = c.decode(body)["output"]
    np.testing.assert_allclose(out, c.inputs["input"] @ WEIGHTS + BIAS, rtol=1e-5, atol=1e-5)
    wrong = codec(standin, model="nope")
    status, body = exchange(standin, wrong.request_bytes())
    assert status == 404 and wrong.check(status, body) == HTTP_STATUS


def test_load_generator_against_standin(standin):
    settings = LoadSettings(load=2, duration_s=0.5, warmup_s=0.1, window_s=0.25, request_timeout_s=5)
    recording = asyncio.run(closed_loop("127.0.0.1", standin, codec(standin, batch=2), settings))
    assert len(recording.codes) > 0 and set(np.unique(recording.codes)) == {OK}


def test_readiness_and_version_against_standin(standin):
    server = TFServingServer()
    endpoint = Endpoint("127.0.0.1", standin, "mlp", server.protocol)
    assert not server.is_ready(endpoint) and not server.is_ready(endpoint)  # LOADING
    assert server.is_ready(endpoint)
    assert server.version(endpoint) == "tensorflow-serving 2.18.0 (model version 1)"
    assert not server.is_ready(Endpoint("127.0.0.1", standin, "other", server.protocol))  # 404


# --- canned responses -------------------------------------------------------------------------------------

def test_request_encoding_is_columnar():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = TFServingRest("127.0.0.1", 1, "m", {"input": x}, {"output": (2, 2)})
    assert json.loads(c.body()) == {"inputs": {"input": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]}}
    request = c.request_bytes()
    assert f"Content-Length: {len(c.body())}".encode() in request and request.endswith(c.body())


@pytest.mark.parametrize("status, body, expected", [
    (200, b'{"outputs": [[1.0, 2.0], [3.0, 4.0]]}', OK),
    (200, b'{"outputs": {"output": [[1.0, 2.0], [3.0, 4.0]], "extra": [1]}}', OK),
    (200, b'{"outputs": [[1.0, 2.0]]}', BAD_RESPONSE),  # batch of 1, 2 expected
    (200, b'{"outputs": {"other": [[1.0, 2.0], [3.0, 4.0]]}}', BAD_RESPONSE),
    (200, b'{"error": "Input to reshape is a tensor with 3 values"}', BAD_RESPONSE),
    (200, b"not json", BAD_RESPONSE),
    (400, b'{"error": "bad input"}', HTTP_STATUS),
    (503, b"", HTTP_STATUS),
])
def test_check_canned(status, body, expected):
    c = TFServingRest("127.0.0.1", 1, "m", {"input": np.zeros((2, 3), np.float32)}, {"output": (2, 2)})
    assert c.check(status, body) == expected


def test_decode_canned():
    c = TFServingRest("127.0.0.1", 1, "m", {}, {"a": (1, 2), "b": (1,)})
    out = c.decode(b'{"outputs": {"a": [[1.5, 2.5]], "b": [7]}}')
    assert out["a"].shape == (1, 2) and out["b"].tolist() == [7]
    with pytest.raises(ValueError, match="single unnamed output"):
        c.decode(b'{"outputs": [[1.5, 2.5]]}')  # two outputs expected, an unnamed one came
    with pytest.raises(ValueError, match="TF Serving error"):
        c.decode(b'{"error": "boom"}')
    assert nested_shape([[[1], [2]], [[3], [4]]]) == (2, 2, 1) and nested_shape(3.0) == ()


# --- gRPC Predict: hand-written protobuf messages, checked with the protobuf runtime and a gRPC stand-in ---

def _proto_classes() -> dict:
    """The TF Serving messages, declared here from the field numbers of the .proto files, built by the protobuf
    runtime: an independent decoder/encoder for checking the hand-written wire format."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    messages = {
        "Dim": [("size", 1, F.TYPE_INT64, opt, None)],
        "Shape": [("dim", 2, F.TYPE_MESSAGE, rep, ".t.Dim")],
        "Tensor": [("dtype", 1, F.TYPE_INT32, opt, None), ("tensor_shape", 2, F.TYPE_MESSAGE, opt, ".t.Shape"),
                   ("tensor_content", 4, F.TYPE_BYTES, opt, None), ("float_val", 5, F.TYPE_FLOAT, rep, None),
                   ("int64_val", 10, F.TYPE_INT64, rep, None)],
        "ModelSpec": [("name", 1, F.TYPE_STRING, opt, None), ("signature_name", 3, F.TYPE_STRING, opt, None)],
        "Entry": [("key", 1, F.TYPE_STRING, opt, None), ("value", 2, F.TYPE_MESSAGE, opt, ".t.Tensor")],
        "PredictRequest": [("model_spec", 1, F.TYPE_MESSAGE, opt, ".t.ModelSpec"),
                           ("inputs", 2, F.TYPE_MESSAGE, rep, ".t.Entry")],
        "PredictResponse": [("outputs", 1, F.TYPE_MESSAGE, rep, ".t.Entry")],
    }
    file = descriptor_pb2.FileDescriptorProto(name="tfserving_standin.proto", package="t", syntax="proto3")
    for name, specs in messages.items():
        msg = file.message_type.add(name=name)
        for fname, number, ftype, label, type_name in specs:
            field = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                field.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"t.{n}")) for n in messages}


def test_grpc_request_parses_with_protobuf():
    from tasks.loadgen.protocols.tfserving_grpc import encode_predict_request

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([[-1, 5]], dtype=np.int64)
    msg = _proto_classes()["PredictRequest"].FromString(encode_predict_request("mlp", {"input": x, "ids": ids}))
    assert msg.model_spec.name == "mlp" and msg.model_spec.signature_name == "serving_default"
    by_name = {e.key: e.value for e in msg.inputs}
    assert by_name["input"].dtype == 1 and [d.size for d in by_name["input"].tensor_shape.dim] == [2, 3]
    assert np.frombuffer(by_name["input"].tensor_content, "<f4").tolist() == x.ravel().tolist()
    assert by_name["ids"].dtype == 9 and np.frombuffer(by_name["ids"].tensor_content, "<i8").tolist() == [-1, 5]


def test_grpc_response_from_protobuf_decodes():
    from tasks.loadgen.protocols.tfserving_grpc import decode_predict_response

    classes = _proto_classes()
    response = classes["PredictResponse"]()
    out = response.outputs.add(key="output")
    out.value.dtype = 1
    out.value.tensor_shape.dim.add(size=2)
    out.value.tensor_shape.dim.add(size=2)
    out.value.float_val.extend([0.5, -1.5, 2.0, 3.25])  # values as float_val, as TF Serving may send them
    ids = response.outputs.add(key="ids")
    ids.value.dtype = 9
    ids.value.tensor_shape.dim.add(size=3)
    ids.value.int64_val.extend([-7, 0, 1 << 40])
    decoded = decode_predict_response(response.SerializeToString())
    assert decoded["output"].dtype == np.float32 and decoded["output"].tolist() == [[0.5, -1.5], [2.0, 3.25]]
    assert decoded["ids"].tolist() == [-7, 0, 1 << 40]


def test_grpc_predict_against_standin():
    from concurrent import futures

    import grpc

    from tasks.loadgen.protocols.tfserving_grpc import (
        decode_predict_request,
        encode_predict_response,
        predict,
    )

    def handle(request: bytes, context) -> bytes:
        name, inputs = decode_predict_request(request)
        if name != "mlp":
            context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: Latest({name})")
        return encode_predict_response({"output": inputs["input"] @ WEIGHTS + BIAS}, name)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "tensorflow.serving.PredictionService", {"Predict": grpc.unary_unary_rpc_method_handler(handle)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        x = np.random.default_rng(3).normal(size=(3, IN_FEATURES)).astype(np.float32)
        out = predict("127.0.0.1", port, "mlp", {"input": x})["output"]
        np.testing.assert_allclose(out, x @ WEIGHTS + BIAS, rtol=1e-5, atol=1e-5)
        with pytest.raises(grpc.RpcError) as info:
            predict("127.0.0.1", port, "nope", {"input": x})
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        server.stop(grace=None).wait(5)
