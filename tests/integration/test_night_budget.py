"""A night with a budget, as real DAG runs (`dag.test()`) over a store seeded with two earlier nights whose timelines
say what each cell costs: the first run defers exactly the cells the priority order leaves out, publishes why (and
the night each was last measured), and the next run measures the cells that waited first.

The seeded nights say every load point takes 20 s and the session 5 s more, so the fit is the same on any machine
(a real point here takes 2 s; with two seeded nights its median stays 20 s). With a 60 s budget, 54 s is left to
measure after the fixed stages (1 s each on the seeded nights) and the conversion: the answers (closed loop over
binary tensors, the custom service's efficient wire) get 60 % of it first, then the rest by age and class.
"""

from __future__ import annotations

import json

from tasks.core.metadata import collect_host_metadata
from tasks.core.results import to_frame, to_parquet_bytes
from tasks.store.publish import publish_run
from tests.dagrun import NO_CONTROL, fast_conf, read_json_object, read_run

BASE = "mlp.onnx.custom.process.cpu.b1"
CELLS = {f"{BASE}.concurrency1": ("concurrency", 1.0, "json", "kserve_v2_rest"),
         f"{BASE}.concurrency2": ("concurrency", 2.0, "json", "kserve_v2_rest"),
         f"{BASE}.rate20": ("rate", 20.0, "json", "kserve_v2_rest"),
         f"{BASE}.concurrency1.binary": ("concurrency", 1.0, "binary", "kserve_v2_binary"),
         f"{BASE}.concurrency2.binary": ("concurrency", 2.0, "binary", "kserve_v2_binary"),
         f"{BASE}.rate20.binary": ("rate", 20.0, "binary", "kserve_v2_binary")}
POINT_S, OWN_S = 20.0, 5.0


def conf(bucket: str) -> dict:
    return fast_conf(bucket, protocols=["best"], mode="both", concurrencies=[1, 2], rates=[20.0],
                     night_budget_s=60.0, duets=False, **NO_CONTROL)


def seed_night(store, run_id: str, date: str) -> None:
    """A published night of the smoke suite on this host: every cell ok, each point 20 s in its timeline."""
    host = collect_host_metadata()
    rows, events, t = [], {}, 1_000_000.0
    for cell_id, (mode, load, wire, codec) in CELLS.items():
        rows.append({"run_id": run_id, "logical_date": date, "model": "mlp", "format": "onnx", "server": "custom",
                     "launcher": "process", "device": "cpu", "batch_size": 1, "mode": mode, "load": load,
                     "protocol": codec, "wire": wire, "config_id": "default", "status": "ok",
                     "throughput_rps": 100.0 if wire == "binary" else 50.0, **host})
        events[cell_id] = {"load_begin": t, "load_end": t + POINT_S}
        t += POINT_S
    timeline = {"session_id": "mlp.onnx.custom.process.cpu", "server": "custom", "cells": events,
                "task_begin": 1_000_000.0 - OWN_S, "task_end": t}
    stages = {s: {"actual_s": 1.0} for s in ("plan", "validate", "regress_check", "publish")}
    files = {"results.parquet": to_parquet_bytes(to_frame(rows)),
             "plan.json": json.dumps({"config": {"suite": "smoke"}, "sessions": []}).encode(),
             "logs/sessions.json": json.dumps([timeline]).encode(),
             "logs/conversions.json": json.dumps([{"model": "mlp", "format": "onnx", "cache_hit": False,
                                                   "seconds": 1.0}]).encode(),
             "night.json": json.dumps({"stages": stages}).encode()}
    publish_run(store, run_id=run_id, logical_date=date, files=files, status="complete",
                provenance={"config": {"suite": "smoke"}, "host": host})


def night_of(store) -> tuple[dict, set[str], dict[str, dict]]:
    """The latest run's night.json, the cells it measured, and its deferred cells by id."""
    _, manifest = read_run(store)
    night = read_json_object(store, manifest, "night.json")
    plan = read_json_object(store, manifest, "plan.json")
    measured = {c["cell_id"] for s in plan["sessions"] for c in s["cells"]}
    return night, measured, {d["cell_id"]: d for d in night["deferred"]}


def test_a_budgeted_night_defers_what_its_order_leaves_out_and_the_next_measures_it_first(run_dag, bucket, store_for):
    store = store_for(bucket)
    seed_night(store, "seed1", "2026-01-01T02:00:00+00:00")
    seed_night(store, "seed2", "2026-01-02T02:00:00+00:00")

    run_dag(conf(bucket))
    night, measured, deferred = night_of(store)
    # the answers first within their 60 %: one binary point (25 s with the session); then by class, all as old:
    # the second answer (45 s); nothing else fits the 54 s
    assert measured == {f"{BASE}.concurrency1.binary", f"{BASE}.concurrency2.binary"}
    assert set(deferred) == {f"{BASE}.concurrency1", f"{BASE}.concurrency2", f"{BASE}.rate20", f"{BASE}.rate20.binary"}
    assert all(d["last_run_id"] == "seed2" and d["age"] == 1 and "budget" in d["reason"] for d in deferred.values())
    assert night["classes"][f"{BASE}.concurrency1.binary"] == "answers"
    assert night["stages"]["measure"]["actual_s"] is not None and night["elapsed_s"] > 0
    _, manifest = read_run(store)
    assert manifest["status"] == "complete"  # a deferred cell is no failure
    regressions = read_json_object(store, manifest, "regressions.json")
    assert not [r for r in regressions["records"] if r.get("kind") == "missing"]  # nor missing
    report = store.get(f"{manifest['prefix']}/report.html").decode()
    assert "4 cells deferred, coverage every" in report and "measured 1 night ago" in report

    run_dag(conf(bucket))
    night, measured, deferred = night_of(store)
    # tonight the cells that waited are older than the ones measured last night: the oldest, by class, goes first
    assert measured == {f"{BASE}.concurrency1.binary", f"{BASE}.concurrency1"}
    assert deferred[f"{BASE}.concurrency2.binary"]["age"] == 1  # measured last night, it waits now
    assert deferred[f"{BASE}.concurrency2"]["age"] == 2 and deferred[f"{BASE}.concurrency2"]["waited"] == 1
