"""The store failing while a run publishes: retried where it is transient, never a run without its manifest, and a
store away for a while (stopped, for real) loses nothing: waited for, or the results kept for a later publish.

Already handled before this suite (botocore's standard retries, manifest last): the first cases pin it down. On the
old code a store away when publishing began failed `publish` after botocore's retries, and the teardown deleted the
run's work folder, its server logs with it: the night was lost.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tasks.cli.main import main
from tasks.pipeline import UNPUBLISHED_FILE, run_dir, run_pipeline
from tasks.store.embedded_s3 import EmbeddedS3, start_embedded_s3
from tasks.store.history import list_manifests
from tasks.store.publish import publish_run
from tasks.store.s3 import S3Store
from tests.dagrun import load_dag_module, read_json_object, read_run, verify_manifest
from tests.reliability.faults import conf
from tests.reliability.faulty_s3 import FaultyS3Proxy

AWAY_BUCKET = "t-store-away"


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


class StoppableS3:
    """An embedded S3 of its own that keeps its buckets on disk, so that it can be stopped and started again on the
    same port, as a store's host is restarted; the DAG's connection points at it."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.server: EmbeddedS3 = start_embedded_s3(state_dir=state_dir)
        self.port = self.server.port

    def start(self) -> None:
        self.server = start_embedded_s3(self.port, state_dir=self.state_dir)

    def back_after_a_request(self) -> threading.Thread:
        """Stop the store; in the background, once a request has come (and found the port answering nothing: a
        socket that hangs up at once), start it again. No clock: the restart follows the first failed request."""
        self.server.stop()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        listener.settimeout(300)  # a publish that never asks fails the test, not the machine

        def restart() -> None:
            with listener:
                connection, _ = listener.accept()
                connection.close()
            self.start()

        thread = threading.Thread(target=restart, daemon=True)
        thread.start()
        return thread

    def store(self) -> S3Store:
        return S3Store(AWAY_BUCKET, "eval", self.server.connection("serving_eval_s3"))


@pytest.fixture()
def stoppable_s3(airflow_db, tmp_path, monkeypatch):
    s3 = StoppableS3(tmp_path / "s3")
    s3.server.create_bucket(AWAY_BUCKET)
    for key, value in s3.server.airflow_conn_env("serving_eval_s3").items():
        monkeypatch.setenv(key, value)
    yield s3
    s3.server.stop()


@pytest.fixture()
def counted_sessions(monkeypatch) -> list[str]:
    """The server sessions the run measures, counted (each one measured as always)."""
    import tasks.pipeline

    real, measured = tasks.pipeline.measure_session, []

    def measure_session(session, *args, **kwargs):
        measured.append(session.session_id)
        return real(session, *args, **kwargs)

    monkeypatch.setattr(tasks.pipeline, "measure_session", measure_session)
    return measured


def stop_when_publishing_starts(monkeypatch, stop) -> None:
    """`stop()` as the DAG's publish task calls the publish step."""
    import tasks.pipeline

    real = tasks.pipeline.publish_step

    def publish_step(*args, **kwargs):
        stop()
        return real(*args, **kwargs)

    monkeypatch.setattr(tasks.pipeline, "publish_step", publish_step)


def assert_published_whole(store: S3Store, run_id: str, measured: list[str]) -> None:
    """The run is latest, complete and whole, measured once, with its server logs."""
    pointer, manifest = read_run(store)
    assert (pointer["run_id"], manifest["status"]) == (run_id, "complete")
    verify_manifest(store, manifest)
    (session,) = read_json_object(store, manifest, "logs/sessions.json")
    assert measured == [session["session_id"]]  # one session, measured once
    logs = [o for o in manifest["objects"] if o["name"].startswith("logs/") and o["name"].endswith(".log")]
    assert logs and all(o["size_bytes"] > 0 for o in logs), "the server's log is not published"
    assert not run_dir(run_id).exists()  # published: the work folder is gone


def test_a_store_back_within_the_wait_gets_the_same_run_once(stoppable_s3, counted_sessions, monkeypatch):
    """Stopped as publishing starts, started again after the publish step's first request: one complete run."""
    restarted = []
    stop_when_publishing_starts(monkeypatch, lambda: restarted.append(stoppable_s3.back_after_a_request()))
    dag_run = load_dag_module().serving_eval_dag.test(
        run_conf=conf(AWAY_BUCKET, concurrencies=[1], duration_s=1.5, store_wait_s=600))
    assert dag_run.state == "success"
    (thread,) = restarted
    thread.join(timeout=120)
    states = {ti.task_id: (ti.state, ti.try_number) for ti in dag_run.get_task_instances()}
    assert states["publish"] == ("success", 1)  # waited inside the step, not retried by Airflow
    assert_published_whole(stoppable_s3.store(), dag_run.run_id, counted_sessions)


def test_a_store_away_past_the_wait_fails_the_run_and_the_command_publishes_it_later(
        stoppable_s3, counted_sessions, monkeypatch, capfd):
    """Stopped as publishing starts and away past the wait: the run fails naming the store, its results and logs
    stay in the work folder through the teardown, and `python -m tasks.cli publish <run id>` publishes them."""
    stop_when_publishing_starts(monkeypatch, stoppable_s3.server.stop)
    dag_run = load_dag_module().serving_eval_dag.test(
        run_conf=conf(AWAY_BUCKET, concurrencies=[1], duration_s=1.5, store_wait_s=2))
    assert dag_run.state == "failed"
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["publish"] == "failed" and states["sweep_run_leftovers"] == "success"
    out, err = capfd.readouterr()
    endpoint = stoppable_s3.server.endpoint_url
    assert f"result store s3://{AWAY_BUCKET}/eval via connection 'serving_eval_s3' ({endpoint}) did not answer" \
           in out + err
    assert f"`python -m tasks.cli publish {dag_run.run_id}` publishes them" in out + err
    kept = run_dir(dag_run.run_id)
    assert (kept / UNPUBLISHED_FILE).is_file() and list((kept / "logs").glob("*.log"))

    stoppable_s3.start()
    assert main(["publish", dag_run.run_id]) == 0
    assert_published_whole(stoppable_s3.store(), dag_run.run_id, counted_sessions)
