"""What a load point recorded, request by request, and the window rule both the engine and the summary use.

The engines (`http_engine.py`, `grpc_engine.py`) write a `Recording`; `measurement.py` summarizes it. Both import
this module and neither imports the other, so the recording type, its constants and the definition of a
window live here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tasks.loadgen.protocols.base import OK
from tasks.loadgen.settings import STABLE_WINDOWS

LATE_START_NS = 2_000_000  # an open-loop send more than 2 ms after its scheduled time is late
NO_SLOT = -1  # requests of the open loop: they belong to no fixed connection slot
FIRST_ERROR_MAX_CHARS = 500


@dataclass
class Recording:
    """What happened, request by request, in nanoseconds relative to `t0_ns` (start of the warm-up).

    `t0_ns` is the absolute CLOCK_MONOTONIC time of the start, shared by every worker of a load point, so
    recordings of several generator processes merge by concatenation. `slots` (closed loop only) says which
    of the `concurrency` connection slots issued each request, so a slot's stall can be followed across the
    reconnects it took; `first_error` is the message of the earliest failed request, at `first_error_ns`.
    """

    t0_ns: int
    warmup_end_ns: int
    end_ns: int
    scheduled_ns: np.ndarray
    sent_ns: np.ndarray
    done_ns: np.ndarray
    codes: np.ndarray
    generator_cpu_s: float = 0.0
    wall_s: float = 0.0
    workers: int = 1
    worker_cpu_pct: tuple[float, ...] = ()
    stopped_early: bool = False
    # measured open-loop requests the generator itself reached more than LATE_START_NS after their due time
    # (a request it reached on time but that then waited for a free connection is late by the server's pace)
    generator_late: int = 0
    slots: np.ndarray | None = None
    first_error: str = ""
    first_error_ns: int = -1
    request_bytes: int = 0  # the payload of one request (an HTTP body, a gRPC message): the same for every request
    response_bytes: int = 0  # the payloads of every successful response, summed (their count: codes == OK)
    meta: dict = field(default_factory=dict)

    def save(self, path: str) -> None:
        extra = {} if self.slots is None else {"slots": self.slots}
        np.savez_compressed(path, scheduled_ns=self.scheduled_ns, sent_ns=self.sent_ns, done_ns=self.done_ns,
                            codes=self.codes, bounds=np.array([self.t0_ns, self.warmup_end_ns, self.end_ns]),
                            cpu=np.array([self.generator_cpu_s, self.wall_s]),
                            worker_cpu_pct=np.array(self.worker_cpu_pct, dtype=np.float64),
                            flags=np.array([self.workers, int(self.stopped_early), self.generator_late]),
                            first_error=np.array([self.first_error]), first_error_ns=np.array([self.first_error_ns]),
                            payload_bytes=np.array([self.request_bytes, self.response_bytes], dtype=np.int64),
                            **extra)

    @classmethod
    def load(cls, path: str) -> Recording:
        with np.load(path) as data:
            t0, warm, end = (int(v) for v in data["bounds"])
            cpu, wall = (float(v) for v in data["cpu"])
            workers, stopped, generator_late = (*(int(v) for v in data["flags"]), 0)[:3]
            return cls(t0, warm, end, data["scheduled_ns"], data["sent_ns"], data["done_ns"], data["codes"], cpu,
                       wall, workers, tuple(float(v) for v in data["worker_cpu_pct"]), bool(stopped), generator_late,
                       slots=data["slots"] if "slots" in data else None,
                       first_error=str(data["first_error"][0]) if "first_error" in data else "",
                       first_error_ns=int(data["first_error_ns"][0]) if "first_error_ns" in data else -1,
                       **({"request_bytes": int(data["payload_bytes"][0]),
                           "response_bytes": int(data["payload_bytes"][1])} if "payload_bytes" in data else {}))

    @classmethod
    def merge(cls, parts: list[Recording]) -> Recording:
        """One recording of a load point driven by several generator processes that shared `t0_ns`.

        Slots are renumbered per worker (worker i's slots follow worker i-1's), so they stay distinct."""
        if not parts:
            raise ValueError("recordings: must merge at least one")
        starts = {p.t0_ns for p in parts}
        if len(starts) != 1:
            raise ValueError(f"t0_ns={sorted(starts)}: the workers of one load point must share their start")
        first = parts[0]
        slots = None
        if all(p.slots is not None for p in parts):
            offset, renumbered = 0, []
            for p in parts:
                renumbered.append(np.where(p.slots >= 0, p.slots + offset, p.slots))
                offset += int(p.slots.max()) + 1 if p.slots.size else 0
            slots = np.concatenate(renumbered)
        errors = sorted((p.first_error_ns, p.first_error) for p in parts if p.first_error)
        return cls(
            t0_ns=first.t0_ns, warmup_end_ns=first.warmup_end_ns, end_ns=min(p.end_ns for p in parts),
            scheduled_ns=np.concatenate([p.scheduled_ns for p in parts]),
            sent_ns=np.concatenate([p.sent_ns for p in parts]),
            done_ns=np.concatenate([p.done_ns for p in parts]),
            codes=np.concatenate([p.codes for p in parts]),
            generator_cpu_s=sum(p.generator_cpu_s for p in parts), wall_s=max(p.wall_s for p in parts),
            workers=sum(p.workers for p in parts),
            worker_cpu_pct=tuple(v for p in parts for v in p.worker_cpu_pct),
            stopped_early=any(p.stopped_early for p in parts),
            generator_late=sum(p.generator_late for p in parts),
            slots=slots,
            first_error=errors[0][1] if errors else "", first_error_ns=errors[0][0] if errors else -1,
            request_bytes=max(p.request_bytes for p in parts), response_bytes=sum(p.response_bytes for p in parts),
        )


def window_counts(done_ns: np.ndarray, codes: np.ndarray, start_ns: int, window_ns: int, n_windows: int) -> np.ndarray:
    """Successful completions per time window: the one definition used by the summary and the stop rule."""
    ok_done = done_ns[(codes == OK) & (done_ns >= start_ns)]
    index = (ok_done - start_ns) // window_ns
    return np.bincount(index[index < n_windows].astype(np.int64), minlength=n_windows)[:n_windows]


def window_stable(window_rps: np.ndarray, stability_pct: float) -> bool:
    """perf_analyzer's rule: the last STABLE_WINDOWS windows each lie within stability_pct of their mean."""
    if len(window_rps) < STABLE_WINDOWS:
        return False
    last = np.asarray(window_rps[-STABLE_WINDOWS:], dtype=float)
    mean = float(last.mean())
    return mean > 0 and bool(np.all(np.abs(last - mean) <= mean * stability_pct / 100))
