"""When a row may say `ok`: the outcome rules of a load point and of a server session, in one place.

The load generator records and the session observes; this module judges (docs/design.md#outcomes). A load
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

A point that passed all of these is then judged on the host's state while it ran (`judge_host`, on the readings of
`tasks.measure.hoststate`): it was **contended** when

- other work (steal included) used more than `max_neighbour_pct` (Param, default 25) of the host's CPU, or
- the server was starved: other work ran on the server's own CPUs at least STARVED_NEIGHBOUR_PCT of their time
  while the server, with work queued, waited for them: its threads' run-queue wait was at least STARVED_WAIT_RATIO
  of the CPU time it got (and at least STARVED_MIN_WAIT_PCT of its CPUs' time). A server alone on its CPUs waits
  only for its own threads (more of them than CPUs), and then no other work shows on its CPUs; a server that got
  its whole budget leaves no room for other work there. So this says "runnable, but the CPU it was given went to
  someone else", whatever its thread count.

The session then waits for the host to quiet (`host_quiet`, at most Param `quiet_wait_s`) and measures the point
once more; a re-measurement that is contended again keeps its figures with status `contended` and a reason naming
both readings. `max_neighbour_pct` 100 turns both rules off (a host shared by design); the state is still recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MAX_RESTARTS = 1  # per server session: one restart after a crash or hang; a second failure ends the session
LOG_TAIL_CHARS = 1500  # of the server's log, quoted in a reason
SERVED_RATIO_LIMIT = 1.0  # worst |a - b| / (atol + rtol * |b|) of a served output; above it the server is wrong
# Starvation (see the module's docstring). Measured on the 2-core development machine: three processes spinning on
# the core of the custom service (mlp, concurrency 1) took 75 % of that core and made the server wait 0.8 times as
# long as it ran. A server alone on its CPUs shows no other work there beyond kernel threads, so a fifth of the
# CPUs' time is a wide margin; a quarter of its running time spent waiting says the other work was in its way.
STARVED_NEIGHBOUR_PCT = 20.0  # other work on the server's CPUs, % of their time
STARVED_WAIT_RATIO = 0.25  # the server's run-queue wait / the CPU time it got
STARVED_MIN_WAIT_PCT = 5.0  # ... and at least this much of its CPUs' time (an idle server's waits are noise)
NEVER_CONTENDED_PCT = 100.0  # max_neighbour_pct at this value: no point is judged contended
DUET_HOST_DIFF_PCT = 10.0  # a duet pair whose two sides saw other work this many points apart is flagged
MEASURED_STATUSES = ("ok", "contended")  # a load point that ran cleanly: its figures are the server's (or contended)


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


@dataclass(frozen=True)
class Contention:
    """Why a load point was contended: `reason` a sentence, `summary` its figures in a few words."""

    reason: str
    summary: str


def _pct(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def judge_host(host: dict, max_neighbour_pct: float) -> Contention | None:
    """Was a load point contended? `host` holds HostState's figures (`neighbour_cpu_pct`, `steal_pct`,
    `server_cpu_share_pct`, `server_cpu_wait_pct`, `server_cpus_neighbour_pct`, `server_cores`); a figure that is
    None (its source missing here) breaks no rule."""
    if max_neighbour_pct >= NEVER_CONTENDED_PCT:
        return None
    reasons, summaries = [], []
    neighbour, steal = _pct(host.get("neighbour_cpu_pct")), _pct(host.get("steal_pct"))
    if neighbour is not None and neighbour > max_neighbour_pct:
        of_steal = f", the hypervisor's steal {steal:.0f} % of it" if steal and steal >= 0.5 else ""
        reasons.append(f"other work used {neighbour:.0f} % of the host's CPU during the point (more than "
                       f"max_neighbour_pct {max_neighbour_pct:g}{of_steal})")
        summaries.append(f"other work {neighbour:.0f} %")
    share, wait = _pct(host.get("server_cpu_share_pct")), _pct(host.get("server_cpu_wait_pct"))
    on_cpus = _pct(host.get("server_cpus_neighbour_pct"))
    if None not in (share, wait, on_cpus) and on_cpus >= STARVED_NEIGHBOUR_PCT and wait >= STARVED_MIN_WAIT_PCT \
            and wait >= STARVED_WAIT_RATIO * share:
        cores = host.get("server_cores") or "its"
        reasons.append(f"the server was starved on its own CPUs: other work ran on them {on_cpus:.0f} % of the "
                       f"time (at least {STARVED_NEIGHBOUR_PCT:g} %) while the server, with work queued, waited for a "
                       f"CPU {wait:.0f} % of the time of its {cores} CPU(s) and ran {share:.0f} % (a wait of at "
                       f"least {STARVED_WAIT_RATIO:g} of its running time)")
        summaries.append(f"the server got {share:.0f} % of its CPUs and waited {wait:.0f} %, other work took "
                         f"{on_cpus:.0f} %")
    if not reasons:
        return None
    return Contention("; ".join(reasons), ", ".join(summaries))


def host_quiet(host: dict, max_neighbour_pct: float) -> bool:
    """Is the host quiet enough to measure again? Read while the server is idle between points: other work within
    `max_neighbour_pct` of the host and under STARVED_NEIGHBOUR_PCT of the server's CPUs."""
    neighbour, on_cpus = _pct(host.get("neighbour_cpu_pct")), _pct(host.get("server_cpus_neighbour_pct"))
    return (neighbour is None or neighbour <= max_neighbour_pct) and (on_cpus is None
                                                                        or on_cpus < STARVED_NEIGHBOUR_PCT)


def contended_reason(first: Contention, waited_s: float, quieted: bool, again: Contention) -> str:
    """The reason of a point contended twice: both readings and the wait between them."""
    wait = f"waiting {waited_s:.0f} s" + ("" if quieted else " (the host did not quiet within quiet_wait_s)")
    return f"{first.reason}; re-measured after {wait}: still {again.summary}"


def pair_host_flag(sides: dict[str, dict]) -> str | None:
    """Why a duet pair's two sides saw different host states, or None (`sides`: a DuetPair's label -> figures, each
    with its `host`). A duet is judged on its ratio: other work that hits both sides is what it cancels, so a pair is
    never flagged for a busy host, only for other work one side saw and the other did not (their windows did not
    coincide, or the work ran on one side's CPUs)."""
    hosts = {label: figures.get("host") or {} for label, figures in sides.items()}
    if len(hosts) != 2:
        return None
    (label_a, a), (label_b, b) = hosts.items()
    for name, what in (("neighbour_cpu_pct", "other work on the host"),
                       ("server_cpus_neighbour_pct", "other work on the servers' CPUs")):
        x, y = _pct(a.get(name)), _pct(b.get(name))
        if x is not None and y is not None and abs(x - y) > DUET_HOST_DIFF_PCT:
            return (f"the two sides saw different host states: {what} {x:.0f} % ({label_a}) against {y:.0f} % "
                    f"({label_b}), more than {DUET_HOST_DIFF_PCT:g} points apart")
    return None


def errors_by_kind_json(measurement: dict) -> str:
    return json.dumps(measurement["errors_by_kind"], sort_keys=True)
