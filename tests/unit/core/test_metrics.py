"""The metrics table: each metric's unit and good direction, read by reports and regression checks."""

from __future__ import annotations

import pytest

from tasks.core.metrics import bad_sign


def test_bad_sign_reads_the_metrics_table_and_refuses_an_unknown_metric() -> None:
    assert bad_sign("throughput_rps") == -1  # a fall is bad
    assert bad_sign("latency_ms_p99") == 1  # a rise is bad
    with pytest.raises(ValueError, match="'no_such_metric'"):
        bad_sign("no_such_metric")
