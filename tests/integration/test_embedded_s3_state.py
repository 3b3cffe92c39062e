"""The embedded S3 with a state folder keeps its buckets and objects across real restarts and crashes."""

from __future__ import annotations

import hashlib
import io
import signal

import pytest
from boto3.s3.transfer import TransferConfig

from tasks.store.embedded_s3 import start_embedded_s3
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store
from tests.dagrun import port_is_free, read_run, verify_manifest


def store_of(s3, bucket: str = "kept") -> S3Store:
    return S3Store(bucket, "eval", s3.connection("serving_eval_s3"))


def test_objects_survive_a_restart_with_their_content_type_and_deletes(tmp_path):
    state = tmp_path / "s3"
    with start_embedded_s3(state_dir=state) as s3:
        s3.create_bucket("kept")
        store = store_of(s3)
        manifest = publish_run(store, run_id="night1", logical_date="2026-11-28T02:00:00+00:00",
                               files={"report.html": b"<h1>one</h1>", "results.csv": b"a,b\n1,2\n"},
                               status="complete", provenance={"config": {"suite": "smoke"}})
        store.put_bytes("eval/scratch/gone.txt", b"deleted before the restart")
        store.put_bytes("eval/scratch/twice.txt", b"first")
        store.put_bytes("eval/scratch/twice.txt", b"second")
        store.delete(["eval/scratch/gone.txt"])
        big = bytes(range(256)) * (11 * 4096)  # 11 MiB: three parts of a multipart upload
        store.client.upload_fileobj(io.BytesIO(big), "kept", "eval/artifacts/big.bin", Config=TransferConfig(
            multipart_threshold=5 * 2**20, multipart_chunksize=5 * 2**20))
        big_etag = store.client.head_object(Bucket="kept", Key="eval/artifacts/big.bin")["ETag"]
        assert big_etag.endswith('-3"')
        s3.create_bucket("emptied")
        s3.create_bucket("removed")
        store.client.delete_bucket(Bucket="removed")
        first_port = s3.port
    assert s3.process.returncode is not None and port_is_free(first_port)

    with start_embedded_s3(state_dir=state) as s3:
        store = store_of(s3)
        pointer, again = read_run(store)
        assert pointer["run_id"] == "night1" and again == manifest
        verify_manifest(store, again)
        head = store.client.head_object(Bucket="kept", Key=f"{manifest['prefix']}/report.html")
        assert head["ContentType"] == "text/html"
        assert store.get("eval/scratch/twice.txt") == b"second"
        assert store.get("eval/artifacts/big.bin") == big
        assert store.client.head_object(Bucket="kept", Key="eval/artifacts/big.bin")["ETag"] == big_etag
        assert not store.exists("eval/scratch/gone.txt")
        buckets = {b["Name"] for b in store.client.list_buckets()["Buckets"]}
        assert buckets == {"kept", "emptied"}
        s3.create_bucket("kept")  # already there: fine
    blobs = {p.name for p in (state / "blobs").iterdir()}
    assert hashlib.sha256(b"first").hexdigest() not in blobs  # a replaced object's old bytes are gone
    assert hashlib.sha256(b"second").hexdigest() in blobs


def test_an_acknowledged_write_survives_a_crash(tmp_path):
    state = tmp_path / "s3"
    s3 = start_embedded_s3(state_dir=state)
    try:
        s3.create_bucket("kept")
        store_of(s3).put_bytes("eval/latest.json", b'{"run_id": "crash"}', "application/json")
    finally:
        s3.process.send_signal(signal.SIGKILL)  # no chance to save anything on the way out
        s3.process.wait()
    (state / "blobs" / ("0" * 64)).write_bytes(b"a blob whose record was never written")
    with start_embedded_s3(state_dir=state) as s3:
        assert store_of(s3).get_json("eval/latest.json") == {"run_id": "crash"}
    assert not (state / "blobs" / ("0" * 64)).exists()


def test_one_server_per_state_folder(tmp_path):
    state = tmp_path / "s3"
    with start_embedded_s3(state_dir=state):
        with pytest.raises(RuntimeError, match="in use by another embedded S3"):
            start_embedded_s3(state_dir=state)


def test_without_a_state_folder_nothing_is_kept(tmp_path):
    with start_embedded_s3() as s3:
        s3.create_bucket("fleeting")
        log_path = s3.log_path
    with start_embedded_s3() as s3:
        assert store_of(s3, "fleeting").client.list_buckets()["Buckets"] == []
    assert not log_path.exists()
