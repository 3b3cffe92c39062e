"""The load generator against live servers: request counts (custom service, Triton), coordinated omission
and failures (the fake server's injected stall and errors), Triton's own counter next to the client's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tasks.loadgen.coordinator import PointHooks, run_load_point
from tasks.loadgen.measurement import GENERATOR_SATURATED_MIN_LATE, latencies_ms
from tasks.loadgen.recording import Recording
from tasks.loadgen.settings import LoadSettings
from tasks.measure.hoststate import ServerReader
from tasks.measure.window_reader import LiveServerWindowReader
from tasks.serve.launchers.process import ProcessLauncher
from tasks.serve.session import SessionSettings, server_session
from tests.fake_server import fake_server

pytestmark = pytest.mark.integration
READY_TIMEOUT_S = 90.0
SHORT = {"duration_s": 2.0, "warmup_s": 0.5, "window_s": 0.5}
RATE_TOLERANCE = 0.05  # open loop: requests within 5% of rate x duration


def _check_counts(measurement, settings: LoadSettings) -> None:
    assert measurement.errors == 0, measurement.errors_by_kind
    if settings.mode == "concurrency":
        assert measurement.requests > 0
        # closed loop: requests sent in the measured time vs completed in it differ by the in-flight ones at
        # either end, at most the concurrency each
        assert abs(measurement.requests - measurement.throughput_rps * measurement.duration_s) <= 2 * settings.load
        assert sum(measurement.window_throughput_rps) * settings.window_s == pytest.approx(measurement.requests,
                                                                                           abs=2 * settings.load)
    else:
        expected = settings.load * settings.duration_s
        if settings.arrival == "poisson":  # the seeded schedule fixes the count; it varies ~sqrt(n) around rate x s
            from tasks.loadgen.http_engine import arrival_schedule_ns

            offsets = arrival_schedule_ns(settings)
            assert measurement.requests == int((offsets >= settings.warmup_s * 1e9).sum())
            assert abs(measurement.requests - expected) <= 4 * expected ** 0.5
        else:
            assert abs(measurement.requests - expected) <= RATE_TOLERANCE * expected, (measurement.requests, expected)


def test_custom_server_closed_and_open_loop_counts(mlp_onnx, mlp_spec, log_dir, tmp_path):
    from tasks.serve.servers import get_server

    with server_session(get_server("custom"), mlp_onnx, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test", session_id="loadgen-custom", log_dir=log_dir,
                                        ready_timeout_s=READY_TIMEOUT_S)) as live:
        reader = ServerReader(live.handle)
        for i, settings in enumerate((LoadSettings(mode="concurrency", load=4, **SHORT),
                                      LoadSettings(mode="rate", load=100, arrival="poisson", seed=3, **SHORT),
                                      LoadSettings(mode="rate", load=100, workers=2, **SHORT))):
            before = reader.cpu_s()
            measurement, _ = run_load_point(live.endpoint, mlp_spec, settings, tmp_path / str(i),
                                            server=LiveServerWindowReader(reader))
            whole_point_s = reader.cpu_s() - before
            _check_counts(measurement, settings)
            assert measurement.workers == settings.workers
            # the server's CPU over the measured window: some, and no more than it spent over the whole point
            window_s = measurement.server_window_cpu_pct / 100 * measurement.duration_s
            assert 0 < window_s <= whole_point_s * 1.02, (window_s, whole_point_s)


def test_injected_stall_shows_from_scheduled_time_and_hides_from_sent_time(tmp_path, mlp_spec):
    """One connection, 200 req/s, a 0.5 s stall: ~100 requests wait behind it. Measured from the scheduled
    time they all carry the stall (p99 near 0.5 s); measured from the actual send only the one request that
    met the stall does, and p99 stays small (coordinated omission)."""
    settings = LoadSettings(mode="rate", load=200, max_connections=1, duration_s=3.0, warmup_s=0.5, window_s=0.5)
    with fake_server("--stall-after-s", "1.5", "--stall-s", "0.5") as endpoint:
        measurement, path = run_load_point(endpoint, mlp_spec, settings, tmp_path)
    recording = Recording.load(str(path))
    scheduled, sent = latencies_ms(recording, "scheduled"), latencies_ms(recording, "sent")
    assert measurement.latency_from == "scheduled" and measurement.latency_ms_p99 > 300
    assert float(sent.max()) > 300  # the one request that met the stall
    import numpy as np

    assert float(np.percentile(sent, 99)) < 50, "measured from the actual send, the stall disappears from p99"
    # percentiles are the inverted CDF (a latency that was observed), over every successful request here
    assert float(np.percentile(scheduled, 99, method="inverted_cdf")) == pytest.approx(measurement.latency_ms_p99)
    assert measurement.late_starts > 50  # the sends held back behind the stall are counted as late
    # ... but the generator reached each on time and the server set the pace: they are not the generator's. The
    # VM's own hiccups may still make a few sends generator-late (a 40 ms stall of this shared VM is 8 sends at
    # 200 req/s, and the generator rightly says so); the ~100 held back behind the server must never count.
    assert measurement.generator_late_starts < 0.25 * measurement.late_starts
    if measurement.generator_late_starts < GENERATOR_SATURATED_MIN_LATE:
        assert not measurement.generator_saturated


def test_open_loop_sleeps_between_sends(tmp_path, mlp_spec):
    """At 3,000 req/s the gaps (333 us) are below the event loop's 1 ms timer resolution; an open loop that
    polled for them would use a whole core. Woken by its pacer, the generator uses a fraction of one, and
    still sends every request on schedule."""
    settings = LoadSettings(mode="rate", load=3000, max_connections=64, duration_s=2.0, warmup_s=0.5, window_s=0.5)
    with fake_server() as endpoint:
        measurement, _ = run_load_point(endpoint, mlp_spec, settings, tmp_path)
    _check_counts(measurement, settings)
    assert measurement.generator_cpu_pct < 60, measurement.generator_cpu_pct
    assert measurement.late_starts < 0.05 * measurement.requests


def test_open_loop_paced_by_the_event_loops_timers(mlp_spec, monkeypatch):
    """Where there is no timerfd (macOS) the event loop's own timers pace the schedule: every request is
    still sent, answered and counted. The engine runs in this process so the fallback can be forced."""
    import asyncio
    import json

    from tasks.loadgen import http_engine, pacer
    from tasks.loadgen.measurement import summarize
    from tasks.loadgen.worker import WorkerJob, make_codec

    used = []

    def loop_timers(callback):
        used.append(pacer.LoopTimerPacer(asyncio.get_running_loop(), callback))
        return used[-1]

    monkeypatch.setattr(http_engine, "make_pacer", loop_timers)
    settings = LoadSettings(mode="rate", load=400, duration_s=1.0, warmup_s=0.25, window_s=0.5)
    with fake_server() as endpoint:
        job = WorkerJob(endpoint.host, endpoint.port, endpoint.model_name, endpoint.protocol,
                        json.loads(mlp_spec.to_json()), settings.to_dict())
        codec = make_codec(job, settings)
        recording = asyncio.run(http_engine.open_loop(endpoint.host, endpoint.port, codec, settings))
    assert len(used) == 1
    _check_counts(summarize(recording, settings, "scheduled"), settings)


def test_errors_are_counted_and_never_enter_percentiles(tmp_path, mlp_spec):
    """Every 5th request fails after 200 ms; successes take ~1 ms. p99 stays far below 200 ms."""
    settings = LoadSettings(mode="concurrency", load=4, **SHORT)
    with fake_server("--error-every", "5", "--error-delay-ms", "200") as endpoint:
        measurement, _ = run_load_point(endpoint, mlp_spec, settings, tmp_path)
    assert measurement.error_rate == pytest.approx(0.2, abs=0.05)
    assert measurement.errors_by_kind == {"http_status": measurement.errors}
    assert measurement.latency_ms_max < 150


def test_triton_server_side_count_agrees_with_client(mlp_onnx, mlp_spec, log_dir, tmp_path):
    """Triton's nv_inference_request_success over the load point and over the measured window agrees with
    the client's successful requests within 2%."""
    triton = pytest.importorskip("tasks.serve.servers.triton", reason="TritonServer has not landed yet")
    server = triton.TritonServer()
    with server_session(server, mlp_onnx, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test", session_id="loadgen-triton", log_dir=log_dir,
                                        ready_timeout_s=READY_TIMEOUT_S)) as live:
        reader = LiveServerWindowReader(ServerReader(live.handle), live)
        for i, settings in enumerate((LoadSettings(mode="concurrency", load=4, **SHORT),
                                      LoadSettings(mode="rate", load=100, **SHORT))):
            measurement, path = run_load_point(live.endpoint, mlp_spec, settings, tmp_path / str(i), server=reader)
            _check_counts(measurement, settings)
            assert measurement.server_requests is not None
            assert measurement.server_requests == pytest.approx(measurement.server_client_requests, rel=0.02)
            assert measurement.server_throughput_rps == pytest.approx(measurement.throughput_rps, rel=0.05)
            recording = Recording.load(str(path))
            assert Path(path).exists() and len(recording.codes) > 0


