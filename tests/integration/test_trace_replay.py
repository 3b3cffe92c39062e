"""A trace replayed against a real stack: every request goes out at the trace's own offset (checked on the
recording, to the nanosecond), at any speed and across workers, and the server counts what the generator sent;
a trace the generator cannot keep is flagged `generator_saturated`."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.loadgen.coordinator import run_load_point
from tasks.loadgen.load_shapes import shape_trace
from tasks.loadgen.protocols.base import OK
from tasks.loadgen.recording import LATE_START_NS, Recording
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.trace import TraceReplay
from tasks.measure.hoststate import ServerReader
from tasks.measure.window_reader import LiveServerWindowReader
from tasks.serve.launchers.process import ProcessLauncher
from tasks.serve.session import SessionSettings, server_session
from tests.fake_server import fake_server

pytestmark = pytest.mark.integration
READY_TIMEOUT_S = 90.0


def test_a_trace_goes_out_at_its_offsets_and_triton_counts_every_request(mlp_onnx, mlp_spec, log_dir, tmp_path):
    """A Poisson spike (40 req/s, 200 req/s for half a second) as recorded and twice as fast over two workers:
    the recording's scheduled sends are the trace's offsets exactly, nearly all leave within the late-start
    threshold, and Triton's own success counter over the point equals the generator's successes."""
    from tasks.serve.servers.triton import TritonServer

    trace = shape_trace("spike", {"base_rps": 40.0, "spike_rps": 200.0, "spike_at_s": 1.0, "spike_s": 0.5,
                                  "length_s": 2.5}, "poisson", seed=3)
    with server_session(TritonServer(), mlp_onnx, mlp_spec, ProcessLauncher(),
                        SessionSettings(run_id="test", session_id="trace-triton", log_dir=log_dir,
                                        ready_timeout_s=READY_TIMEOUT_S)) as live:
        reader = LiveServerWindowReader(ServerReader(live.handle), live)
        for speed, workers in ((1.0, 1), (2.0, 2)):
            replay = TraceReplay(trace, speed)
            settings = replay.settings(LoadSettings(mode="rate", load=1.0, warmup_s=0.5, window_s=0.5, workers=workers))
            before = reader.request_count()
            measurement, path = run_load_point(live.endpoint, mlp_spec, settings, tmp_path / f"speed{speed:g}",
                                               schedule=replay)
            served = reader.request_count() - before
            recording = Recording.load(str(path))
            assert np.array_equal(np.sort(recording.scheduled_ns), replay.schedule_ns())
            succeeded = int((recording.codes == OK).sum())
            assert measurement.errors == 0 and succeeded == trace.arrivals == served
            assert measurement.latency_from == "scheduled"
            assert not measurement.generator_saturated, (measurement.generator_cpu_pct,
                                                         measurement.generator_late_starts, measurement.requests)
            lag_ns = recording.sent_ns - recording.scheduled_ns
            assert (lag_ns > LATE_START_NS).sum() <= 0.05 * trace.arrivals, np.percentile(lag_ns, 99)


def test_a_trace_the_generator_cannot_keep_is_flagged(tmp_path, mlp_spec):
    """120,000 requests/s for half a second, far past what one generator process can send. The fake server is a
    stand-in here: it answers faster than any real stack on this machine, so the generator, not the server, is
    what falls behind the trace (against a slower server the trace waits on the server's connections, and the
    row says the server kept it waiting, rightly)."""
    replay = TraceReplay(shape_trace("step", {"rates_rps": [120_000.0], "step_s": 0.5}))
    settings = replay.settings(LoadSettings(mode="rate", load=1.0, warmup_s=0.0, window_s=0.25, request_timeout_s=1.0,
                                            max_connections=256))
    with fake_server() as endpoint:
        measurement, _ = run_load_point(endpoint, mlp_spec, settings, tmp_path, schedule=replay)
    assert measurement.generator_saturated
    assert measurement.late_starts > 0.5 * measurement.requests
