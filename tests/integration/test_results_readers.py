"""The published results read the way downstream users read them, against the moto S3 server: several real runs
(Airflow's run ids with ':' and '+', different dates, one run still in the folder layout of before schema 1.4,
written with the types pandas inferred), read back by the project's readers, then, once a publish has moved the old
run, by DuckDB (hive partitioning on), pyarrow.dataset (hive) and pandas: every run_id is its manifest's, every
row is there, and every file has the contract's Arrow schema.

Runs are published by the pipeline's own publish step from rows built from the contract (no server runs).
"""

from __future__ import annotations

import hashlib
import io
import json

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from tasks.cli.main import main
from tasks.core.results import OLD_RUN_KEY, SCHEMA_VERSION, arrow_schema, empty_row, frame_records
from tasks.pipeline import publish_step
from tasks.report.run_index import list_runs, read_report
from tasks.store.history import duckdb_connection, find_run, list_manifests, read_runs, s3_filesystem
from tasks.store.layout import run_prefix, safe_run_id
from tasks.store.migrate import LEFT, migrate_layout
from tasks.store.publish import MANIFEST, content_type
from tasks.store.s3 import S3Store
from tests.dagrun import fast_conf, verify_manifest

HOST = {"hostname": "h", "cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None, "gpu_driver": None}
OLD_RUN = "manual__2026-12-01T22:29:53.632483+00:00"  # the run id: DuckDB saw its folder's safe copy
RUNS = {  # run id -> (logical date, rows)
    "scheduled__2026-11-27T02:00:00+00:00": ("2026-11-27T02:00:00+00:00", 1),
    "scheduled__2026-11-28T02:00:00+00:00": ("2026-11-28T02:00:00+00:00", 2),
    OLD_RUN: ("2026-12-01T22:29:53.632483+00:00", 3),
}
BACKFILL = ("backfill__2026-11-29T02:00:00+00:00", "2026-11-29T02:00:00+00:00", 2)  # published after: moves OLD_RUN


def rows_of(run_id: str, logical_date: str, n: int) -> list[dict]:
    """`n` rows of the contract: ok ones with figures, and (from two rows on) a failed one without any."""
    rows = []
    for i in range(n):
        row = empty_row()
        row.update(run_id=run_id, logical_date=logical_date, schema_version=SCHEMA_VERSION, pipeline_version="0.1.0",
                   git_sha="abc", suite="smoke", model="mlp", format="onnx", server="custom", launcher="process",
                   device="cpu", batch_size=1, mode="concurrency", load=float(i + 1), protocol="kserve_v2_rest",
                   config_id="default", **HOST)
        if i == 1:
            row.update(status="failed", reason="the server died")
        else:
            row.update(status="ok", requests=100 + i, errors=0, error_rate=0.0, throughput_rps=1000.0 + i,
                       latency_ms_p50=1.0, latency_ms_p99=2.0, cv=0.01, stable=True, windows=3, startup_s=1.0,
                       server_cpu_pct=95.0, server_rss_mb=200.0, server_version="1")
        rows.append(row)
    return rows


def publish(conn, bucket: str, tmp_path, run_id: str, logical_date: str, n: int) -> dict:
    """One run through the pipeline's publish step (migrating what the store holds in the old layout first)."""
    rows = rows_of(run_id, logical_date, n)
    cells = [{k: r[k] for k in ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load",
                                "protocol")} | {"cell_id": f"mlp.onnx.custom.c{r['load']:g}"} for r in rows]
    run_dir = tmp_path / safe_run_id(run_id)
    (run_dir / "logs").mkdir(parents=True)
    planned = {"config": fast_conf(bucket), "conversions": [{"model": "mlp", "format": "onnx"}],
               "sessions": [{"session_id": c["cell_id"], "cells": [c]} for c in cells],
               "run": {"run_id": run_id, "logical_date": logical_date, "run_dir": str(run_dir), "host": HOST,
                       "code": {"pipeline_version": "0.1.0", "git_sha": "abc"}}}
    return publish_step(planned, {"rows": rows, "timelines": []}, [], {"success": True, "failed_expectations": []},
                        conn, {"records": []})


