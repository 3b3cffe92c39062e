"""The load generator, split as MLPerf LoadGen is: settings (what load), the system under test (a server
endpoint reached through a protocol codec), and the engine that issues requests and records what happened.
It records; `tasks.validate` judges.

    settings.py     `LoadSettings`: a plain, validated value; every stop rule written down
    coordinator.py  one load point in separate generator processes (`run_load_point`), pinned where the host allows
    worker.py       one generator process: its `WorkerJob`, its share of the load, its recording
    window_reader.py what a load point reads from the server over its measured window (the interface)
    http_engine.py  closed and open loops over lean HTTP/1.1 keep-alive connections
    grpc_engine.py  the same loops over grpc.aio channels
    http.py         the lean HTTP/1.1 client of the hot path
    pacer.py        wake-ups at absolute monotonic nanoseconds for the open loop's schedule
    recording.py    what a load point recorded, request by request; the window rule
    measurement.py  summaries of a recording: percentiles, windows, stability, intervals, the generator's own cost
    histogram.py    HDR histograms to persist and merge
    sweep.py        which load to run next in a concurrency sweep or a rate search
    overload.py     an overload phase: half the capacity, a burst above it, half again; its figures and recovery
    trace.py        a trace (arrival offsets): its file format, digest and replay schedule at a speed factor
    load_shapes.py  step, ramp, spike and day shapes made traces, their parameters recorded
    access_log.py   a team's access log made a trace (its timestamps)
    resources.py    the server's CPU, memory (and GPU) sampled during a load point; its memory, processes and
                    threads read once (`read_footprint`)
    protocols/      one codec per wire protocol: encode once, send, check every response
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"LoadSettings": "settings", "run_load_point": "coordinator", "Measurement": "measurement",
           "sampler_for": "resources", "read_footprint": "resources"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
