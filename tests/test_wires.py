"""Wires without servers: the new codecs against independent encoders and decoders (tritonclient, the custom
service's own functions, a protobuf wire parser), the breakdown's arithmetic, what each stack's metrics text
becomes, the `protocols` Param and its plan (best, skipped cells, older plans), the cell key, and the report's
best wire, JSON tax and stacked bar."""

from __future__ import annotations

import importlib.util
import json
import time

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.core.paths import DOCKER_DIR
from tasks.core.results import CELL_KEY, LEGACY_PROTOCOLS, cell_key
from tasks.loadgen.measurement import ServerTiming
from tasks.loadgen.protocols import get_codec
from tasks.loadgen.protocols.base import BAD_RESPONSE, FULL_CHECK_EVERY, HTTP_STATUS, OK
from tasks.loadgen.protocols.kserve_v2_binary import split_body
from tasks.loadgen.recording import Recording
from tasks.loadgen.run import ServerScraper, server_probe
from tasks.loadgen.settings import LoadSettings
from tasks.plan.cells import Plan, make_plan, rows_of
from tasks.plan.config import RunConfig
from tasks.serve.servers import SERVERS

INPUTS = {"input": np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32),
          "ids": np.arange(8, dtype=np.int64).reshape(4, 2)}
SHAPES = {"output": (4, 10), "pooled": (4, 3)}
DTYPES = {"output": "float32", "pooled": "float32"}
OUTPUTS = {"output": np.arange(40, dtype=np.float32).reshape(4, 10), "pooled": np.ones((4, 3), np.float32)}


