"""What serving costs (issue 26, item 1): core-seconds and GPU-seconds per 1,000 inferences from a row's measured CPU
time and throughput, the price of a million inferences from the run's prices, and the Params refused up front."""

from __future__ import annotations

import pytest

from tasks.core.cost import Prices, core_s_per_1k, cost_fields, gpu_s_per_1k, price_per_million
from tasks.core.errors import ConfigError
from tasks.plan.config import RunConfig
from tests.claims import decided_claims


def measured_row(cpu_pct: float, rps: float, batch: int = 1, device: str = "cpu") -> dict:
    """A row as `tasks.measure.point` fills it: the server's CPU per request from its CPU use and throughput."""
    return {"server_cpu_pct": cpu_pct, "throughput_rps": rps, "throughput_sps": rps * batch, "batch_size": batch,
            "device": device, "server_cpu_us_per_request": cpu_pct / 100.0 / rps * 1e6}


def test_known_cpu_time_and_throughput_give_exact_core_seconds_and_price():
    # 1.5 busy cores serving 300 req/s: 5 ms of CPU per request, 5 core-seconds per 1,000; a million inferences
    # take 5,000 core-seconds = 1.3889 core-hours, at 0.036 per core-hour 0.05
    fields = cost_fields(measured_row(150.0, 300.0), Prices(per_core_hour=0.036))
    assert fields["server_core_s_per_1k"] == pytest.approx(5.0, rel=1e-12)
    assert fields["price_per_million"] == pytest.approx(0.05, rel=1e-12)
    assert fields["gpu_s_per_1k"] is None  # a CPU row holds no GPU
    assert fields["price_per_core_hour"] == 0.036 and fields["price_per_gpu_hour"] is None


def test_an_inference_is_one_sample_so_a_batch_divides_the_cpu_per_request():
    # batch 8 at 50 req/s on 2 cores: 40 ms per request, 5 ms per sample -> 5 core-seconds per 1,000 inferences
    assert cost_fields(measured_row(200.0, 50.0, batch=8), Prices())["server_core_s_per_1k"] == pytest.approx(5.0)


def test_no_price_given_shows_no_money():
    fields = cost_fields(measured_row(100.0, 1000.0), Prices())
    assert fields["server_core_s_per_1k"] == pytest.approx(1.0)
    assert fields["price_per_million"] is None


def test_a_gpu_row_costs_its_whole_gpu_time_and_needs_both_prices():
    row = measured_row(100.0, 500.0, batch=2, device="gpu")  # 1,000 samples/s on one GPU: 1 GPU-s per 1,000
    assert gpu_s_per_1k("gpu", 1000.0) == pytest.approx(1.0)
    assert cost_fields(row, Prices(per_core_hour=1.0))["price_per_million"] is None  # no GPU price: no price
    fields = cost_fields(row, Prices(per_core_hour=3.6, per_gpu_hour=7.2))
    # CPU: one busy core at 500 req/s is 2 ms per request, 1 ms per sample: 1 core-s per 1,000, 1,000 core-s per
    # million = 1.0 at 3.6 per hour; GPU: 1 GPU-s per 1,000, 1,000 GPU-s per million = 2.0 at 7.2 per hour
    assert fields["server_core_s_per_1k"] == pytest.approx(1.0)
    assert fields["gpu_s_per_1k"] == pytest.approx(1.0)
    assert fields["price_per_million"] == pytest.approx(1.0 + 2.0)


def test_missing_figures_give_no_cost():
    assert core_s_per_1k(None, 1) is None
    assert core_s_per_1k(100.0, 0) is None
    assert gpu_s_per_1k("gpu", 0.0) is None
    assert price_per_million(None, None, "cpu", Prices(1.0, 1.0)) is None


@pytest.mark.parametrize(("params", "field"), [
    ({"price_per_core_hour": -1}, "price_per_core_hour"),
    ({"price_per_gpu_hour": "cheap"}, "price_per_gpu_hour"),
    ({"price_per_core_hour": True}, "price_per_core_hour"),
])
def test_bad_prices_are_refused_naming_the_param(params, field):
    with pytest.raises(ConfigError, match=f"^{field}=.*must be a number >= 0"):
        RunConfig.from_params(params)


def test_prices_are_empty_by_default():
    config = RunConfig.from_params({})
    assert config.prices() == Prices(None, None)


def _ok(server: str, rps: float, p99: float, cpu_pct: float, load: float, price: float | None = None) -> dict:
    """An ok row of a report, its cost columns as the session fills them."""
    row = {"run_id": "r", "model": "mlp", "format": "onnx", "server": server, "launcher": "process", "device": "cpu",
           "batch_size": 1, "mode": "concurrency", "load": load, "throughput_rps": rps, "throughput_sps": rps,
           "latency_ms_p50": p99 / 2, "latency_ms_p99": p99, "error_rate": 0.0, "server_cpu_pct": cpu_pct,
           "server_rss_mb": 100.0, "stable": True, "cv": 0.02, "status": "ok", "schema_version": "1.7",
           "server_cpu_us_per_request": cpu_pct / 100.0 / rps * 1e6, **decided_claims(p99)}
    row.update(cost_fields(row, Prices(per_core_hour=price)))
    return row


