"""The suite's last nights on this host (tasks/plan/past_nights.py), read back from a real S3 endpoint (the embedded
one): only the suite's nights on this host fingerprint, newest first, each with its plan, rows and records."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tasks.core.results import to_frame, to_parquet_bytes
from tasks.plan.past_nights import PastNight, past_nights, published_night
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store

HOST = {"cpu_model": "cpu", "cpu_count": 2, "gpu_name": None}


def publish(store: S3Store, run_id: str, date: str, suite: str, host: dict) -> None:
    row = {"run_id": run_id, "model": "mlp", "status": "ok", "throughput_rps": 10.0}
    files = {"results.parquet": to_parquet_bytes(to_frame([row])), "plan.json": json.dumps({"sessions": []}).encode(),
             "night.json": json.dumps({"deferred": [{"cell_id": "c1"}]}).encode(),
             "regressions.json": json.dumps({"records": [{"kind": "duet", "verdict": "undecided"}]}).encode()}
    publish_run(store, run_id=run_id, logical_date=date, files=files, status="complete",
                provenance={"config": {"suite": suite}, "host": host})


def test_the_suites_nights_on_this_host_newest_first(embedded_s3, bucket):
    store = S3Store(bucket, "eval", embedded_s3.connection("s3"))
    publish(store, "n1", "2026-12-01T02:00:00+00:00", "nightly", HOST)
    publish(store, "n2", "2026-12-02T02:00:00+00:00", "nightly", HOST)
    publish(store, "smoke", "2026-12-02T03:00:00+00:00", "smoke", HOST)  # another suite
    publish(store, "other", "2026-12-02T04:00:00+00:00", "nightly", {**HOST, "cpu_count": 64})  # another host
    publish(store, "later", "2026-12-05T02:00:00+00:00", "nightly", HOST)  # not before tonight
    nights = past_nights(store, "nightly", HOST, before="2026-12-03T02:00:00+00:00")
    assert [n.run_id for n in nights] == ["n2", "n1"]
    assert nights[0].rows[0]["throughput_rps"] == 10.0 and nights[0].deferred_ids == {"c1"}
    assert nights[0].records == [{"kind": "duet", "verdict": "undecided"}]
    assert past_nights(store, "nightly", HOST, before="2026-12-03T02:00:00+00:00", limit=1)[0].run_id == "n2"


def test_a_night_without_a_budget_defers_nothing():
    assert PastNight("r", "d", "complete", {}, []).deferred_ids == set()


def test_publishing_and_the_night_are_timed_to_the_manifest_not_to_night_json():
    # night.json is written before the uploads: its publish figure (0.1 s) stops short of them
    night = {"started_at_s": 1000.0, "publish_begin_s": 1900.0, "elapsed_s": 900.1,
             "stages": {"publish": {"planned_s": 90.0, "actual_s": 0.1}, "measure": {"actual_s": 800.0}}}
    done = published_night(night, datetime.fromtimestamp(1912.5, tz=UTC).isoformat())
    assert done["stages"]["publish"] == {"planned_s": 90.0, "actual_s": 12.5}
    assert done["elapsed_s"] == 912.5 and done["stages"]["measure"] == {"actual_s": 800.0}
    assert published_night({"elapsed_s": 5.0}, "2026-12-07T02:00:00+00:00") == {"elapsed_s": 5.0}  # an older night
