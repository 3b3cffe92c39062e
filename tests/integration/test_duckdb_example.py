"""The README's DuckDB example, run as written against the embedded S3: no extension is downloaded."""

from __future__ import annotations

import re

from tasks.store.history import duckdb_connection
from tasks.store.s3 import S3Store
from tests.dagrun import REPO
from tests.integration.test_cli_store import publish

README_BUCKET_PREFIX = "s3://serving-eval/serving-eval/"


def readme_query() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("The same with DuckDB"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def test_readme_duckdb_query_reads_the_store_offline(embedded_s3, bucket, tmp_path):
    conn = embedded_s3.connection("serving_eval_s3")
    publish(conn, bucket, "night1", 27, {"triton": 1000.0, "custom": 500.0}, tmp_path=tmp_path)
    publish(conn, bucket, "night2", 28, {"triton": 1100.0, "custom": 450.0}, tmp_path=tmp_path)
    query = readme_query()
    assert "INSTALL" not in query.upper() and README_BUCKET_PREFIX in query
    con = duckdb_connection(S3Store(bucket, "eval", conn))
    frame = con.sql(query.replace(README_BUCKET_PREFIX, f"s3://{bucket}/eval/")).df()
    assert [(str(r.dt)[:10], r.server, r.rps) for r in frame.itertuples()] == [
        ("2026-11-27", "triton", 1000.0), ("2026-11-27", "custom", 500.0),
        ("2026-11-28", "triton", 1100.0), ("2026-11-28", "custom", 450.0)]
    loaded = con.sql("SELECT loaded FROM duckdb_extensions() WHERE extension_name = 'httpfs'").fetchall()
    assert loaded in ([], [(False,)])  # the query went through s3fs, not DuckDB's httpfs extension
