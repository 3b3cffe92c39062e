"""Every new wire against its real server (process launcher, the MLP, 1.5 s points): the served outputs over the
wire equal the reference, a load point over it has no error and lighter payloads than JSON, and on Triton and the
custom service the breakdown's parts add up to within 10 % of the server's own total; a stack without a wire
asked for yields a skipped cell with the reason, in a real run, whose rows carry the server life's lifecycle and
capability figures."""

from __future__ import annotations

import json

import pytest

from tasks.loadgen.coordinator import run_load_point
from tasks.loadgen.settings import LoadSettings
from tasks.measure.hoststate import ServerReader
from tasks.measure.lifecycle import LIFECYCLE_COLUMNS
from tasks.measure.point import load_endpoint
from tasks.measure.served_check import check_served_outputs
from tasks.measure.window_reader import LiveServerWindowReader
from tasks.serve.launchers.process import ProcessLauncher
from tasks.serve.servers import get_server
from tasks.serve.session import SessionSettings, server_session

pytestmark = pytest.mark.integration
READY_TIMEOUT_S = 120.0
POINT = {"mode": "concurrency", "load": 2, "duration_s": 1.5, "warmup_s": 0.5, "window_s": 0.5,
         "request_timeout_s": 30.0}
PARTS_WITHIN = 0.10  # acceptance: the parts add up to within 10 % of the server-side total


def measure_wires(name: str, artifact, spec, log_dir, tmp_path) -> dict:
    """wire -> (served check, measurement) for every wire of the server, one server life."""
    server = get_server(name)
    out = {}
    with server_session(server, artifact, spec, ProcessLauncher(),
                        SessionSettings(run_id="test-wires", session_id=f"wires-{name}", log_dir=log_dir,
                                        ready_timeout_s=READY_TIMEOUT_S)) as live:
        for kind, wire in server.wires.items():
            endpoint = load_endpoint(live, wire.codec)
            check = check_served_outputs(wire.codec, endpoint, spec, artifact, max_batch_size=8)
            measurement, _ = run_load_point(endpoint, spec, LoadSettings(**POINT), tmp_path / kind,
                                            server=LiveServerWindowReader(ServerReader(live.handle), live))
            out[kind] = (check, measurement)
    return out


def check_wires(results: dict) -> None:
    for kind, (check, measurement) in results.items():
        assert check.passed and check.batch_sizes == (1, 8), (kind, check)  # outputs equal the reference
        assert measurement.requests > 0 and measurement.errors == 0, (kind, measurement.errors_by_kind,
                                                                      measurement.first_error)
        assert measurement.request_bytes and measurement.response_bytes, kind
        if kind != "json":  # 64 floats as bytes against as text
            assert measurement.request_bytes < results["json"][1].request_bytes, kind


def check_parts_add_up(measurement) -> None:
    parts = [measurement.queue_ms, measurement.decode_ms, measurement.infer_ms, measurement.encode_ms]
    total = sum(p for p in parts if p is not None)
    assert measurement.server_ms and measurement.infer_ms, measurement
    assert abs(total - measurement.server_ms) <= PARTS_WITHIN * measurement.server_ms, (parts, measurement.server_ms)
    assert measurement.outside_ms is not None and measurement.server_ms <= measurement.latency_ms_mean


def test_triton_binary_and_grpc(mlp_onnx, mlp_spec, log_dir, tmp_path):
    results = measure_wires("triton", mlp_onnx, mlp_spec, log_dir, tmp_path)
    assert set(results) == {"json", "binary", "grpc"}
    check_wires(results)
    for _, measurement in results.values():  # queue, compute_input/infer/output against Triton's success total
        check_parts_add_up(measurement)


def test_custom_service_binary_and_its_own_timing(mlp_onnx, mlp_spec, log_dir, tmp_path):
    results = measure_wires("custom", mlp_onnx, mlp_spec, log_dir, tmp_path)
    assert set(results) == {"json", "binary"}
    check_wires(results)
    for _, measurement in results.values():
        assert measurement.queue_ms is None  # the custom service has no queue of its own to report
        check_parts_add_up(measurement)


def test_kserve_binary_and_grpc(mlp_onnx, mlp_spec, log_dir, tmp_path):
    results = measure_wires("kserve", mlp_onnx, mlp_spec, log_dir, tmp_path)
    check_wires(results)
    assert results["binary"][1].response_bytes < results["json"][1].response_bytes  # binary outputs came back
    for _, measurement in results.values():  # KServe reports its predict only
        assert measurement.infer_ms and measurement.server_ms is None and measurement.outside_ms is None


