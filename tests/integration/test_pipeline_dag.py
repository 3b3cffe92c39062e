"""Whole DAG runs with `dag.test()` against real runtimes, real server processes and the moto S3 server."""

from __future__ import annotations

import pytest

from tasks.serve.servers import SERVERS, register_server
from tasks.serve.servers.custom import CustomServer
from tests.dagrun import (
    fast_conf,
    port_is_free,
    read_json_object,
    read_run,
    results_frame,
    serving_processes,
    session_temp_dirs,
    verify_manifest,
)

pytestmark = pytest.mark.integration


class TwinCustomServer(CustomServer):
    """A second, real server process, so the order of two server sessions can be observed."""

    name = "custom-twin"


class CrashingCustomServer(CustomServer):
    """The real custom server pointed at a missing model: it exits during start-up, as a broken server does."""

    name = "custom-crashing"

    def run_spec(self, layout, spec, ports):
        return super().run_spec(layout.parent / "no-such-model-dir", spec, ports)


@pytest.fixture()
def registered():
    added = []

    def add(*classes):
        for cls in classes:
            register_server(cls)
            added.append(cls.name)

    yield add
    for name in added:
        SERVERS.pop(name, None)


def assert_nothing_left(temp_before: set[str], timelines: list[dict]) -> None:
    assert serving_processes() == []
    assert session_temp_dirs() - temp_before == set()
    for timeline in timelines:
        for port in timeline.get("ports", {}).values():
            assert port_is_free(port), f"port {port} of {timeline['session_id']} is still bound"


def test_dag_run_publishes_validated_results_one_server_at_a_time(run_dag, registered, bucket, store_for):
    registered(TwinCustomServer)
    temp_before = session_temp_dirs()
    dag_run = run_dag(fast_conf(bucket, servers=["custom", "custom-twin"]))
    assert dag_run.state == "success"

    store = store_for(bucket)
    pointer, manifest = read_run(store)
    assert manifest["status"] == "complete"
    names = {o["name"] for o in manifest["objects"]}
    assert {"results.parquet", "results.csv", "parity.json", "validation.json", "regressions.json",
            "report.html"} <= names
    report = store.get(f"{manifest['prefix']}/report.html").decode()
    assert "<h2>mlp</h2>" in report and "custom-twin" in report and "Throughput" in report
    verify_manifest(store, manifest)

    frame = results_frame(store, manifest)
    assert len(frame) == 4  # 2 servers x 2 concurrencies
    assert set(frame["status"]) == {"ok"}
    assert (frame["throughput_rps"] > 0).all()
    assert (frame["latency_ms_p50"] <= frame["latency_ms_p99"]).all()
    assert (frame["requests"] > 0).all() and (frame["startup_s"] > 0).all()
    assert set(frame["server"]) == {"custom", "custom-twin"}
    assert frame["runtime_image"].str.startswith("venv:custom@").all()
    assert (frame["engine"] == "onnxruntime").all() and frame["model_sha256"].str.len().eq(64).all()

    parity = read_json_object(store, manifest, "parity.json")
    assert parity and all(p["passed"] for p in parity)
    assert read_json_object(store, manifest, "validation.json")["success"] is True

    # One server up at a time: each session's [start, stopped] ends before the next one starts,
    # and every load point ran while its own server was up and ready.
    timelines = sorted(read_json_object(store, manifest, "logs/sessions.json"), key=lambda t: t["start"])
    assert len(timelines) == 2
    for earlier, later in zip(timelines, timelines[1:], strict=False):
        assert earlier["stopped"] <= later["start"], f"{earlier['session_id']} overlaps {later['session_id']}"
    for t in timelines:
        assert len(t["cells"]) == 2
        for cell in t["cells"].values():
            assert t["ready"] <= cell["load_begin"] <= cell["load_end"] <= t["stop_begin"]
    assert_nothing_left(temp_before, timelines)


def test_server_crashing_at_startup_fails_fast_and_run_is_partial(run_dag, registered, bucket, store_for):
    registered(CrashingCustomServer)
    temp_before = session_temp_dirs()
    dag_run = run_dag(fast_conf(bucket, servers=["custom-crashing", "custom"], concurrencies=[1], ready_timeout_s=120))
    assert dag_run.state == "failed"  # the final check fails the run after publishing

    store = store_for(bucket)
    _, manifest = read_run(store)
    assert manifest["status"] == "partial"
    verify_manifest(store, manifest)
    frame = results_frame(store, manifest).set_index("server")
    assert frame.loc["custom", "status"] == "ok"
    crashed = frame.loc["custom-crashing"]
    assert crashed["status"] == "failed"
    assert "exited with code" in crashed["reason"] and "does not exist" in crashed["reason"]  # the log's tail
    timelines = {t["server"]: t for t in read_json_object(store, manifest, "logs/sessions.json")}
    crash = timelines["custom-crashing"]
    assert crash["stopped"] - crash["start"] < 15, "start-up failure must not wait for the readiness timeout"
    assert_nothing_left(temp_before, list(timelines.values()))


def test_cleanup_when_the_load_test_raises(run_dag, bucket, store_for, monkeypatch):
    import tasks.measure.point

    real_load_point = tasks.measure.point.run_load_point

    def broken_load_point(endpoint, spec, settings, *args, **kwargs):
        if settings.load == 1:
            raise RuntimeError("injected load-generator failure")
        return real_load_point(endpoint, spec, settings, *args, **kwargs)

    monkeypatch.setattr("tasks.measure.point.run_load_point", broken_load_point)
    temp_before = session_temp_dirs()
    dag_run = run_dag(fast_conf(bucket, concurrencies=[1, 2], fail_on_cell_failure=False))
    assert dag_run.state == "success"  # fail_on_cell_failure=false: published partial, run not failed

    store = store_for(bucket)
    _, manifest = read_run(store)
    assert manifest["status"] == "partial"
    frame = results_frame(store, manifest).sort_values("load")
    assert list(frame["status"]) == ["failed", "ok"]
    assert "injected load-generator failure" in frame["reason"].iloc[0]
    assert_nothing_left(temp_before, read_json_object(store, manifest, "logs/sessions.json"))


def test_a_run_that_measured_nothing_is_published_as_failed(run_dag, bucket, store_for, monkeypatch):
    def broken_load_point(*args, **kwargs):
        raise RuntimeError("injected load-generator failure")

    monkeypatch.setattr("tasks.measure.point.run_load_point", broken_load_point)
    dag_run = run_dag(fast_conf(bucket, concurrencies=[1], fail_on_cell_failure=False))
    assert dag_run.state == "failed"  # nothing measured is not a partial result, whatever fail_on_cell_failure says
    _, manifest = read_run(store_for(bucket))
    assert manifest["status"] == "failed"
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["publish"] == "success" and states["check"] == "failed"