def into_old_layout(store: S3Store, run_id: str, logical_date: str) -> dict:
    """Put a published run where and how a version before schema 1.4 published it: under `run_id=<safe id>/`, its
    results.parquet with the types pandas inferred from the rows (strings large_string, integers with a null as
    double, an all-null column as null), its manifest (schema 1.3) and, when it was the latest, latest.json."""
    new = store.get_json(f"{run_prefix(store, logical_date, run_id)}/{MANIFEST}")
    old_prefix = run_prefix(store, logical_date, run_id, key=OLD_RUN_KEY)
    objects = []
    for obj in new["objects"]:
        data = store.get(obj["key"])
        if obj["name"] == "results.parquet":
            inferred = pd.DataFrame([{**r, "schema_version": "1.3"} for r in frame_records(pd.read_parquet(
                io.BytesIO(data)))])
            data = inferred.to_parquet(index=False)
        key = f"{old_prefix}/{obj['name']}"
        objects.append({**obj, "key": key, "size_bytes": len(data),
                        "sha256": store.put_bytes(key, data, content_type(obj["name"]))})
    store.delete(store.list_keys(new["prefix"] + "/"))
    old = {**new, "schema_version": "1.3", "prefix": old_prefix, "objects": objects}
    store.put_bytes(f"{old_prefix}/{MANIFEST}", json.dumps(old, indent=2, sort_keys=True).encode(), "application/json")
    latest = store.get_json(store.key("latest.json"))
    if latest["run_id"] == run_id:
        store.put_bytes(store.key("latest.json"), json.dumps({**latest, "manifest": f"{old_prefix}/{MANIFEST}",
                                                               "schema_version": "1.3"}).encode())
    return old




def expected_rows() -> dict[str, int]:
    return {**{run_id: n for run_id, (_, n) in RUNS.items()}, BACKFILL[0]: BACKFILL[2]}


def result_files(store: S3Store) -> list[str]:
    return sorted(s3_filesystem(store).glob(f"{store.bucket}/{store.key('runs')}/*/*/results.parquet"))


