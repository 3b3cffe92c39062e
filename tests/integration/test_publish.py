"""Publishing to a real S3 endpoint over HTTP (moto's server): layout, retries, latest pointer, store errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

from tasks.core.errors import StoreError
from tasks.runtimes.ports import free_port
from tasks.store.history import list_manifests, read_runs
from tasks.store.publish import publish_run
from tasks.store.s3 import ConnectionFields, S3Store
from tests.dagrun import verify_manifest

PROVENANCE = {"git_sha": "abc", "host": {"hostname": "h"}}


def results_csv(run: str, rows: int) -> bytes:
    return ("run_id,value\n" + "".join(f"{run},{i}\n" for i in range(rows))).encode()


@pytest.fixture()
def store(embedded_s3, bucket) -> S3Store:
    return S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))


class FailingAfter:
    """The real store, but the upload breaks after `n` objects, as a killed worker or a flaky network would."""

    def __init__(self, store: S3Store, n: int) -> None:
        self._store, self._left = store, n

    def put_bytes(self, key, data, content_type="application/octet-stream"):
        if self._left == 0:
            raise ConnectionError("upload interrupted")
        self._left -= 1
        return self._store.put_bytes(key, data, content_type)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_publish_layout_checksums_and_encryption(store):
    manifest = publish_run(store, run_id="manual__1", logical_date="2026-11-01T02:00:00+00:00",
                           files={"results.csv": results_csv("r1", 3), "logs/a.log": b"log"}, status="complete",
                           provenance=PROVENANCE)
    assert manifest["prefix"] == "eval/runs/dt=2026-11-01/run=manual__1"
    # Every object read back has the manifest's size and SHA-256. (Each upload also carries its SHA-256 in
    # x-amz-checksum-sha256 for S3 to verify; moto ignores that header, so this test cannot show S3 refusing.)
    verify_manifest(store, manifest)
    head = store.client.head_object(Bucket=store.bucket, Key=f"{manifest['prefix']}/results.csv")
    assert head["ServerSideEncryption"] == "AES256"
    latest = store.get_json("eval/latest.json")
    assert latest["run_id"] == "manual__1" and latest["manifest"].endswith("manifest.json")


def test_republish_after_an_interrupted_attempt_leaves_exactly_the_manifest(store):
    first = {"results.csv": results_csv("r", 5), "logs/attempt1-only.log": b"x", "parity.json": b"[]",
             "results.parquet": b"PAR1"}
    with pytest.raises(ConnectionError):
        publish_run(FailingAfter(store, 2), run_id="r", logical_date="2026-11-02T02:00:00+00:00", files=first,
                    status="complete", provenance=PROVENANCE)
    prefix = "eval/runs/dt=2026-11-02/run=r"
    assert not store.exists(f"{prefix}/manifest.json"), "readers must not see a run without its manifest"
    assert not store.exists("eval/latest.json")

    second = {"results.csv": results_csv("r", 5), "parity.json": b"[]", "results.parquet": b"PAR1"}
    manifest = publish_run(store, run_id="r", logical_date="2026-11-02T02:00:00+00:00", files=second,
                           status="complete", provenance=PROVENANCE)
    verify_manifest(store, manifest)  # attempt 1's extra log is gone, every checksum matches
    assert not store.exists(f"{prefix}/logs/attempt1-only.log")
    rows = store.get(f"{prefix}/results.csv").decode().strip().splitlines()[1:]
    assert len(rows) == 5 and len(set(rows)) == 5  # rewritten, not appended: no duplicate rows


def test_latest_only_moves_forward(store):
    for run, date in (("night2", "2026-11-02"), ("night1-backfill", "2026-11-01")):
        publish_run(store, run_id=run, logical_date=f"{date}T02:00:00+00:00", files={"results.csv": b"a\n"},
                    status="complete", provenance=PROVENANCE)
    assert store.get_json("eval/latest.json")["run_id"] == "night2"
    publish_run(store, run_id="night3", logical_date="2026-11-03T02:00:00+00:00", files={"results.csv": b"a\n"},
                status="partial", provenance=PROVENANCE)
    assert store.get_json("eval/latest.json")["run_id"] == "night3"


def test_kms_encryption_option(embedded_s3, bucket):
    kms = S3Store(bucket, "eval", embedded_s3.connection("c"), sse="aws:kms", kms_key_id="alias/serving-eval")
    kms.put_bytes("eval/x.json", b"{}", "application/json")
    head = kms.client.head_object(Bucket=bucket, Key="eval/x.json")
    assert head["ServerSideEncryption"] == "aws:kms"


def test_read_runs_sees_only_runs_with_a_manifest(store):
    import pandas as pd

    frame = pd.DataFrame({"run_id": ["a"], "status": ["ok"], "throughput_rps": [1.0]})
    buf = frame.to_parquet(index=False)
    publish_run(store, run_id="a", logical_date="2026-11-05T02:00:00+00:00", files={"results.parquet": buf},
                status="complete", provenance=PROVENANCE)
    store.put_bytes("eval/runs/dt=2026-11-06/run=half/results.parquet", buf)  # no manifest: half written
    runs = read_runs(store)
    assert list(runs["run_id"]) == ["a"] and list(runs["dt"]) == ["2026-11-05"]
    assert [m["run_id"] for m in list_manifests(store)] == ["a"]


def test_missing_bucket_is_one_clear_error(embedded_s3):
    store = S3Store("no-such-bucket", "eval", embedded_s3.connection("serving_eval_s3"))
    with pytest.raises(StoreError, match="no-such-bucket.*serving_eval_s3.*does not exist"):
        store.check()


def test_wrong_credentials_are_one_clear_error(tmp_path):
    """A second moto server with authentication on (INITIAL_NO_AUTH_ACTION_COUNT=0) rejects unknown keys."""
    port = free_port()
    moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        conn = ConnectionFields("serving_eval_s3", "AKIAWRONG", "wrong", {"endpoint_url": f"http://127.0.0.1:{port}"})
        with pytest.raises(StoreError, match="serving_eval_s3.*(denied|does not exist)") as err:
            S3Store("results", "eval", conn).check()
        print(f"\n{err.value}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
