"""The report's wires section (tasks/report/wires.py): each stack ranked on its best wire, the JSON tax."""

from __future__ import annotations

import pytest


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