def test_torchserve_raw_bytes_and_grpc(mlp_torchscript, mlp_spec, log_dir, tmp_path):
    results = measure_wires("torchserve", mlp_torchscript, mlp_spec, log_dir, tmp_path)
    check_wires(results)
    assert results["binary"][1].response_bytes == 10 * 4  # the outputs' bytes alone: 10 floats of batch 1
    for kind, (_, measurement) in results.items():
        assert measurement.infer_ms and measurement.decode_ms and measurement.encode_ms, kind  # the handler's
        if kind != "grpc":  # over gRPC the frontend adds to none of its latency counters
            assert measurement.server_ms >= measurement.infer_ms


def check_lifecycle(*rows: dict) -> None:
    """The lifecycle and feature figures of one real server life: present, plausible and the same on its rows."""
    first = rows[0]
    assert all({k: r[k] for k in LIFECYCLE_COLUMNS} == {k: first[k] for k in LIFECYCLE_COLUMNS} for r in rows)
    assert first["first_correct_s"] >= first["startup_s"] > 0
    assert first["first_correct_s"] - first["startup_s"] < 30  # a few requests of the MLP, and the version call
    assert first["idle_rss_mb"] > 10  # a Python process with ONNX Runtime loaded
    assert first["session_rss_peak_mb"] >= max(first["idle_rss_mb"], *(r["server_rss_mb"] for r in rows))
    assert abs(first["rss_growth_mb"]) < first["session_rss_peak_mb"]
    assert first["server_processes"] >= 1 and first["server_threads"] >= first["server_processes"]
    assert first["runtime_size_mb"] > 100  # the custom runtime's venv: onnxruntime, torch, tensorflow
    capabilities = json.loads(first["capabilities"])
    assert {n for n, c in capabilities.items() if c["result"] == "passed"} >= {"metrics", "health_readiness",
                                                                               "binary_tensors", "kserve_v2"}
    assert first["capability_findings"] == 0 and first["code_lines"] > 100 and first["config_lines"] == 0
    assert json.loads(first["serving_files"])["files"][0]["path"] == "runtime:app.py"


def test_a_stack_without_a_wire_yields_a_skipped_cell_in_a_run(embedded_s3, bucket):
    from tasks.pipeline import run_pipeline
    from tasks.store.s3 import S3Store
    from tests.dagrun import fast_conf, read_run

    conn = embedded_s3.connection("serving_eval_s3")
    conf = fast_conf(bucket, protocols=["best", "grpc"], concurrencies=[1], duration_s=1.0)
    summary, rows = run_pipeline(conf, run_id="wires", logical_date="2026-11-30T02:00:00+00:00", conn=conn)
    assert summary["status"] == "complete", summary
    cells = {r["wire"]: r for r in rows if r.get("role") != "control"}
    assert set(cells) == {"json", "binary", "grpc"}
    assert cells["json"]["status"] == cells["binary"]["status"] == "ok"
    assert cells["binary"]["protocol"] == "kserve_v2_binary" and cells["binary"]["request_bytes"] > 0
    assert cells["binary"]["breakdown_source"].startswith("the custom service's own timing")
    skipped = cells["grpc"]
    assert skipped["status"] == "skipped" and skipped["protocol"] == "grpc"
    assert skipped["reason"].startswith("server custom has no grpc wire: the custom service is a FastAPI app")
    check_lifecycle(cells["json"], cells["binary"])
    declared = json.loads(skipped["capabilities"])  # a skipped cell still says what its stack offers
    assert declared["grpc"]["declared"] is False and declared["metrics"]["result"] == "passed"
    assert skipped["code_lines"] == cells["json"]["code_lines"] and skipped["idle_rss_mb"] is None
    store = S3Store(bucket, "eval", conn)
    _, manifest = read_run(store)
    page = store.get(next(o["key"] for o in manifest["objects"] if o["name"] == "report.html")).decode()
    assert "<h2 id=wires>" in page and "data-plot='breakdown'" in page and "no grpc wire" in page
    assert "<table class=lifecycle>" in page and "data-plot='lifecycle-first-correct'" in page
    assert "<table class=features>" in page and "<tr data-capability='kserve_v2'>" in page