def test_the_recommendation_names_the_cheapest_within_the_bound_beside_the_fastest():
    from tasks.report.recommend import recommend

    rows = [_ok("triton", 2000.0, 40.0, 200.0, 8.0),  # fastest: 1 core-s per 1,000
            _ok("custom", 1000.0, 30.0, 50.0, 4.0),  # cheapest: 0.5 core-s per 1,000
            _ok("custom", 1500.0, 300.0, 60.0, 8.0)]  # cheaper still (0.4) but p99 beyond 50 ms
    record = next(r for r in recommend(rows, (50.0,)))
    assert record["best"]["stack"] == "triton/onnx"
    assert record["cost_basis"] == "server_core_s_per_1k"
    assert record["cheapest"]["stack"] == "custom/onnx" and record["cheapest"]["load"] == 4.0
    assert record["cheapest_runner_up"]["stack"] == "triton/onnx"
    assert record["cheapest_margin_pct"] == pytest.approx(100.0)  # triton costs twice as much
    unbounded = next(r for r in recommend(rows, (None,)))
    assert unbounded["cheapest"]["load"] == 8.0  # without a bound, the cheaper, slower point counts


def test_with_prices_the_report_ranks_and_draws_the_price_of_a_million():
    import re

    from tasks.core.results import to_frame, to_parquet_bytes
    from tasks.report.page import PublishedRun, render_report

    rows = [_ok("triton", 2000.0, 40.0, 200.0, 8.0, price=0.036), _ok("custom", 1000.0, 30.0, 50.0, 4.0, price=0.036)]
    run = {"run_id": "r", "logical_date": "2026-12-02T02:00:00+00:00", "status": "complete",
           "provenance": {"config": {"p99_bound_ms": 50.0}}}
    files = {"results.parquet": to_parquet_bytes(to_frame(rows)), "validation.json": b'{"success": true}'}
    page = render_report(PublishedRun.from_files(files, run))
    table = re.search(r"<table class=recommendation>.*?</table>", page, re.S).group(0)
    assert "cheapest stack" in table and "price / 1M inferences" in table
    chart = re.search(r"<svg[^>]*data-plot='cost-at-bound'.*?</svg>", page, re.S).group(0)
    assert "within 50 ms" in chart
    # custom: 0.5 core-s per 1,000 = 500 core-s per million = 0.005 at 0.036 per core-hour; triton twice that
    assert re.findall(r"data-series='([^']+)'", chart) == ["custom/onnx", "triton/onnx"]
    assert ">0.00500<" in chart and ">0.0100<" in chart


def test_validation_refuses_cost_figures_that_cannot_be():
    from tasks.core.results import empty_row, to_frame
    from tasks.validate.expectations import validate_run

    def row(**fields) -> dict:
        r = empty_row()
        r.update(run_id="r", schema_version="1.7", model="mlp", format="onnx", server="custom", launcher="process",
                 device="cpu", batch_size=1, mode="concurrency", load=1.0, config_id="default",
                 protocol="kserve_v2_rest", wire="json", status="failed", reason="x")
        r.update(fields)
        return r

    def cost_failures(rows: list[dict]) -> set[str]:
        failed = validate_run(to_frame(rows), [], len(rows))["failed_expectations"]
        return {f.split()[-1] for f in failed if any(c in f for c in ("_per_1k", "price"))}

    good = [row(server_core_s_per_1k=5.0, price_per_core_hour=0.036, price_per_million=0.05),
            row(load=2.0, device="gpu", server_core_s_per_1k=1.0, gpu_s_per_1k=1.0)]
    assert cost_failures(good) == set()
    bad = [row(server_core_s_per_1k=-1.0),
           row(load=2.0, gpu_s_per_1k=1.0),  # GPU-seconds on a CPU row
           row(load=3.0, server_core_s_per_1k=1.0, price_per_million=0.1)]  # a price without a core-hour's price
    assert cost_failures(bad) == {"server_core_s_per_1k", "gpu_s_per_1k", "price_per_million"}


def test_the_report_tables_each_stacks_cost_within_each_bound():
    import re

    from tasks.core.results import to_frame, to_parquet_bytes
    from tasks.report.page import PublishedRun, render_report

    rows = [_ok("triton", 2000.0, 40.0, 200.0, 8.0), _ok("custom", 1000.0, 30.0, 50.0, 4.0),
            _ok("custom", 1500.0, 300.0, 60.0, 8.0)]
    run = {"run_id": "r", "logical_date": "2026-12-02T02:00:00+00:00", "status": "complete",
           "provenance": {"config": {"p99_bound_ms": 50.0}}}
    files = {"results.parquet": to_parquet_bytes(to_frame(rows)), "validation.json": b'{"success": true}'}
    table = re.search(r"<table class=cost>.*?</table>", render_report(PublishedRun.from_files(files, run)),
                      re.S).group(0)
    assert re.findall(r"<th>([^<]+)</th>", table) == ["≤ 10 ms", "≤ 50 ms", "≤ 200 ms", "no bound"]
    custom = re.search(r"<tr><td class=l>custom/onnx</td>(.*?)</tr>", table).group(1)
    # nothing within 10 ms; within 50 and 200 ms its 30 ms point (0.5 core-s); without a bound the 0.4 core-s one
    cells = re.findall(r"<td>(.*?)</td>", custom)
    assert cells[0] == "–"
    assert [c.split("<br>")[0] for c in cells[1:]] == ["0.500 core-s", "0.500 core-s", "0.400 core-s"]
    assert "/ 1M" not in table  # no prices, no money
