"""The validation suite (tasks/validate/expectations.py): overload rows held to their own columns."""

from __future__ import annotations


def test_validation_holds_overload_rows_to_their_own_columns():
    from tasks.core.results import empty_row, to_frame
    from tasks.validate.expectations import validate_run

    def row(**fields) -> dict:
        r = empty_row()
        r.update(run_id="r", schema_version="1.7", model="mlp", format="onnx", server="custom", launcher="process",
                 device="cpu", batch_size=1, mode="overload", load=3.0, config_id="default",
                 protocol="kserve_v2_rest", wire="json", status="ok", host_state="{}", first_correct_s=1.0,
                 capabilities="{}", overload_factor=3.0, capacity_rps=100.0, goodput_rps=95.0, goodput_pct=95.0,
                 burst_p99_ms=900.0, pre_burst_p99_ms=3.0, recovery_s=2.0, recovered=True, overload_class="queues",
                 overload="{}", requests=600, errors=0, error_rate=0.0)
        r.update(fields)
        return r

    def failures(rows: list[dict]) -> set[str]:
        return set(validate_run(to_frame(rows), [], len(rows))["failed_expectations"])

    assert failures([row()]) == set()  # no steady throughput or latency asked of it
    assert failures([row(overload_class="melts", throughput_rps=5.0, goodput_rps=None)]) == {
        "results: expect_column_values_to_be_in_set overload_class",
        "results: expect_column_values_to_be_null throughput_rps",
        "results: expect_column_values_to_not_be_null goodput_rps",
    }
