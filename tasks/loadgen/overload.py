"""An overload phase: an open-loop steady rate above a stack's known capacity for a bounded time,
between two stretches at half of it, and what the recording says happened.

The phase, written down:

    pre      `pre_s` at BASE_FACTOR x capacity: the pre-burst p99 (after its first PRE_SETTLE_S: connections open)
    burst    `burst_s` at `factor` x capacity (1.5 or 3): errors by kind, timeouts and p99 of the requests scheduled
             in it; goodput, the successful answers that came back during it, per second
    recover  `recover_s` at BASE_FACTOR x capacity: the recovery time

Latency is from the scheduled send (open loop, no coordinated omission); a timed-out request counts at its timeout,
a request never sent (no free connection before the end) at its wait. Every request is bounded by the load
point's `request_timeout_s` and the whole phase by its length plus that timeout (tasks/loadgen/http_engine.py).

Goodput is read by the time answers came back, not by when their requests were scheduled: a stack that queues
answers the burst's requests late, after it, and what it served *during* the burst is its rate under overload.

Recovery, judged on counts the windows hold (a window of a slow stack holds a few requests: its p99 would be its
maximum, and "p99 back within 1.2 x the p99 before" would compare two maxima):

- The reference: the pre-burst stretch's q-th percentile, q the highest of RECOVERY_LEVELS (99, 90, 50) that the
  phase supports: the pre stretch holds at least 1 / (1 - q) requests (so the percentile is not its maximum) and
  the recover stretch at least RECOVERY_MIN_WINDOWS windows of `requests_to_hold(q)` requests (the fewest that,
  none slow, decide the share below 1 - q). A slow stack (BERT-base at about 4 req/s: 6 requests before, 32 after)
  is judged on the median, a fast one on the p99. None supported: "recovery not measured", saying the counts.
- The limit: OVERLOAD_P99_RATIO (1.2) x that percentile.
- A window: RECOVERY_WINDOW_HOLDS x `requests_to_hold(q)` requests at the base rate long (at least
  RECOVERY_WINDOW_S, at most a RECOVERY_MIN_WINDOWS-th of the recover stretch: a window must also be able to decide
  with a few slow requests, which trades the recovery time's resolution for the rule's power); windows start at the
  burst's end.
  It is back when none of its requests failed and the share of its requests slower than the limit is decided
  below 1 - q (`tasks.core.confidence.decide_counts` at RECOVERY_CONFIDENCE_PCT, verdict `holds`): its q-th
  percentile is within 1.2 x the one before, with that confidence. The pre stretch itself shows at most 1 - q
  slower than its own percentile, so a stack back to how it ran before passes, given enough requests.
- Recovery time: from the burst's end to the start of the first window of the recover stretch that is back; None
  when none is ("did not recover within N s").

Every window is published with its counts: start, requests, failed, slower than the limit, the decision.

Nothing is judged here: `tasks.validate.overload` classifies what the figures show (holds, sheds, queues, fails).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from tasks.core.confidence import DECISION_PCT, decide_counts, requests_to_hold
from tasks.core.errors import ConfigError
from tasks.core.metrics import OVERLOAD_P99_RATIO
from tasks.loadgen.measurement import request_latencies_ns
from tasks.loadgen.protocols.base import BAD_RESPONSE, CONNECTION, ERROR_KINDS, HTTP_STATUS, NOT_SENT, OK, TIMEOUT
from tasks.loadgen.recording import Recording

OVERLOAD_FACTORS = (1.5, 3.0)  # the bursts, as multiples of the stack's capacity
BASE_FACTOR = 0.5  # before and after a burst, the rate as a multiple of capacity
RECOVERY_WINDOW_S = 0.5  # the shortest recovery window
RECOVERY_LEVELS = (99.0, 90.0, 50.0)  # the percentile recovery is judged at: the highest the phase's counts support
RECOVERY_WINDOW_HOLDS = 4  # a window holds this many times the requests that decide its share, none slow
RECOVERY_MIN_WINDOWS = 3  # ... and the recover stretch holds at least this many windows
RECOVERY_CONFIDENCE_PCT = DECISION_PCT  # a window's decision, at the bound decisions' default confidence
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
    in it; `windows` is the whole phase, per recovery window its start (s), requests, failed, requests slower than
    `recovery_limit_ms` (failed ones included) and the decision on their share (`holds`: back)."""

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
    windows: tuple[dict, ...]
    pre_requests: int = 0  # the pre-burst stretch's requests (its first PRE_SETTLE_S left out)
    recovery_level: float | None = None  # the percentile recovery is judged at (RECOVERY_LEVELS); None: none fits
    recovery_limit_ms: float | None = None  # OVERLOAD_P99_RATIO x the pre-burst stretch's recovery_level percentile
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
        if self.recovery_level is None:
            return (f"recovery not measured: {self.pre_requests} requests before the burst and "
                    f"{int(self.phases.base_rps * self.phases.recover_s)} after it are too few to judge a median")
        if self.recovered:
            return f"recovered {self.recovery_s:.1f} s after the burst"
        return f"did not recover within {self.phases.recover_s:g} s"

    def to_json(self) -> str:
        data = asdict(self)
        data.update(errors=self.errors, timeouts=self.timeouts, goodput_pct=self.goodput_pct,
                    recovered=self.recovered, recovery=self.recovery_text(), recovery_ratio=OVERLOAD_P99_RATIO,
                    recovery_confidence_pct=RECOVERY_CONFIDENCE_PCT)
        return json.dumps(data, sort_keys=True)