def custom_app():
    """docker/custom/app.py, the custom service's entry script, as a module (its encoders and decoders)."""
    spec = importlib.util.spec_from_file_location("custom_app", DOCKER_DIR / "custom" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def codec(name: str, shapes: dict | None = None):
    return get_codec(name)("127.0.0.1", 1, "m", INPUTS, shapes or SHAPES, DTYPES)


def http_body(raw: bytes) -> tuple[dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    return headers, body


def test_binary_request_is_read_by_tritonclient_and_by_the_custom_service_alike():
    from tritonclient.http import InferInput
    from tritonclient.http._utils import _get_inference_request

    raw = codec("kserve_v2_binary").request_bytes()
    headers, body = http_body(raw)
    length = int(headers["Inference-Header-Content-Length"])
    assert headers["Content-Type"] == "application/octet-stream" and int(headers["Content-Length"]) == len(body)
    header = json.loads(body[:length])
    assert header["parameters"] == {"binary_data_output": True}
    theirs = []
    for name, array in INPUTS.items():
        tensor = InferInput(name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT64")
        tensor.set_data_from_numpy(array, binary_data=True)
        theirs.append(tensor)
    their_body, their_length = _get_inference_request(theirs, "", None, 0, False, False, 0, None, None)
    assert body[length:] == their_body[their_length:]  # the same tensor bytes, in the same order
    their_header = json.loads(their_body[:their_length])
    assert [i["parameters"] for i in header["inputs"]] == [i["parameters"] for i in their_header["inputs"]]
    inputs, _ = custom_app().decode_request(body, str(length))
    for name, array in INPUTS.items():
        np.testing.assert_array_equal(inputs[name], array)


def test_binary_response_decoded_like_tritonclient_and_checked():
    from tritonclient.http import InferResult

    app = custom_app()
    body, headers = app.encode_response("m", OUTPUTS, True)
    length = int(headers["Inference-Header-Content-Length"])
    c = codec("kserve_v2_binary")
    assert split_body(body)[1] == length  # the header found from the body alone
    assert c.check(200, body) == OK
    theirs = InferResult.from_response_body(body, header_length=length)
    for name, array in OUTPUTS.items():
        np.testing.assert_array_equal(c.decode(body)[name], theirs.as_numpy(name))
        np.testing.assert_array_equal(c.decode(body)[name], array)
    json_only, _ = app.encode_response("m", OUTPUTS, set())  # binary outputs not given: JSON data still decodes
    np.testing.assert_array_equal(c.decode(json_only)["output"], OUTPUTS["output"])
    assert c.check(200, body[:-4]) == BAD_RESPONSE  # shorter than its header declares
    assert c.check(200, body + b"x") == BAD_RESPONSE
    assert c.check(500, body) == HTTP_STATUS
    assert codec("kserve_v2_binary", {"output": (2, 10)}).check(200, body) == BAD_RESPONSE  # wrong batch axis
    one, _ = app.encode_response("m", {"output": OUTPUTS["output"]}, {"output"})
    assert app.binary_outputs({"outputs": [{"name": "output", "parameters": {"binary_data": True}}]}) == {"output"}
    assert c.check(200, one) == OK  # an output per `binary_data` of its requested output


def test_large_binary_responses_parse_their_header_always_and_arrays_on_the_sampling_rule(monkeypatch):
    from tasks.loadgen.protocols import kserve_v2_binary

    big = {"output": np.zeros((4, 50_000), np.float32)}
    body, _ = custom_app().encode_response("m", big, True)
    c = get_codec("kserve_v2_binary")("h", 1, "m", INPUTS, {"output": (4, 50_000)}, {"output": "float32"})
    decoded = []
    real = kserve_v2_binary.decode_tensors
    monkeypatch.setattr(kserve_v2_binary, "decode_tensors", lambda *a: decoded.append(1) or real(*a))
    assert all(c.check(200, body) == OK for _ in range(2 * FULL_CHECK_EVERY))
    assert len(decoded) == 2  # every FULL_CHECK_EVERY-th large response has its arrays read
    assert c.check(200, body.replace(b"[4,50000]", b"[4,50001]").replace(b"[4, 50000]", b"[4, 50001]")) \
        == BAD_RESPONSE  # a wrong shape is caught without reading the arrays


def test_torchserve_raw_request_and_response():
    c = codec("torchserve_raw")
    headers, body = http_body(c.request_bytes())
    assert headers["Content-Type"] == "application/octet-stream"
    assert body == INPUTS["input"].tobytes() + INPUTS["ids"].tobytes()
    assert c.payload_size(c.request_bytes()) == len(body)
    response = OUTPUTS["output"].tobytes() + OUTPUTS["pooled"].tobytes()
    assert c.check(200, response) == OK and c.check(200, response[:-1]) == BAD_RESPONSE
    assert c.check(503, response) == HTTP_STATUS
    np.testing.assert_array_equal(c.decode(response)["pooled"], OUTPUTS["pooled"])
    with pytest.raises(ValueError, match="need the outputs' dtypes"):
        get_codec("torchserve_raw")("h", 1, "m", INPUTS, SHAPES).request_bytes()  # fails at encoding, once


def test_torchserve_grpc_messages_have_the_protos_field_numbers():
    from tasks.loadgen.protocols.tfserving_grpc import LEN, fields

    c = codec("torchserve_grpc")
    assert c.transport == "grpc"
    assert c.grpc_method == "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions"
    request = c.request_bytes()
    parsed = {number: value for number, _, value in fields(request)}
    assert parsed[1] == b"m"  # model_name = 1
    entry = {number: value for number, wire, value in fields(parsed[3]) if wire == LEN}  # map<string, bytes> input = 3
    assert entry == {1: b"tensors", 2: INPUTS["input"].tobytes() + INPUTS["ids"].tobytes()}
    prediction = OUTPUTS["output"].tobytes() + OUTPUTS["pooled"].tobytes()
    reply = b"\x0a" + bytes([0x80 | (len(prediction) & 0x7F), len(prediction) >> 7]) + prediction  # prediction = 1
    assert c.check(0, reply) == OK
    np.testing.assert_array_equal(c.decode(reply)["output"], OUTPUTS["output"])
    assert c.check(0, reply[:-3]) == BAD_RESPONSE and c.check(14, b"") != OK


def test_tfserving_grpc_is_a_load_codec():
    from tasks.loadgen.protocols.tfserving_grpc import decode_predict_request, encode_predict_response

    c = codec("tfserving_grpc")
    assert c.transport == "grpc" and c.grpc_method.endswith("PredictionService/Predict")
    name, inputs = decode_predict_request(c.request_bytes())
    assert name == "m" and np.array_equal(inputs["input"], INPUTS["input"])
    assert c.check(0, encode_predict_response(OUTPUTS)) == OK
    assert c.check(0, encode_predict_response({"output": np.zeros((2, 10), np.float32)})) == BAD_RESPONSE


def test_payload_bytes_survive_save_load_and_merge(tmp_path):
    def part(response_bytes: int) -> Recording:
        empty = np.zeros(0, np.int64)
        return Recording(0, 0, 10, empty, empty, empty, np.zeros(0, np.int8), request_bytes=397,
                         response_bytes=response_bytes)

    path = str(tmp_path / "r.npz")
    part(1000).save(path)
    loaded = Recording.load(path)
    assert (loaded.request_bytes, loaded.response_bytes) == (397, 1000)
    merged = Recording.merge([part(1000), part(500)])
    assert (merged.request_bytes, merged.response_bytes) == (397, 1500)


def test_server_timing_parts_are_per_request_and_never_a_zero_that_was_not_measured():
    timing = ServerTiming.from_deltas({"requests": 4, "server_ms": 40.0, "queue_ms": 0.0, "infer_ms": 20.0})
    assert (timing.server_ms, timing.infer_ms) == (10.0, 5.0)
    assert timing.queue_ms is None and timing.decode_ms is None  # 0 over 4 requests: not reported
    assert ServerTiming.from_deltas({"requests": 0, "server_ms": 1.0}) is None


class Reader:
    """A server's reader (tasks.loadgen.window_reader.ServerWindowReader) made of functions; one not given reads
    nothing."""

    def __init__(self, count=None, timings=None, cpu=None) -> None:
        self._count, self._timings, self._cpu = count, timings, cpu

    def request_count(self) -> float | None:
        return self._count() if self._count else None

    def timings(self) -> dict | None:
        return self._timings() if self._timings else None

    def cpu_s(self) -> float | None:
        return self._cpu() if self._cpu else None


def test_a_timing_scrape_that_fails_never_fails_the_point():
    def broken() -> dict:
        raise OSError("connection refused")

    assert server_probe(Reader(count=lambda: 5.0, timings=broken))() == {"count": 5.0}
    assert server_probe(Reader(timings=lambda: {"requests": 2, "infer_ms": 3.0}))() == {"timing.requests": 2.0,
                                                                                         "timing.infer_ms": 3.0}
    assert server_probe(Reader(cpu=broken))() == {} and server_probe(Reader(cpu=lambda: None))() == {}


def test_a_live_server_is_read_for_what_it_reports_and_a_duet_side_for_its_cpu_only():
    from types import SimpleNamespace

    from tasks.measure.window_reader import LiveServerWindowReader

    cpu = SimpleNamespace(cpu_s=lambda: 2.5)
    triton = SimpleNamespace(timing_source="stats", server_side_counts=lambda e: {"nv_inference_request_success": 7},
                             server_timings=lambda e: {"requests": 7.0})
    reader = LiveServerWindowReader(cpu, SimpleNamespace(server=triton, endpoint=None))
    assert server_probe(reader)() == {"count": 7.0, "timing.requests": 7.0, "cpu_s": 2.5}
    untimed = SimpleNamespace(timing_source="", server_timings=lambda e: {"requests": 1.0})
    assert server_probe(LiveServerWindowReader(cpu, SimpleNamespace(server=untimed, endpoint=None)))() == {
        "cpu_s": 2.5}  # no counter, and a stack that reports no timing is not asked
    assert server_probe(LiveServerWindowReader(cpu))() == {"cpu_s": 2.5}


def test_the_server_cpu_is_read_over_the_measured_window_only():
    """A server clock that burns half a core only inside the measured window: the window reads 50 %, where a mean
    over the whole load point (its warm-up idle) would read less."""
    settings = LoadSettings(duration_s=0.4, warmup_s=0.3, window_s=0.2)
    start_ns = time.monotonic_ns() + 50_000_000
    window = (start_ns + 300_000_000, start_ns + 700_000_000)

    def cpu_s() -> float:  # 0.5 CPU-s per second inside the window, none outside it
        now = min(max(time.monotonic_ns(), window[0]), window[1])
        return 0.5 * (now - window[0]) / 1e9

    scraper = ServerScraper(server_probe(Reader(cpu=cpu_s)), start_ns, settings)
    time.sleep((window[1] - time.monotonic_ns()) / 1e9 + 0.1)
    scraper.finish()
    assert scraper.cpu_pct() == pytest.approx(50.0, abs=3.0)
    no_reader = ServerScraper(server_probe(Reader()), start_ns, settings)
    no_reader.finish()
    assert no_reader.cpu_pct() is None


TORCHSERVE_METRICS = """# TYPE ts_queue_latency_microseconds counter
ts_queue_latency_microseconds{model_name="mlp",model_version="default",hostname="vm",} 14632.9
ts_inference_requests_total{model_name="mlp",model_version="default",hostname="vm",} 21.0
ts_inference_latency_microseconds{model_name="mlp",model_version="default",hostname="vm",} 289093.4
ts_inference_requests_total{model_name="other",model_version="default",hostname="vm",} 7.0
ServingEvalInferMs{ModelName="mlp",Level="Model",Hostname="vm",} 161.5
ServingEvalDecodeMs{ModelName="mlp",Level="Model",Hostname="vm",} 3.2
PredictionTime{ModelName="mlp",Level="Model",Hostname="vm",} 0.71
"""


def test_each_stacks_metrics_become_the_breakdowns_sums(monkeypatch):
    from tasks.serve import prometheus
    from tasks.serve.base import Endpoint
    from tasks.serve.servers import bentoml, custom, kserve, tfserving, torchserve, triton

    endpoint = Endpoint("127.0.0.1", 1, "mlp", "x", {"http": 1, "metrics": 2})
    for module in (torchserve, bentoml, kserve, custom):
        monkeypatch.setattr(module, "scrape", lambda url: TEXTS[url.rsplit(":", 1)[1].split("/")[0]])
    TEXTS = {"2": TORCHSERVE_METRICS}
    assert torchserve.TorchServeServer().server_timings(endpoint) == pytest.approx(
        {"requests": 21.0, "server_ms": 289.0934, "queue_ms": 14.6329, "infer_ms": 161.5, "decode_ms": 3.2})
    TEXTS["1"] = ('bentoml_service_request_duration_seconds_sum{endpoint="/predict",http_response_code="200"} 2.5\n'
                  'bentoml_service_request_duration_seconds_count{endpoint="/predict",http_response_code="200"} 10\n'
                  'bentoml_service_request_duration_seconds_sum{endpoint="/readyz",http_response_code="200"} 9\n')
    assert bentoml.BentoMLServer().server_timings(endpoint) == {"requests": 10.0, "server_ms": 2500.0}
    TEXTS["1"] = ('request_predict_seconds_count{model_name="mlp"} 8.0\n'
                  'request_predict_seconds_sum{model_name="mlp"} 0.004\n')
    assert kserve.KServeServer().server_timings(endpoint) == pytest.approx({"requests": 8.0, "infer_ms": 4.0})
    TEXTS["1"] = "serving_eval_requests_total 4\n" + "".join(
        f'serving_eval_request_seconds_total{{part="{p}"}} {v}\n'
        for p, v in (("decode", 0.001), ("infer", 0.002), ("encode", 0.001), ("total", 0.004)))
    assert custom.CustomServer().server_timings(endpoint) == pytest.approx(
        {"requests": 4.0, "server_ms": 4.0, "decode_ms": 1.0, "infer_ms": 2.0, "encode_ms": 1.0})
    tf_text = ('{n}_count{{model_name="mlp",API="predict",entrypoint="REST"}} 3\n'
               '{n}_count{{model_name="mlp",API="predict",entrypoint="GRPC"}} 1\n'
               '{n}_sum{{model_name="mlp",API="predict",entrypoint="REST"}} 3000\n'
               '{n}_sum{{model_name="mlp",API="predict",entrypoint="GRPC"}} 1000\n')
    text = tf_text.format(n=tfserving.REQUEST_LATENCY) + tf_text.format(n=tfserving.RUNTIME_LATENCY).replace(
        "3000", "2000")
    assert tfserving.parse_timings(text, "mlp") == {"requests": 4.0, "server_ms": 4.0, "infer_ms": 3.0}
    stats = {"model_stats": [{"inference_stats": {k: {"count": 2, "ns": ns} for k, ns in (
        ("success", 9e6), ("queue", 1e6), ("compute_input", 1e6), ("compute_infer", 6e6), ("compute_output", 1e6))}}]}
    assert triton.parse_stats(stats) == {"requests": 2.0, "server_ms": 9.0, "queue_ms": 1.0, "decode_ms": 1.0,
                                         "infer_ms": 6.0, "encode_ms": 1.0}
    assert prometheus.total("a{x=\"1\"} 2\na{x=\"2\"} 3\n", "a") == 5.0 and prometheus.total("", "a") is None


def test_the_custom_services_timing_files_add_up_over_workers(tmp_path):
    app = custom_app()
    first = app.Timing(tmp_path)
    first.add(1_000_000, 2_000_000, 1_000_000, 4_000_000)
    (tmp_path / "timing-99999.bin").write_bytes(app.TIMING_LAYOUT.pack(2, 1, 2, 3, 6))  # another worker's file
    assert app.read_timing(tmp_path) == [3, 1_000_001, 2_000_002, 1_000_003, 4_000_006]
    assert 'serving_eval_request_seconds_total{part="total"} 0.004000006' in app.timing_text(tmp_path)


def test_every_server_declares_json_and_says_why_a_wire_is_missing():
    for name, cls in SERVERS.items():
        server = cls()
        assert "json" in server.wires and server.protocol == server.wires["json"].codec
        assert set(server.wires) | set(server.missing_wires) == {"json", "binary", "grpc"}, name
        for wire in server.wires.values():
            get_codec(wire.codec)
        assert server.timing_source
    assert LEGACY_PROTOCOLS == {name: cls().protocol for name, cls in SERVERS.items()}  # the REST JSON codec of 1.0


def test_protocols_best_plans_every_wire_a_stack_speaks_and_skips_what_it_lacks():
    config = RunConfig.from_params({"servers": ["triton", "custom", "bentoml", "torchserve"],
                                    "formats": ["onnx", "torchscript"], "protocols": ["best", "grpc"],
                                    "concurrencies": [1], "control_cell": "none"})
    plan = make_plan(config)
    wires = {(c.server, c.format): [(c.wire, c.protocol, bool(c.skip)) for c in s.cells]
             for s in plan.sessions for c in s.cells}
    assert wires[("triton", "onnx")] == [("json", "kserve_v2_rest", False), ("binary", "kserve_v2_binary", False),
                                         ("grpc", "kserve_v2_grpc", False)]
    assert wires[("torchserve", "torchscript")] == [("json", "torchserve_rest", False),
                                                    ("binary", "torchserve_raw", False),
                                                    ("grpc", "torchserve_grpc", False)]
    assert wires[("custom", "onnx")] == [("json", "kserve_v2_rest", False), ("binary", "kserve_v2_binary", False),
                                         ("grpc", "grpc", True)]  # asked by name: a skipped cell, never json instead
    assert wires[("bentoml", "onnx")] == [("json", "bentoml_json", False), ("grpc", "grpc", True)]
    skipped = next(c for s in plan.sessions for c in s.cells if c.server == "bentoml" and c.skip)
    assert skipped.skip.startswith("server bentoml has no grpc wire: ") and skipped.cell_id.endswith(".grpc")
    keys = [c.key for c in plan.cells]
    assert len(keys) == len(set(keys)) and CELL_KEY[-1] == "protocol"  # one cell key per wire
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))).cells == plan.cells
    with pytest.raises(ConfigError, match="protocols"):
        RunConfig.from_params({"protocols": []})


