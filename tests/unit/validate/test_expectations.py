"""The validation suite (tasks/validate/expectations.py): overload rows held to their own columns; a percentile is a
figure in its interval or a lower bound, never both."""

from __future__ import annotations

from tasks.core.results import SCHEMA_VERSION, empty_row, to_frame
from tasks.validate.expectations import validate_run


def _row(**fields) -> dict:
    """A measured row of one cell of the custom service, keyed and with what every measured row records."""
    r = empty_row()
    r.update(run_id="r", schema_version=SCHEMA_VERSION, model="mlp", format="onnx", server="custom",
             launcher="process", device="cpu", batch_size=1, config_id="default", protocol="kserve_v2_rest",
             workload="fixed", wire="json", status="ok", host_state="{}", first_correct_s=1.0, capabilities="{}",
             errors=0, error_rate=0.0)
    r.update(fields)
    return r


def _failures(rows: list[dict]) -> set[str]:
    return set(validate_run(to_frame(rows), [], len(rows))["failed_expectations"])


def test_validation_holds_overload_rows_to_their_own_columns():
    def row(**fields) -> dict:
        return _row(**{"mode": "overload", "load": 3.0, "overload_factor": 3.0, "capacity_rps": 100.0,
                       "goodput_rps": 95.0, "goodput_pct": 95.0, "burst_p99_ms": 900.0, "pre_burst_p99_ms": 3.0,
                       "recovery_s": 2.0, "recovered": True, "overload_class": "queues", "overload": "{}",
                       "requests": 600, **fields})

    assert _failures([row()]) == set()  # no steady throughput or latency asked of it
    assert _failures([row(overload_class="melts", throughput_rps=5.0, goodput_rps=None)]) == {
        "results: expect_column_values_to_be_in_set overload_class",
        "results: expect_column_values_to_be_null throughput_rps",
        "results: expect_column_values_to_not_be_null goodput_rps",
    }


def test_a_percentile_is_a_figure_in_its_interval_or_a_lower_bound_never_both():
    def row(**fields) -> dict:
        return _row(**{"mode": "concurrency", "load": 1.0, "requests": 30, "throughput_rps": 4.0,
                       "latency_ms_p50": 200.0, "latency_ms_p50_ci_low": 190.0, "latency_ms_p50_ci_high": 215.0,
                       "latency_ms_p99": None, "latency_ms_p99_at_least": 700.0, "latency_ms_max": 700.0,
                       "latency_samples": 30, "p99_bound_verdict": "undecided", **fields})

    assert _failures([row()]) == set()  # 30 requests: no p99, only "at least 700 ms"
    assert _failures([row(latency_ms_p99=700.0)]) == {"results: expect_column_values_to_be_null latency_ms_p99"}
    assert _failures([row(latency_ms_p99_at_least=None)]) == {
        "results: expect_column_values_to_not_be_null latency_ms_p99"}
    assert _failures([row(latency_ms_p50_ci_low=201.0)]) == {
        "results: expect_column_pair_values_a_to_be_greater_than_b latency_ms_p50 >= latency_ms_p50_ci_low"}
    assert _failures([row(latency_samples=None, p99_bound_verdict="maybe")]) == {
        "results: expect_column_values_to_not_be_null latency_samples",
        "results: expect_column_values_to_be_in_set p99_bound_verdict"}