def test_workers_start_from_any_working_directory(tmp_path, mlp_spec, monkeypatch):
    """The generator's worker processes run `python -m tasks.loadgen.worker`: from a folder outside the repository
    (and with no PYTHONPATH) they must still import it. On the old code this failed with "not ready within 60 s"."""
    progress: list[str] = []
    settings = LoadSettings(mode="concurrency", load=2, duration_s=1.0, warmup_s=0.2, window_s=0.5)
    with fake_server() as endpoint:
        monkeypatch.chdir(tmp_path)
        monkeypatch.delenv("PYTHONPATH", raising=False)
        measurement, _ = run_load_point(endpoint, mlp_spec, settings, tmp_path / "work",
                                        hooks=PointHooks(progress=progress.append))
    _check_counts(measurement, settings)
    assert len(progress) == 2 and progress[0].startswith("window 1/2: concurrency 2, ")  # one line per window


def test_every_window_line_is_reported_before_the_load_point_returns(tmp_path, mlp_spec, monkeypatch):
    """The workers' window lines are read by threads; a worker can exit with its last line still unread. Each
    line is held back 0.3 s here (a busy parent), so without waiting for the readers the last windows' lines
    would arrive after `run_load_point` returned, and a task's log would lack them."""
    from tasks.loadgen import coordinator as run_module

    original = run_module.WindowProgress.add

    def slow_add(self, figures):
        time.sleep(0.3)
        original(self, figures)

    monkeypatch.setattr(run_module.WindowProgress, "add", slow_add)
    progress: list[str] = []
    settings = LoadSettings(mode="concurrency", load=2, duration_s=1.5, warmup_s=0.2, window_s=0.5, workers=2)
    with fake_server() as endpoint:
        run_load_point(endpoint, mlp_spec, settings, tmp_path / "work", hooks=PointHooks(progress=progress.append))
    assert [line.split(":")[0] for line in progress] == ["window 1/3", "window 2/3", "window 3/3"]


def test_every_measured_window_is_reported_even_when_its_timer_has_not_fired(monkeypatch):
    """Each window's progress report is a timer 2 ms after the window's end; the last one ends with the load
    point, and against a fast server the point can be over before that timer fires. Here no timer fires at all
    (they are switched off): every window must still be reported, once, when the load point ends."""
    import asyncio

    from tasks.loadgen import http_engine
    from tasks.loadgen.protocols.http_get import HttpGet

    monkeypatch.setattr(http_engine._Driver, "_schedule_report", lambda self, k: None)
    reports: list[dict] = []
    settings = LoadSettings(mode="concurrency", load=1, duration_s=0.5, warmup_s=0.25, window_s=0.25)
    with fake_server() as endpoint:  # any path but /infer answers 200
        codec = HttpGet(endpoint.host, endpoint.port, "v2/health/ready", {}, {})
        asyncio.run(http_engine.closed_loop(endpoint.host, endpoint.port, codec, settings, on_window=reports.append))
    assert [r["window"] for r in reports] == [1, 2]
    assert all(r["ok"] > 0 and r["errors"] == 0 for r in reports)