def test_an_older_plans_protocol_reads_as_protocols():
    assert RunConfig.from_dict({"protocol": "default"}).protocols == ("json",)
    assert RunConfig.from_dict({"protocol": "grpc"}).protocols == ("grpc",)
    with pytest.raises(ConfigError, match="protocol='default': is not a Param"):
        RunConfig.from_params({"protocol": "default"})  # a new trigger names protocols


def test_a_row_before_1_1_keys_as_its_servers_rest_json():
    old = {"model": "mlp", "format": "onnx", "server": "torchserve", "launcher": "process", "device": "cpu",
           "batch_size": 1, "mode": "concurrency", "load": 1.0}
    assert cell_key(old)[-1] == "torchserve_rest" and cell_key(old)[-2] == "default"
    assert cell_key({**old, "protocol": "torchserve_raw"}) != cell_key(old)
    cell = make_plan(RunConfig.from_params({"servers": ["custom"], "protocols": ["best"], "concurrencies": [1],
                                            "control_cell": "none"})).cells
    rows = [{**old, "server": "custom", "protocol": p, "status": "ok"} for p in ("kserve_v2_rest", "kserve_v2_binary")]
    assert [len(rows_of(c, rows)) for c in cell] == [1, 1]  # each wire's cell owns its own row


def row(stack: str, wire: str, rps: float, **extra) -> dict:
    server, fmt = stack.split("/")
    base = {"model": "m", "batch_size": 1, "server": server, "format": fmt, "wire": wire, "status": "ok",
            "mode": "concurrency", "load": 1.0, "throughput_rps": rps, "latency_ms_p99": 10.0, "cv": 0.01,
            "latency_ms_p50": 1000.0 / rps, "latency_ms_mean": 1000.0 / rps, "protocol": wire, "config_id": "default"}
    return {**base, **extra}


