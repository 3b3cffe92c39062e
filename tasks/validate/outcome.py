"""When a row may say `ok`: the outcome rules of a load point and of a server session, in one place.

The load generator records and the session observes; this module judges (DESIGN.md, "Outcomes"). A load
point is `ok` only when all of these hold, checked in this order, and `failed` with the first broken rule
as its reason otherwise (the measured figures stay in the row for diagnosis):

1. the server's served outputs matched the reference before load (`served_err_ratio` <= 1: every output
   within atol + rtol * |reference|, the same tolerances as the artifact's parity check);
2. the load point ran (the generator started, drove the endpoint and returned a recording);
3. the server is still running after the point (its exit code is read *before* the row is accepted) and
   still answers its readiness probe (a hung server does not);
4. at least one request was measured;
5. no request failed or timed out, unless the fraction of failed requests is below `max_error_rate`
   (Param, default 0: any error fails the point). The reason gives the counts by kind and the first error's
   message.

A server that died or hung during a session is restarted once (`MAX_RESTARTS`), with the crash and its log
tail recorded; the session's remaining points run on the new server. A second death fails the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MAX_RESTARTS = 1  # per server session: one restart after a crash or hang; a second failure ends the session
LOG_TAIL_CHARS = 1500  # of the server's log, quoted in a reason
SERVED_RATIO_LIMIT = 1.0  # worst |a - b| / (atol + rtol * |b|) of a served output; above it the server is wrong


@dataclass(frozen=True)
class ServerHealth:
    """What the session observed of the server right after a load point."""

    exit_code: int | None  # None while it runs
    ready: bool  # its readiness probe answered in time
    log_tail: str = ""

    @property
    def alive(self) -> bool:
        return self.exit_code is None and self.ready


@dataclass(frozen=True)
class PointOutcome:
    status: str  # ok | failed
    reason: str | None
    server_failed: bool  # the server died or hung: the session restarts it (once) before the next point


def describe_health(server: str, health: ServerHealth) -> str:
    """One sentence for a server that died or hung, with its log tail."""
    if health.exit_code is not None:
        what = f"server {server} exited with code {health.exit_code} during the load point"
    else:
        what = f"server {server} no longer answered its readiness probe after the load point (hung or crashed)"
    tail = health.log_tail.strip()[-LOG_TAIL_CHARS:]
    return f"{what}; log tail:\n{tail}" if tail else f"{what}; its log is empty"


def describe_errors(errors: int, requests: int, errors_by_kind: dict, first_error: str) -> str:
    kinds = ", ".join(f"{kind}={count}" for kind, count in sorted(errors_by_kind.items()))
    text = f"{errors} of {requests} requests failed ({kinds})"
    return f"{text}; first error: {first_error}" if first_error else text


def judge_point(server: str, measurement: dict | None, load_error: str | None, health: ServerHealth,
                max_error_rate: float) -> PointOutcome:
    """The outcome of one load point. `measurement` is `Measurement.to_dict()` (None when the point did not run);
    `load_error` why it did not run."""
    reasons = []
    if not health.alive:
        reasons.append(describe_health(server, health))
    if measurement is None:
        reasons.append(load_error or "the load point did not run")
    else:
        requests, errors = int(measurement["requests"]), int(measurement["errors"])
        if requests == 0:
            reasons.append("no request was measured (none was sent in the measured time)")
        elif errors and not measurement["error_rate"] < max_error_rate:
            detail = describe_errors(errors, requests, measurement["errors_by_kind"],
                                     measurement.get("first_error", ""))
            reasons.append(f"{detail}; error_rate {measurement['error_rate']:.3g} is not below max_error_rate "
                           f"{max_error_rate:g}")
    if not reasons:
        return PointOutcome("ok", None, False)
    return PointOutcome("failed", "; ".join(reasons), not health.alive)


def errors_by_kind_json(measurement: dict) -> str:
    return json.dumps(measurement["errors_by_kind"], sort_keys=True)
