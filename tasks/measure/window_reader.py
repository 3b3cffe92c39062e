"""A live server as its load points read it over their measured windows (tasks/loadgen/window_reader.py): its
success counter where it exposes one (Triton), its own timings where the stack reports them (`Server.server_timings`),
and its CPU time through `hoststate.ServerReader` (its process tree, or its container's cgroup)."""

from __future__ import annotations

from tasks.measure.hoststate import ServerReader
from tasks.serve.session import LiveServer

SUCCESS_COUNTER = "nv_inference_request_success"  # Triton's cumulative successful requests


class LiveServerWindowReader:
    """`cpu` reads the server's CPU time; `live`, when given, is the server whose counter and timings are read too.
    Without it only the CPU is read: a duet's pairs publish no server count or timing, and a scrape of one side's
    statistics would be work its other side does not do."""

    def __init__(self, cpu: ServerReader, live: LiveServer | None = None) -> None:
        self.cpu, self.live = cpu, live

    def request_count(self) -> float | None:
        counts = getattr(self.live.server, "server_side_counts", None) if self.live is not None else None
        return None if counts is None else counts(self.live.endpoint)[SUCCESS_COUNTER]

    def timings(self) -> dict[str, float] | None:
        if self.live is None or not self.live.server.timing_source:
            return None
        return self.live.server.server_timings(self.live.endpoint)

    def cpu_s(self) -> float | None:
        return self.cpu.cpu_s()
