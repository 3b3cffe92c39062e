"""A row's workload: rows before schema 1.9 read the fixed request; a trace's label gives its name to cell ids."""

from tasks.core.results import cell_key
from tasks.core.workloads import FIXED_WORKLOAD, is_fixed_workload, row_workload, workload_tag


def test_a_row_before_1_9_is_the_fixed_request_and_keys_as_one():
    old = {"model": "mlp", "server": "custom", "mode": "rate", "load": 50.0}
    assert row_workload(old) == FIXED_WORKLOAD and is_fixed_workload(old)
    assert cell_key(old) == cell_key({**old, "workload": "fixed"})
    traced = {**old, "mode": "trace", "load": 1.0, "workload": "trace:synthetic-day@552396b410ac"}
    assert not is_fixed_workload(traced) and cell_key(traced)[-1] == "trace:synthetic-day@552396b410ac"


def test_a_traces_tag_is_its_name():
    assert workload_tag("trace:synthetic-day@552396b410ac") == "synthetic-day"
    assert workload_tag(FIXED_WORKLOAD) == "" and workload_tag(None) == ""