def _p99_ms(latency_ns: np.ndarray) -> float | None:
    return float(np.percentile(latency_ns, 99)) / 1e6 if latency_ns.size else None


def recovery_level(pre_requests: int, phases: OverloadPhases) -> float | None:
    """The highest of RECOVERY_LEVELS the phase's counts support (module docstring); None: none."""
    after = phases.base_rps * phases.recover_s
    for q in RECOVERY_LEVELS:
        if pre_requests >= round(100.0 / (100.0 - q)) and \
                after >= RECOVERY_MIN_WINDOWS * requests_to_hold(q, RECOVERY_CONFIDENCE_PCT):
            return q
    return None


def recovery_window_s(phases: OverloadPhases, level: float | None) -> float:
    """A recovery window's length: RECOVERY_WINDOW_HOLDS x the requests deciding a share at `level` (none slow) at
    the base rate, at least RECOVERY_WINDOW_S, at most a RECOVERY_MIN_WINDOWS-th of the recover stretch."""
    wanted = RECOVERY_WINDOW_HOLDS * requests_to_hold(level or RECOVERY_LEVELS[-1], RECOVERY_CONFIDENCE_PCT)
    return max(RECOVERY_WINDOW_S, min(wanted / phases.base_rps, phases.recover_s / RECOVERY_MIN_WINDOWS))


def _window(start_s: float, latency_ns: np.ndarray, failed: np.ndarray, level: float | None,
            limit_ms: float | None) -> dict:
    """One window's counts and, with a limit, the decision on the share of its requests slower than it."""
    window = {"start_s": round(start_s, 6), "requests": int(latency_ns.size), "failed": int(failed.sum()),
              "slower": None, "verdict": None}
    if level is not None and limit_ms is not None:
        slower = int(((latency_ns > limit_ms * 1e6) | failed).sum())
        decision = decide_counts(latency_ns.size, float(latency_ns.size), slower, limit_ms, level,
                                 RECOVERY_CONFIDENCE_PCT)
        window.update(slower=slower, verdict=decision.verdict)
    return window


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
    pre_requests = int(pre.sum())
    level = recovery_level(pre_requests, phases)
    limit_ms = (float(np.percentile(latency[pre], level)) / 1e6 * OVERLOAD_P99_RATIO
                if level is not None and pre_requests else None)
    window_s = recovery_window_s(phases, level)
    windows = []
    t = phases.burst_end_s % window_s  # a window boundary at the burst's end (the stretch before the first dropped)
    while t + window_s <= phases.total_s + 1e-9:
        inside = (scheduled >= int(t * NS)) & (scheduled < int((t + window_s) * NS))
        windows.append(_window(t, latency[inside], codes[inside] != OK, level, limit_ms))
        t += window_s
    return OverloadFigures(
        phases=phases, requests=int(burst.sum()), succeeded=succeeded, errors_by_kind=kinds,
        fast_errors=int((burst & np.isin(codes, FAST_ERRORS)).sum()),
        queued=int((burst & np.isin(codes, QUEUED)).sum()),
        goodput_rps=served_during / phases.burst_s, burst_p99_ms=_p99_ms(latency[burst]),
        pre_burst_p99_ms=_p99_ms(latency[pre]), recovery_s=recovery_s(windows, phases, window_s),
        window_s=window_s, windows=tuple(windows), pre_requests=pre_requests, recovery_level=level,
        recovery_limit_ms=limit_ms, first_error=recording.first_error)


def recovery_s(windows: list[dict], phases: OverloadPhases, window_s: float) -> float | None:
    """Seconds from the burst's end to the first window inside the recover stretch that is back (none failed, its
    share slower than the limit decided below 1 - q); None: never."""
    for w in windows:
        # start_s is rounded to 1 us: compare within that
        inside = w["start_s"] >= phases.burst_end_s - 1e-6 and w["start_s"] + window_s <= phases.total_s + 1e-6
        if inside and w["failed"] == 0 and w["verdict"] == "holds":
            return max(0.0, w["start_s"] - phases.burst_end_s)
    return None