def test_every_reader_sees_every_run_with_its_real_id(store_env, bucket, tmp_path, capsys):
    conn, store, opts = store_env
    for run_id, (logical_date, n) in RUNS.items():
        publish(conn, bucket, tmp_path, run_id, logical_date, n)
    old = into_old_layout(store, OLD_RUN, RUNS[OLD_RUN][0])
    old_schema = pq.read_schema(io.BytesIO(store.get(f"{old['prefix']}/results.parquet")))
    assert old["prefix"].endswith(f"/dt=2026-12-01/run_id={safe_run_id(OLD_RUN)}")
    assert old_schema.field("run_id").type == pa.large_string() and old_schema.field("requests").type == pa.float64()
    assert old_schema.field("restarts").type == pa.null()  # what the contract's schema now prevents

    # The project's readers, before any move: every run, the old one included
    manifests = {m["run_id"]: m for m in list_manifests(store)}
    assert set(manifests) == set(RUNS) and manifests[OLD_RUN]["prefix"] == old["prefix"]
    frame = read_runs(store)
    assert frame.groupby("run_id").size().to_dict() == {run_id: n for run_id, (_, n) in RUNS.items()}
    assert str(frame["requests"].dtype) == "Int64" and str(frame["run_id"].dtype) == "string"
    assert {r.run_id: r.report_path.rsplit("/", 2)[1] for r in list_runs(store)}[OLD_RUN] == \
        f"{OLD_RUN_KEY}={safe_run_id(OLD_RUN)}"
    for ref in (OLD_RUN, f"dt=2026-12-01/run_id={safe_run_id(OLD_RUN)}", f"dt=2026-12-01/run={safe_run_id(OLD_RUN)}"):
        assert find_run(store, ref)["run_id"] == OLD_RUN, ref
    assert find_run(store, "latest")["prefix"] == old["prefix"]
    capsys.readouterr()
    assert main(["runs", "--json", *opts]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == list(RUNS)
    assert main(["report", OLD_RUN, "--out", str(tmp_path / "old.html"), *opts]) == 0
    assert f"for run {OLD_RUN}" in capsys.readouterr().out

    # The next night publishes (a backfill: latest.json stays with OLD_RUN) and moves the old run first
    publish(conn, bucket, tmp_path, *BACKFILL)
    moved = store.get_json(f"{run_prefix(store, RUNS[OLD_RUN][0], OLD_RUN)}/{MANIFEST}")
    assert moved["moved"]["from"] == old["prefix"] and moved["run_id"] == OLD_RUN
    verify_manifest(store, moved)  # keys, sizes and SHA-256 of the copies
    assert not store.list_keys(old["prefix"] + "/")
    copies = {o["name"]: o for o in moved["objects"]}
    assert {n: o["sha256"] for n, o in copies.items() if n != "results.parquet"} == {
        o["name"]: o["sha256"] for o in old["objects"] if o["name"] != "results.parquet"}  # byte for byte
    assert store.get_json(store.key("latest.json"))["manifest"] == f"{moved['prefix']}/{MANIFEST}"
    expected = expected_rows()
    manifests = {m["run_id"]: m for m in list_manifests(store)}
    assert set(manifests) == set(expected)

    # One layout, one schema: every file has the contract's Arrow schema
    files = result_files(store)
    fs = s3_filesystem(store)
    assert len(files) == len(expected) and all("/run=" in f for f in files)
    for path in files:
        with fs.open(path, "rb") as handle:
            assert pq.read_schema(handle).remove_metadata().equals(arrow_schema()), path

    # DuckDB, the README's way: hive partitioning on
    con = duckdb_connection(store)
    got = con.sql(f"SELECT run_id, CAST(dt AS VARCHAR) AS dt, run, count(*) AS n FROM read_parquet("
                  f"'s3://{bucket}/eval/runs/*/*/results.parquet', hive_partitioning = true) GROUP BY ALL").df()
    assert {r.run_id: r.n for r in got.itertuples()} == expected
    for r in got.itertuples():
        assert (r.dt, r.run) == (manifests[r.run_id]["logical_date"][:10], safe_run_id(r.run_id))

    # pyarrow.dataset with hive partitioning: opens the same files without an error
    dataset = ds.dataset(files, filesystem=fs, format="parquet", partitioning="hive")
    assert dataset.schema.field("run_id").type == pa.string() and "run" in dataset.schema.names
    table = dataset.to_table()
    assert pd.Series(table.column("run_id").to_pylist()).value_counts().to_dict() == expected

    # pandas, over the list of files (pyarrow underneath, hive partitioning by default)
    frame = pd.read_parquet(files, filesystem=fs)
    assert frame.groupby("run_id").size().to_dict() == expected
    assert {str(frame[c].dtype) for c in ("requests", "restarts", "cpu_count")} == {"Int64"}

    # The project's readers after the move: the same runs, the old reference still resolves
    assert read_runs(store).groupby("run_id").size().to_dict() == expected
    assert find_run(store, f"dt=2026-12-01/run_id={safe_run_id(OLD_RUN)}")["prefix"] == moved["prefix"]
    old_link = read_report(store, "dt=2026-12-01", f"run_id={safe_run_id(OLD_RUN)}")
    assert old_link == store.get(copies["report.html"]["key"])


class FailingOn:
    """The real store, but `method` breaks after `n` calls, as a killed worker or a flaky network would."""

    def __init__(self, store: S3Store, method: str, n: int) -> None:
        self._store, self._method, self._left = store, method, n

    def __getattr__(self, name):
        attr = getattr(self._store, name)
        if name != self._method:
            return attr

        def call(*args, **kwargs):
            if self._left == 0:
                raise ConnectionError(f"{name} interrupted")
            self._left -= 1
            return attr(*args, **kwargs)

        return call


def test_migrate_is_safe_to_interrupt_and_to_run_again(store_env, bucket, tmp_path, capsys):
    conn, store, opts = store_env
    for run_id, (logical_date, n) in RUNS.items():
        publish(conn, bucket, tmp_path, run_id, logical_date, n)
    old = into_old_layout(store, OLD_RUN, RUNS[OLD_RUN][0])
    new_prefix = run_prefix(store, RUNS[OLD_RUN][0], OLD_RUN)

    capsys.readouterr()
    assert main(["migrate", "--dry-run", *opts]) == 0
    assert f"would move run {OLD_RUN}: {old['prefix']}/ -> {new_prefix}/" in capsys.readouterr().out
    assert store.list_keys(old["prefix"] + "/") and not store.list_keys(new_prefix + "/")

    # Killed while copying: nothing is visible in the new folder, the run is read where it was
    [move] = migrate_layout(FailingOn(store, "put_bytes", 3))
    assert move.action == LEFT and "interrupted" in move.note
    assert store.list_keys(new_prefix + "/") and not store.exists(f"{new_prefix}/{MANIFEST}")
    assert {m["run_id"]: m["prefix"] for m in list_manifests(store)}[OLD_RUN] == old["prefix"]

    # Killed while deleting the old folder: the run is in both layouts, readers read the new one, once
    [move] = migrate_layout(FailingOn(store, "delete", 1))  # the new folder's leftovers go; the old folder's not
    assert move.action == LEFT and store.exists(f"{old['prefix']}/{MANIFEST}") and store.exists(
        f"{new_prefix}/{MANIFEST}")
    assert [m["prefix"] for m in list_manifests(store) if m["run_id"] == OLD_RUN] == [new_prefix]
    assert find_run(store, "latest")["prefix"] == new_prefix  # repointed before anything was deleted
    assert read_runs(store).groupby("run_id").size().to_dict()[OLD_RUN] == RUNS[OLD_RUN][1]

    # Run again: what is left of the old folder goes; then nothing is left to do
    assert main(["migrate", *opts]) == 0
    out = capsys.readouterr().out
    assert f"cleaned run {OLD_RUN}'s old folder {old['prefix']}/" in out and "1 old-layout folders moved" in out
    assert not store.list_keys(old["prefix"] + "/")
    verify_manifest(store, store.get_json(f"{new_prefix}/{MANIFEST}"))
    assert main(["migrate", *opts]) == 0
    assert "nothing to move" in capsys.readouterr().out


def test_migrate_moves_what_it_can_and_says_what_it_leaves(store_env, bucket, tmp_path, capsys):
    conn, store, opts = store_env
    publish(conn, bucket, tmp_path, "night1", "2026-11-27T02:00:00+00:00", 2)
    publish(conn, bucket, tmp_path, "night2", "2026-11-28T02:00:00+00:00", 1)
    into_old_layout(store, "night1", "2026-11-27T02:00:00+00:00")
    odd = into_old_layout(store, "night2", "2026-11-28T02:00:00+00:00")
    # a file no version of the project wrote (a column outside the contract): rewriting it would drop the column
    extra = pd.DataFrame({"run_id": ["night2"], "status": ["ok"], "my_note": ["kept"]}).to_parquet(index=False)
    parquet = next(o for o in odd["objects"] if o["name"] == "results.parquet")
    store.put_bytes(parquet["key"], extra)
    odd["objects"] = [{**o, "size_bytes": len(extra), "sha256": hashlib.sha256(extra).hexdigest()}
                      if o is parquet else o for o in odd["objects"]]
    store.put_bytes(f"{odd['prefix']}/{MANIFEST}", json.dumps(odd).encode())
    # a publish of an older version still under way: no manifest yet
    half = "eval/runs/dt=2026-11-30/run_id=half"
    store.put_bytes(f"{half}/results.parquet", extra)

    capsys.readouterr()
    assert main(["migrate", *opts]) == 1
    out = capsys.readouterr().out
    assert "moved run night1" in out and "my_note" in out and "no manifest.json" in out
    assert "1 old-layout folders moved or deleted, 2 left" in out
    assert store.exists(f"{odd['prefix']}/{MANIFEST}") and store.exists(f"{half}/results.parquet")
    assert {m["run_id"]: m["prefix"].rsplit("/", 1)[1].split("=")[0] for m in list_manifests(store)} == {
        "night1": "run", "night2": OLD_RUN_KEY}
    assert [m.action for m in migrate_layout(store)] == [LEFT, LEFT]  # nothing else to move, nothing lost


def test_a_run_published_again_in_the_new_layout_replaces_its_old_folder(store_env, bucket, tmp_path):
    """A retry by this version of a run an older version had published: the new folder wins, the old one goes."""
    conn, store, _ = store_env
    publish(conn, bucket, tmp_path / "a", "night1", "2026-11-27T02:00:00+00:00", 1)
    old = into_old_layout(store, "night1", "2026-11-27T02:00:00+00:00")
    summary = publish(conn, bucket, tmp_path / "b", "night1", "2026-11-27T02:00:00+00:00", 2)
    assert summary["prefix"] == run_prefix(store, "2026-11-27", "night1")
    assert not store.list_keys(old["prefix"] + "/")  # moved by the publish, then rewritten by it
    assert read_runs(store).groupby("run_id").size().to_dict() == {"night1": 2}
    assert migrate_layout(store) == []