def test_report_ranks_each_stack_on_its_best_wire_and_shows_the_json_tax():
    from tasks.report.recommend import recommend
    from tasks.report.wires import best_wire_rows, breakdown, json_tax, wires_section

    rows = [row("triton/onnx", "json", 20.0), row("triton/onnx", "binary", 25.0), row("triton/onnx", "grpc", 24.0),
            row("custom/onnx", "json", 15.0, server_ms=50.0, decode_ms=20.0, infer_ms=25.0, encode_ms=4.0,
                outside_ms=16.7, breakdown_source="the custom service's own timing"),
            row("custom/onnx", "binary", 26.0, server_ms=30.0, decode_ms=1.0, infer_ms=26.0, encode_ms=2.0,
                outside_ms=8.5, breakdown_source="the custom service's own timing"),
            row("bentoml/onnx", "json", 19.0, breakdown_source="none reported: bentoml reports no timing")]
    headline = best_wire_rows(rows)
    assert sorted((r["server"], r["wire"]) for r in headline) == [("bentoml", "json"), ("custom", "binary"),
                                                                 ("triton", "binary")]
    best = recommend(headline)[-1]["best"]
    assert (best["stack"], best["wire"]) == ("custom/onnx", "binary")  # on JSON it would have ranked last
    tax = {r["stack"]: r for r in json_tax(rows)}
    assert set(tax) == {"triton/onnx", "custom/onnx"}  # bentoml speaks JSON only: no tax to show
    assert tax["custom/onnx"]["json_tax_pct"] == pytest.approx(100 * (1 - 15 / 26))
    segments, note = breakdown(rows[3])
    assert [name for name, _ in segments] == ["request decode", "inference", "response encode",
                                             "in the server, not attributed", "outside the server"]
    assert sum(v for _, v in segments) == pytest.approx(50.0 + 16.7) and not note
    assert breakdown(rows[5]) == ([], "none reported")
    html = wires_section(rows)
    assert "data-plot='breakdown'" in html and "none reported" in html and "JSON tax" in html
