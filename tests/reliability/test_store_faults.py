"""The store failing while a run publishes: retried where it is transient, and never a run without its manifest.

Already handled before this suite (botocore's standard retries, manifest last): these cases pin it down.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tasks.pipeline import run_pipeline
from tasks.store.history import list_manifests
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store
from tests.dagrun import read_run, verify_manifest
from tests.reliability.faults import conf
from tests.reliability.faulty_s3 import FaultyS3Proxy


def _via(proxy: FaultyS3Proxy, conn):
    return replace(conn, extra={**conn.extra, "endpoint_url": proxy.endpoint_url})


def test_every_object_failing_once_is_retried_and_the_published_run_matches_its_manifest(embedded_s3, bucket):
    """Every PUT to the run folder answers 503 once: the run still publishes whole, each object's checksum right."""
    tried: set[str] = set()

    def first_put_fails(request):
        if request.method == "PUT" and "/runs/" in request.path and request.path not in tried:
            tried.add(request.path)
            return 503
        return None

    conn = embedded_s3.connection("serving_eval_s3")
    with FaultyS3Proxy(embedded_s3.port, first_put_fails) as proxy:
        summary, _ = run_pipeline(conf(bucket, concurrencies=[1], duration_s=1.5), run_id="reliability-flaky-store",
                                  logical_date="2026-11-30T02:00:00+00:00", conn=_via(proxy, conn))
    assert summary["status"] == "complete"
    assert len(proxy.failed) >= 8  # results, logs, report, manifest ... each failed once
    store = S3Store(bucket, "eval", conn)
    pointer, manifest = read_run(store)
    assert pointer["run_id"] == "reliability-flaky-store"
    verify_manifest(store, manifest)


def test_a_store_that_refuses_the_manifest_leaves_no_readable_run(embedded_s3, bucket):
    """The objects upload, the manifest never does: readers (through manifests) and latest.json never see it."""
    conn = embedded_s3.connection("serving_eval_s3")
    store = S3Store(bucket, "eval", conn)
    publish_run(store, run_id="reliability-earlier", logical_date="2026-11-29T02:00:00+00:00",
                files={"results.csv": b"a,b\n"}, status="complete", provenance={})

    def manifest_fails(request):
        return 503 if request.method == "PUT" and request.path.split("?")[0].endswith("/manifest.json") else None

    with FaultyS3Proxy(embedded_s3.port, manifest_fails) as proxy:
        broken = S3Store(bucket, "eval", _via(proxy, conn))
        with pytest.raises(Exception, match="ServiceUnavailable|503|max retries"):
            publish_run(broken, run_id="reliability-no-manifest", logical_date="2026-11-30T02:00:00+00:00",
                        files={"results.csv": b"a,b\n", "report.html": b"<html></html>"}, status="complete",
                        provenance={})
    assert len(proxy.failed) >= 2  # retried before giving up
    assert [m["run_id"] for m in list_manifests(store)] == ["reliability-earlier"]
    assert json.loads(store.get(store.key("latest.json")))["run_id"] == "reliability-earlier"
    assert store.list_keys(store.key("runs", "dt=2026-11-30") + "/")  # its objects are there, unlisted: invisible
