"""What a stack did under overload (issue 26, item 2), judged from an overload phase's figures and the server's
health after it (tasks/loadgen/overload.py records them).

Classes, written down:

    fails   the server died or stopped answering its readiness probe: the row is `failed`, with its log tail
    sheds   it turned load away fast: more of the burst's failures were quick errors (an HTTP error status, a
            refused or reset connection, a bad answer) than timeouts
    queues  it held requests: more timeouts (or requests that never found a free connection) than quick errors,
            or nothing failed but the burst's p99 rose above OVERLOAD_P99_RATIO times the pre-burst p99
    holds   nothing failed and p99 stayed within OVERLOAD_P99_RATIO of the pre-burst p99: the burst did not overload
            it (its capacity was measured low)

An overload row is `ok` when the phase ran, requests were sent and the server is alive and ready after it: shedding,
queueing and a slow recovery are what the row reports, not faults of the measurement. The row never counts as a
steady load point (its throughput and latency columns stay empty; tasks/measure/overload.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.core.metrics import OVERLOAD_P99_RATIO

OVERLOAD_CLASSES = ("holds", "sheds", "queues", "fails")


@dataclass(frozen=True)
class OverloadSigns:
    """What the classes are read from: the burst's quick errors and queued requests, its p99 and the one before."""

    fast_errors: int
    queued: int
    burst_p99_ms: float | None
    pre_burst_p99_ms: float | None


def classify_overload(signs: OverloadSigns, server_alive: bool) -> str:
    """One of OVERLOAD_CLASSES (see the module's docstring)."""
    if not server_alive:
        return "fails"
    if signs.fast_errors or signs.queued:
        return "sheds" if signs.fast_errors >= signs.queued else "queues"
    if signs.burst_p99_ms is not None and signs.pre_burst_p99_ms is not None \
            and signs.burst_p99_ms > OVERLOAD_P99_RATIO * signs.pre_burst_p99_ms:
        return "queues"
    return "holds"


def class_reason(overload_class: str, signs: OverloadSigns, requests: int) -> str:
    """Why the class, in the figures it was read from."""
    p99 = (f"burst p99 {signs.burst_p99_ms:.1f} ms against {signs.pre_burst_p99_ms:.1f} ms before it"
           if signs.burst_p99_ms is not None and signs.pre_burst_p99_ms is not None else "no p99 to compare")
    return (f"{overload_class}: of {requests} burst requests {signs.fast_errors} failed fast and {signs.queued} timed "
            f"out or waited for a connection; {p99}")
