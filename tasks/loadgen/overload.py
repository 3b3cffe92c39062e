"""An overload phase: an open-loop steady rate above a stack's known capacity for a bounded time,
between two stretches at half of it, and what the recording says happened.

The phase, written down:

    pre      `pre_s` at BASE_FACTOR x capacity: the pre-burst p99 (after its first PRE_SETTLE_S: connections open)
    burst    `burst_s` at `factor` x capacity (1.5 or 3): errors by kind, timeouts and p99 of the requests scheduled
             in it; goodput, the successful answers that came back during it, per second
    recover  `recover_s` at BASE_FACTOR x capacity: the recovery time

Latency is from the scheduled send (open loop, no coordinated omission); a timed-out request counts at its timeout,
a request never sent (no free connection before the end) at its wait. Every request is bounded by the load
point's `request_timeout_s` and the whole phase by its length plus that timeout (tasks/loadgen/engine.py).

Goodput is read by the time answers came back, not by when their requests were scheduled: a stack that queues
answers the burst's requests late, after it, and what it served *during* the burst is its rate under overload.

Recovery time: from the burst's end to the start of the first window (of the recover stretch, by scheduled time)
whose requests all succeeded and whose p99 is within OVERLOAD_P99_RATIO of the pre-burst p99; None when none
starts within `recover_s` ("did not recover within N s"). A window is RECOVERY_WINDOW_S long, or longer where half
the capacity sends fewer than RECOVERY_MIN_REQUESTS in it, but never longer than a RECOVERY_MIN_WINDOWS-th of the
recover stretch (a slow stack's windows hold fewer requests rather than none); windows start at the burst's end.

Nothing is judged here: `tasks.validate.overload` classifies what the figures show (holds, sheds, queues, fails).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from tasks.core.errors import ConfigError
from tasks.core.metrics import OVERLOAD_P99_RATIO
from tasks.loadgen.measurement import request_latencies_ns
from tasks.loadgen.protocols.base import BAD_RESPONSE, CONNECTION, ERROR_KINDS, HTTP_STATUS, NOT_SENT, OK, TIMEOUT
from tasks.loadgen.recording import Recording

OVERLOAD_FACTORS = (1.5, 3.0)  # the bursts, as multiples of the stack's capacity
BASE_FACTOR = 0.5  # before and after a burst, the rate as a multiple of capacity
RECOVERY_WINDOW_S = 0.5
RECOVERY_MIN_REQUESTS = 50  # a window holds at least this many requests at the base rate (else it is longer)
RECOVERY_MIN_WINDOWS = 4  # ... and the recover stretch holds at least this many windows
PRE_SETTLE_S = 1.0  # the pre stretch's first second opens connections: not in the pre-burst p99
MIN_PRE_S, MIN_RECOVER_S = 2.0, 5.0
MAX_PHASE_S = 600.0  # an overload phase (pre + burst + recover) never runs longer than this
FAST_ERRORS = (HTTP_STATUS, CONNECTION, BAD_RESPONSE)  # the server answered no (or shut the door): a shed
QUEUED = (TIMEOUT, NOT_SENT)  # the server held the request (or every connection) past the timeout: a queue
NS = 1_000_000_000


@dataclass(frozen=True)
class OverloadPhases:
    """One overload phase: the capacity it is relative to, the burst's factor, the three stretches' lengths."""

    capacity_rps: float
    factor: float
    pre_s: float
    burst_s: float
    recover_s: float

    def __post_init__(self) -> None:
        if not (self.capacity_rps > 0 and np.isfinite(self.capacity_rps)):
            raise ConfigError("capacity_rps", self.capacity_rps, "must be > 0 req/s (an ok point's throughput)")
        if not self.factor > BASE_FACTOR:
            raise ConfigError("overload factor", self.factor, f"must be > {BASE_FACTOR} (the base rate's factor)")
        for name in ("pre_s", "burst_s", "recover_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, getattr(self, name), "must be > 0 s")
        if self.total_s > MAX_PHASE_S:
            raise ConfigError("overload phase", self.total_s, f"must last at most {MAX_PHASE_S:g} s in all")

    @property
    def base_rps(self) -> float:
        return self.capacity_rps * BASE_FACTOR

    @property
    def burst_rps(self) -> float:
        return self.capacity_rps * self.factor

    @property
    def burst_start_s(self) -> float:
        return self.pre_s

    @property
    def burst_end_s(self) -> float:
        return self.pre_s + self.burst_s

    @property
    def total_s(self) -> float:
        return self.pre_s + self.burst_s + self.recover_s

    def stretches(self) -> tuple[tuple[float, float, float], ...]:
        """(start s, length s, rate req/s) of the pre, burst and recover stretches."""
        return ((0.0, self.pre_s, self.base_rps), (self.pre_s, self.burst_s, self.burst_rps),
                (self.burst_end_s, self.recover_s, self.base_rps))

    def schedule_ns(self, stride: int = 1, offset: int = 0) -> np.ndarray:
        """Send times (ns from the start), constant gaps in each stretch; worker `offset` of `stride` takes every
        stride-th send, so the workers together send exactly the one schedule."""
        parts = [start + np.arange(int(length * rate)) / rate for start, length, rate in self.stretches()]
        times_ns = np.round(np.concatenate(parts) * NS).astype(np.int64)
        return times_ns[offset::stride]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> OverloadPhases:
        return cls(**{k: float(data[k]) for k in cls.__dataclass_fields__})


def phases_for(capacity_rps: float, factor: float, burst_s: float) -> OverloadPhases:
    """The phase a run measures: a burst of `burst_s` (the run's duration_s), half as long before it (at least
    MIN_PRE_S) and twice as long after it (at least MIN_RECOVER_S) to recover in."""
    return OverloadPhases(capacity_rps, factor, max(MIN_PRE_S, burst_s / 2), burst_s, max(MIN_RECOVER_S, 2 * burst_s))


@dataclass(frozen=True)
class OverloadFigures:
    """What one overload phase's recording shows. Counts and latencies of the burst are of the requests scheduled
    in it; `windows` is the whole phase as (start s, requests, failed, p99 ms) per recovery window."""

    phases: OverloadPhases
    requests: int
    succeeded: int
    errors_by_kind: dict[str, int]
    fast_errors: int  # failed with an answer or a closed door before the timeout (FAST_ERRORS)
    queued: int  # timed out, or never found a free connection (QUEUED)
    goodput_rps: float  # successful answers that came back during the burst, per second of it
    burst_p99_ms: float | None
    pre_burst_p99_ms: float | None
    recovery_s: float | None
    window_s: float
    windows: tuple[tuple[float, int, int, float | None], ...]
    first_error: str = ""

    @property
    def errors(self) -> int:
        return self.requests - self.succeeded

    @property
    def timeouts(self) -> int:
        return self.errors_by_kind.get(ERROR_KINDS[TIMEOUT], 0)

    @property
    def goodput_pct(self) -> float:
        return 100.0 * self.goodput_rps / self.phases.capacity_rps

    @property
    def recovered(self) -> bool:
        return self.recovery_s is not None

    def recovery_text(self) -> str:
        if self.pre_burst_p99_ms is None:
            return "recovery not measured: no request before the burst to compare with"
        if self.recovered:
            return f"recovered {self.recovery_s:.1f} s after the burst"
        return f"did not recover within {self.phases.recover_s:g} s"

    def to_json(self) -> str:
        data = asdict(self)
        data.update(errors=self.errors, timeouts=self.timeouts, goodput_pct=self.goodput_pct,
                    recovered=self.recovered, recovery=self.recovery_text(), recovery_p99_ratio=OVERLOAD_P99_RATIO)
        return json.dumps(data, sort_keys=True)


def _p99_ms(latency_ns: np.ndarray) -> float | None:
    return float(np.percentile(latency_ns, 99)) / 1e6 if latency_ns.size else None


def summarize_overload(recording: Recording, phases: OverloadPhases, request_timeout_s: float) -> OverloadFigures:
    """The figures of one overload phase from its recording (times relative to the phase's start, `t0_ns`)."""
    scheduled, codes = recording.scheduled_ns, recording.codes
    latency = request_latencies_ns(recording, recording.scheduled_ns, int(request_timeout_s * NS))
    start, end = int(phases.burst_start_s * NS), int(phases.burst_end_s * NS)
    burst = (scheduled >= start) & (scheduled < end)
    pre = (scheduled >= int(min(PRE_SETTLE_S, phases.pre_s / 2) * NS)) & (scheduled < start)
    kinds = {ERROR_KINDS[int(code)]: int(n) for code, n in zip(*np.unique(codes[burst & (codes != OK)],
                                                                             return_counts=True), strict=True)}
    succeeded = int((burst & (codes == OK)).sum())
    served_during = int(((codes == OK) & (recording.done_ns >= start) & (recording.done_ns < end)).sum())
    pre_p99 = _p99_ms(latency[pre])
    window_s = max(RECOVERY_WINDOW_S, min(RECOVERY_MIN_REQUESTS / phases.base_rps,
                                          phases.recover_s / RECOVERY_MIN_WINDOWS))
    windows = []
    t = phases.burst_end_s % window_s  # a window boundary at the burst's end (the stretch before the first dropped)
    while t + window_s <= phases.total_s + 1e-9:
        inside = (scheduled >= int(t * NS)) & (scheduled < int((t + window_s) * NS))
        windows.append((round(t, 6), int(inside.sum()), int((inside & (codes != OK)).sum()), _p99_ms(latency[inside])))
        t += window_s
    return OverloadFigures(
        phases=phases, requests=int(burst.sum()), succeeded=succeeded, errors_by_kind=kinds,
        fast_errors=int((burst & np.isin(codes, FAST_ERRORS)).sum()),
        queued=int((burst & np.isin(codes, QUEUED)).sum()),
        goodput_rps=served_during / phases.burst_s, burst_p99_ms=_p99_ms(latency[burst]), pre_burst_p99_ms=pre_p99,
        recovery_s=recovery_s(windows, phases, pre_p99, window_s), window_s=window_s, windows=tuple(windows),
        first_error=recording.first_error)


def recovery_s(windows: list[tuple[float, int, int, float | None]], phases: OverloadPhases,
               pre_p99_ms: float | None, window_s: float) -> float | None:
    """Seconds from the burst's end to the first window inside the recover stretch with requests, none failed, and
    p99 within OVERLOAD_P99_RATIO of the pre-burst p99; None: never."""
    if pre_p99_ms is None:
        return None
    limit = pre_p99_ms * OVERLOAD_P99_RATIO
    after = [w for w in windows if w[0] >= phases.burst_end_s - 1e-9 and w[0] + window_s <= phases.total_s + 1e-9]
    for start_s, n, failed, p99 in after:
        if n > 0 and failed == 0 and p99 is not None and p99 <= limit:
            return max(0.0, start_s - phases.burst_end_s)
    return None
