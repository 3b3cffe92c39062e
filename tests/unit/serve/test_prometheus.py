"""Prometheus text (tasks/serve/prometheus.py): each stack's metrics become the breakdown's sums."""

from __future__ import annotations

import pytest

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
