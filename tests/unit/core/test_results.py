"""The results contract: each column declared once (type, unit, meaning, since), one Arrow type per column in every
file whatever the rows hold, older files read back with the contract's types, and the data dictionary
(docs/results-reference.md) equal to what the contract generates."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.cli.main import main
from tasks.core.metrics import METRICS
from tasks.core.results import (
    ARROW_TYPE_NAMES,
    COLUMNS,
    COLUMNS_SINCE,
    CONTRACT,
    OLD_RUN_KEY,
    PARTITIONS,
    REFERENCE_COMMAND,
    REFERENCE_PAGE,
    SCHEMA_CHANGES,
    SCHEMA_VERSION,
    arrow_schema,
    conform,
    read_parquet_bytes,
    reference_markdown,
    to_frame,
    to_parquet_bytes,
    version_tuple,
)
from tests.dagrun import REPO


def test_the_reference_page_is_the_contract():
    page = (REPO / REFERENCE_PAGE).read_text(encoding="utf-8")
    assert page == reference_markdown(), (f"{REFERENCE_PAGE} differs from the contract in tasks/core/results.py: "
                                          f"run `{REFERENCE_COMMAND}` and commit the page")


def test_every_column_is_declared_once_with_type_unit_meaning_and_version():
    names = [c.name for c in CONTRACT]
    assert len(names) == len(set(names)) and list(COLUMNS) == names
    for column in CONTRACT:
        assert column.dtype in ARROW_TYPE_NAMES and column.meaning and column.group, column
        assert column.since in SCHEMA_CHANGES and version_tuple(column.since) <= version_tuple(SCHEMA_VERSION), column
        if column.name in METRICS:  # a metric's unit is the metrics table's, never a second spelling of it
            assert column.unit == METRICS[column.name].unit, column
    assert max(SCHEMA_CHANGES, key=version_tuple) == SCHEMA_VERSION
    assert COLUMNS_SINCE["1.1"] == ("protocol",) and "suite" in COLUMNS_SINCE["1.3"]
    assert "1.4" not in COLUMNS_SINCE  # 1.4 changed the layout and the types, not the columns


def test_no_partition_key_repeats_a_column():
    assert not set(PARTITIONS) & set(COLUMNS), "a hive-partitioned reader would replace or refuse that column"
    assert OLD_RUN_KEY in COLUMNS  # why the old layout had to go


def test_parquet_has_the_contracts_schema_whatever_the_rows_hold():
    full = {"run_id": "manual__2026-12-01T22:29:53.632483+00:00", "batch_size": 1, "requests": 10, "stable": True,
            "load": 2.0, "status": "ok", "gpu_name": "H200"}
    empty = {"run_id": "scheduled__2026-12-02T02:00:00+00:00", "status": "failed"}  # every figure null
    schemas = []
    for rows in ([full], [empty], [full, empty]):
        schema = pq.read_schema(io.BytesIO(to_parquet_bytes(to_frame(rows))))
        schemas.append(schema.remove_metadata())
    assert all(s.equals(arrow_schema()) for s in schemas)
    types = {f.name: f.type for f in arrow_schema()}
    assert types["run_id"] == pa.string() and types["requests"] == pa.int64() and types["stable"] == pa.bool_()
    assert types["load"] == pa.float64() and pa.large_string() not in types.values()


def test_older_files_read_back_with_the_contracts_types():
    """A file of schema 1.2 as pandas inferred it: strings large_string, an integer column with a null as double,
    an all-null column as null, the columns of 1.3 missing."""
    inferred = pd.DataFrame({"run_id": ["a", "b"], "requests": [10, None], "windows": [None, None],
                             "stable": [True, None], "status": ["ok", "failed"], "cpu_count": [2.0, np.nan]})
    data = inferred.to_parquet(index=False)
    assert pq.read_schema(io.BytesIO(data)).field("requests").type == pa.float64()
    frame = read_parquet_bytes(data)
    assert list(frame.columns) == list(COLUMNS)
    assert frame.dtypes.astype(str).to_dict() == COLUMNS
    assert frame["requests"].tolist()[0] == 10 and frame["requests"].isna().tolist() == [False, True]
    assert frame["suite"].isna().all()
    assert pq.read_schema(io.BytesIO(to_parquet_bytes(frame))).remove_metadata().equals(arrow_schema())


def test_conform_keeps_columns_outside_the_contract_and_names_a_value_it_cannot_read():
    frame = conform(pd.DataFrame({"status": ["ok"], "note": ["x"]}))
    assert list(frame.columns) == [*COLUMNS, "note"]
    with pytest.raises(ValueError, match="results column batch_size: .* Int64"):
        conform(pd.DataFrame({"batch_size": [1.5]}))


def test_the_reference_command_writes_and_checks_the_page(tmp_path, capsys):
    out = tmp_path / "reference.md"
    assert main(["reference", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == reference_markdown()
    assert main(["reference", "--out", str(out), "--check"]) == 0
    out.write_text("stale", encoding="utf-8")
    assert main(["reference", "--out", str(out), "--check"]) == 1
    assert "differs from the results contract" in capsys.readouterr().out
