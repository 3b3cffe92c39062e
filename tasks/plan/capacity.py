"""How many measuring hosts a nightly matrix needs for a time window, from the timelines of a real published run.

A host runs one server session at a time (tasks/plan/hosts.py), so a night on one host costs the sum of its sessions
plus the gaps between them. From a run's `logs/sessions.json` (one timeline per server life: start, ready, every
load point's begin and end, stop) this measures, per cell and per session:

    point_s       a load point: load_end - load_begin (warm-up and measured seconds, the generator's start)
    overhead_s    a session outside its load points: stopped - start - its points (start-up, served-output check,
                  health checks, stop)
    gap_s         between two sessions on one host: the next start - the previous stop (Airflow starting the next
                  task: scheduler, queue, worker; 0 when no host ran two sessions)

A matrix of M models x S stacks (server and format) x L load points is M*S sessions of
`overhead_s + L * point_s + gap_s` each (the run's means); with sessions of one length, a host fits
floor(window / session) of them, so the hosts needed are ceil(M*S / that). A session longer than the window
cannot be split over hosts: it is reported, not hidden. The same arithmetic is the lower bound for the
KubernetesExecutor path of docs/scaling.md, where the "host" is a node of the measuring node pool.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from tasks.core.errors import ConfigError
from tasks.core.results import OVERLOAD_MODE
from tasks.core.workloads import TRACE_MODE, TRACE_MODES
from tasks.loadgen.sweep import DEFAULT_MAX_POINTS, MAX_CONFIRMS, doubling
from tasks.loadgen.trace import planned_replay_s
from tasks.plan.cells import lengthens


@dataclass(frozen=True)
class CellDurations:
    """What the run's timelines say one load point, one session's own overhead and one gap between sessions cost."""

    sessions: int
    points: int
    point_s: float
    point_max_s: float
    overhead_s: float
    overhead_max_s: float
    gap_s: float
    gaps: int
    hosts: tuple[str, ...]
    busy_s: float  # the sum of every session's server life, start to stopped

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HostEstimate:
    models: int
    stacks: int
    loads: int
    window_s: float
    session_s: float
    sessions: int
    host_time_s: float
    sessions_per_host: int
    hosts_needed: int | None  # None: one session is longer than the window
    note: str

    def to_dict(self) -> dict:
        return asdict(self)


def cell_durations(timelines: list[dict]) -> CellDurations:
    """Per-point, per-session and between-session durations of a run's server sessions (tuned configurations and
    duets are sessions too)."""
    points, overheads, lives = [], [], []
    by_host: dict[str, list[dict]] = {}
    for t in timelines:
        if not t or t.get("start") is None or t.get("stopped") is None:
            continue  # a session that never started a server (skipped or failed before)
        own = [c["load_end"] - c["load_begin"] for c in (t.get("cells") or {}).values()
               if c.get("load_begin") is not None and c.get("load_end") is not None]
        life = t["stopped"] - t["start"]
        points += own
        overheads.append(max(0.0, life - sum(own)))
        lives.append(life)
        by_host.setdefault(t.get("host") or "?", []).append(t)
    if not lives:
        raise ConfigError("logs/sessions.json", len(timelines), "must hold at least one server session with a start "
                                                               "and a stop (this run measured nothing)")
    gaps = []
    for sessions in by_host.values():
        ordered = sorted(sessions, key=lambda t: t["start"])
        gaps += [max(0.0, b["start"] - a["stopped"]) for a, b in zip(ordered, ordered[1:], strict=False)]
    return CellDurations(
        sessions=len(lives), points=len(points),
        point_s=statistics.fmean(points) if points else 0.0, point_max_s=max(points, default=0.0),
        overhead_s=statistics.fmean(overheads), overhead_max_s=max(overheads),
        gap_s=statistics.fmean(gaps) if gaps else 0.0, gaps=len(gaps),
        hosts=tuple(sorted(by_host)), busy_s=sum(lives))


def hosts_needed(durations: CellDurations, models: int, stacks: int, loads: int, window_s: float) -> HostEstimate:
    """Hosts for M models x S stacks x L load points within `window_s`, one server at a time per host."""
    for name, value in (("models", models), ("stacks", stacks), ("loads", loads)):
        if not (isinstance(value, int) and value >= 1):
            raise ConfigError(name, value, "must be an integer >= 1")
    if not window_s > 0:
        raise ConfigError("window_s", window_s, "must be > 0")
    session_s = durations.overhead_s + loads * durations.point_s + durations.gap_s
    sessions = models * stacks
    per_host = math.floor(window_s / session_s) if session_s > 0 else sessions
    if per_host < 1:
        return HostEstimate(models, stacks, loads, window_s, session_s, sessions, sessions * session_s, 0, None,
                            f"one session ({session_s:.0f} s) is longer than the window: shorten its load points "
                            "or widen the window (a session cannot be split over hosts)")
    hosts = math.ceil(sessions / per_host)
    note = (f"{sessions} sessions of ~{session_s:.1f} s; a host fits {per_host} in the window"
            + ("" if durations.gaps else "; no host ran two sessions in this run, so the gap between sessions "
                                         "(Airflow starting the next task) is not in the figure"))
    return HostEstimate(models, stacks, loads, window_s, session_s, sessions, sessions * session_s, per_host, hosts,
                        note)


def run_matrix(plan: dict) -> tuple[int, int, int]:
    """(models, stacks, load points per session) of a published run's plan.json (stacks: server x format pairs per
    model; load points: the most planned cells of a session, a sweep counted once), the cells its night's budget
    deferred counted in."""
    sessions = [s for s in plan.get("sessions", []) if s.get("role") != "control"] or plan.get("sessions", [])
    cells: dict[tuple, set[str]] = {}
    for session in sessions:
        cells.setdefault((session["model"], session["server"], session["format"]), set()).update(
            c.get("cell_id") or str(i) for i, c in enumerate(session["cells"]))
    for item in (plan.get("night") or {}).get("deferred") or []:  # the matrix the budget left for later nights
        cells.setdefault((item["model"], item["server"], item["format"]), set()).add(item["cell_id"])
    models = len({m for m, _, _ in cells}) or 1
    stacks = len({(s, f) for _, s, f in cells}) or 1
    loads = max((len(c) for c in cells.values()), default=1)
    return models, stacks, loads


def measuring_estimate_s(cells: list, config) -> tuple[float, float, float]:
    """(seconds of the plan's load points, what lengthening adds where each lengthening cell takes one longer look,
    the most it can add): each point warm-up plus `duration_s`; a concurrency sweep at its most points (doubling from
    `workers` up to its largest load), a rate search at `DEFAULT_MAX_POINTS`; with `max_point_s`, a longer look is
    warm-up plus at most `max_point_s`, taken only on a stack's efficient wires (`lengthens`) and only where an answer
    hinges on an undecided point: a single point, a concurrency sweep's fastest point, a rate search's rates below
    its highest passing one (at most MAX_CONFIRMS, each first a point of its own). Start-ups and conversions are not
    in it (`capacity` measures them from a published run)."""
    point = config.warmup_s + config.duration_s
    longer = config.warmup_s + (config.max_point_s or 0.0)
    points, looks_s, most_looks_s = 0, 0.0, 0.0
    for cell in cells:
        if cell.skip:
            continue
        if cell.mode in TRACE_MODES:  # a trace's point is its replay: counted in points' seconds as that many
            points += planned_replay_s(cell.workload, cell.load, cell.mode != TRACE_MODE) / point
        elif cell.mode == "concurrency-sweep":
            points += len(doubling(config.workers, int(cell.load)))
        elif cell.mode == "rate-search":
            points += DEFAULT_MAX_POINTS
        else:
            points += 1
        if cell.mode != OVERLOAD_MODE and lengthens(cell, config):  # never without max_point_s
            searched = cell.mode == "rate-search"
            look = longer + (point if searched else 0.0)
            looks_s += look
            most_looks_s += look * (MAX_CONFIRMS if searched else 1)
    return points * point, looks_s, most_looks_s
