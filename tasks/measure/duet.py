"""A duet: two servers measured at the same time on the same cores, so that what the host does to one it does to
the other, and their ratio is the stack's change (Bulej et al., "Duet benchmarking", ICPE 2020).

    result = measure_duet(reference, candidate, settings, decided=...)
    result.pairs[i].sides["candidate"]["throughput_rps"] / result.pairs[i].sides["reference"]["throughput_rps"]

Both sides run in one host session (the host lock keeps every other session out), on the same server CPU set; their
two load generators share the generator's CPUs and are driven at the same load, with one common start
(`StartRendezvous`), so their measured windows coincide. A pair is one such simultaneous load point, on servers
started fresh for it and warmed for at least FRESH_SERVER_WARMUP_S inside the point (discarded); the side started
first (server and generator) alternates from pair to pair. Pairs are added, from `settings.min_pairs` up to
`settings.max_pairs`, until `decided(pairs)` says the verdict is settled (Pinpoint's way: measure more only while
undecided). Each side's row figures include the server's CPU time per request (its process tree or container, over
the measured window) and, under `host`, the host's state over the whole pair (`pair_probes`,
tasks/measure/hoststate.py: the other side's server counts as ours; `tasks.validate.outcome.pair_host_flag` tells a
pair whose sides saw different ones).

This is the one place two servers run at once on a host, by design. Nothing here judges: tasks/regress/duet_verdict.py
reads the pairs.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from tasks.convert.artifact import Artifact
from tasks.core import progress
from tasks.core.spec import ModelSpec
from tasks.loadgen.coordinator import PointHooks, StartRendezvous, run_load_point
from tasks.loadgen.measurement import server_cpu
from tasks.loadgen.resources import sampler_for
from tasks.loadgen.settings import LoadSettings
from tasks.measure.hoststate import HostStateProbe
from tasks.measure.point import observe_health
from tasks.measure.served_check import check_served_outputs
from tasks.measure.window_reader import LiveServerWindowReader
from tasks.serve.base import Server
from tasks.serve.hostlock import host_lock
from tasks.serve.launchers.base import Launcher
from tasks.serve.session import LiveServer, SessionSettings, server_session

FRESH_SERVER_WARMUP_S = 1.0  # every pair's load point warms its fresh servers at least this long (discarded)


@dataclass(frozen=True)
class DuetSide:
    """One side of a duet: a server (with its options) serving an artifact, and the inputs that describe it."""

    label: str  # "reference" or "candidate" ("a" / "b" in an A/A duet)
    server: Server
    artifact: Artifact
    spec: ModelSpec
    inputs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DuetSettings:
    """Where and how a duet runs: its run and name, the shared server CPUs and generator CPUs, the load point."""

    run_id: str
    duet_id: str
    log_dir: Path
    launcher: Launcher
    loads: tuple[LoadSettings, ...]  # the load points of the cells the duet compares, each its own pairs
    protocols: tuple[str | None, ...] = ()  # each load point's codec (its cell's wire); none: the server's REST JSON
    server_cpus: tuple[int, ...] = ()
    generator_cpus: tuple[int, ...] = ()
    memory: str | None = None
    ready_timeout_s: float = 120.0
    min_pairs: int = 3
    max_pairs: int = 8
    max_batch_size: int = 8
    # label -> that side's own server CPUs instead of the shared `server_cpus` (benchmarks/duet_nights.py measures
    # this alternative, each side on a core of its own, Japke et al.); empty: both sides share them, the duet's way
    side_cpus: dict[str, tuple[int, ...]] = field(default_factory=dict)
    first_index: int = 0  # the first pair's number: a duet measured a pair at a time goes on alternating its order
    progress_left: str = ""  # what is left, for its pairs' and rounds' progress lines ("": this call's own count)


@dataclass
class DuetPair:
    load: int  # which of the settings' load points
    index: int  # the pair's number at that load point
    first: str  # the label of the side whose generator started first
    sides: dict[str, dict]  # label -> that side's figures (`_figures`)

    def to_dict(self) -> dict:
        return {"load": self.load, "index": self.index, "first": self.first, "sides": self.sides}


@dataclass
class DuetResult:
    pairs: list[DuetPair] = field(default_factory=list)
    error: str | None = None  # why the duet stopped short (a side failed its served check, died, a load point failed)
    stop_reason: str = ""
    timelines: dict[str, list[dict]] = field(default_factory=dict)  # label -> each server life's timeline
    served: dict[str, dict] = field(default_factory=dict)  # label -> its served-output check
    versions: dict[str, str] = field(default_factory=dict)  # label -> the server's version
    runtime_images: dict[str, str] = field(default_factory=dict)  # label -> what ran it (image or venv)

    def to_dict(self) -> dict:
        return {"pairs": [p.to_dict() for p in self.pairs], "error": self.error, "stop_reason": self.stop_reason,
                "served": self.served, "versions": self.versions, "runtime_images": self.runtime_images}


def _figures(measurement, sampler) -> dict:
    cpu_pct, per_request = server_cpu(measurement, sampler.summary().server_cpu_pct)
    return {"throughput_rps": measurement.throughput_rps, "latency_ms_p50": measurement.latency_ms_p50,
            "latency_ms_p99": measurement.latency_ms_p99, "server_cpu_us_per_request": per_request,
            "latency_samples": measurement.latency_samples, "requests": measurement.requests,
            "errors": measurement.errors, "generator_cpu_pct": measurement.generator_cpu_pct, "server_cpu_pct": cpu_pct}


@dataclass(frozen=True)
class PairPoint:
    """One pair's simultaneous load point, the same for both sides: the load and its codec, the generators' CPUs,
    the common start, and where each side's figures or error go (by its label)."""

    load: LoadSettings
    protocol: str | None
    generator_cpus: tuple[int, ...]
    rendezvous: StartRendezvous
    figures: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _load_point(point: PairPoint, side: DuetSide, live: LiveServer, server: LiveServerWindowReader,
                workdir: Path) -> None:
    try:
        endpoint = live.server.wire_endpoint(live.endpoint, point.protocol)
        with sampler_for(live.handle) as sampler:
            measurement, _ = run_load_point(endpoint, side.spec, point.load, workdir, cpus=point.generator_cpus,
                                            server=server, hooks=PointHooks(agree_start=point.rendezvous.agree))
        point.figures[side.label] = _figures(measurement, sampler)
    except BaseException as exc:  # noqa: BLE001 - reported by the caller; the other side's rendezvous breaks too
        point.errors[side.label] = f"{type(exc).__name__}: {exc}"
        point.rendezvous.abort()


@contextmanager
def pair_probes(sides: list[DuetSide], lives: dict[str, LiveServer],
                settings: DuetSettings) -> Iterator[dict[str, HostStateProbe]]:
    """One host-state probe per side, all over one window around the whole pair, each counting the other server as
    ours. The window is the pair's, not each side's own load point: a side's point ends before the other side's
    generator workers are reaped (a child's CPU is ours only once reaped), so a probe of it would read their
    start-up as other work, and the two sides of a pair would disagree about the host."""
    with ExitStack() as stack:
        yield {side.label: stack.enter_context(HostStateProbe(
            lives[side.label].handle, settings.server_cpus, settings.generator_cpus,
            others=tuple(lives[o.label].handle for o in sides if o is not side))) for side in sides}


def run_pair(load_index: int, index: int, sides: list[DuetSide], lives: dict[str, LiveServer],
             settings: DuetSettings, scratch: Path) -> tuple[DuetPair | None, str | None]:
    """One simultaneous load point of both sides (the first of `sides` starts its generator first)."""
    # the pair's servers are fresh: their first second (first inferences, arenas, thread pools) is warm-up, however
    # short the cell's own (a shorter warm-up leaves their start-up inside the measured window)
    load = settings.loads[load_index]
    load = replace(load, warmup_s=max(load.warmup_s, FRESH_SERVER_WARMUP_S))
    protocol = settings.protocols[load_index] if load_index < len(settings.protocols) else None
    point = PairPoint(load, protocol, settings.generator_cpus, StartRendezvous(len(sides)))
    out, errors = point.figures, point.errors
    threads = []
    limit_s = load.warmup_s + load.duration_s + load.request_timeout_s + 120.0
    with pair_probes(sides, lives, settings) as probes:
        for side in sides:
            workdir = Path(tempfile.mkdtemp(prefix=f"duet-{side.label}-", dir=scratch))
            reader = LiveServerWindowReader(probes[side.label].server)  # the CPU alone, read by the side's probe
            thread = threading.Thread(target=_load_point, args=(point, side, lives[side.label], reader, workdir),
                                      daemon=True)
            thread.start()
            threads.append(thread)
        deadline = time.monotonic() + limit_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        return None, f"pair {index}: a load point ran past its bound of {limit_s:.0f} s"
    if errors:
        return None, f"pair {index}: " + "; ".join(f"{label}: {text}" for label, text in sorted(errors.items()))
    for side in sides:
        health = observe_health(lives[side.label])
        if not health.alive:
            return None, (f"pair {index}: the {side.label} server {side.server.name} died or hung "
                          f"(exit {health.exit_code}); log tail:\n{health.log_tail[-1500:]}")
    for label, probe in probes.items():
        out[label]["host"] = probe.result.row_fields()
    return DuetPair(load_index, index, sides[0].label, out), None


def start_lives(order: list[DuetSide], settings: DuetSettings, result: DuetResult,
                 stack: ExitStack) -> dict[str, LiveServer]:
    """Fresh servers of both sides, started in `order`, each checked to serve its model's outputs; {} when a side's
    outputs differ from its reference (`result.error` says which)."""
    lives: dict[str, LiveServer] = {}
    for side in order:
        session = SessionSettings(settings.run_id, f"{settings.duet_id}.{side.label}", settings.log_dir,
                                  settings.ready_timeout_s, settings.side_cpus.get(side.label, settings.server_cpus),
                                  settings.memory)
        timeline: dict = {}
        result.timelines.setdefault(side.label, []).append(timeline)
        lives[side.label] = stack.enter_context(server_session(
            side.server, side.artifact, side.spec, settings.launcher, session, timeline=timeline))
        result.versions[side.label] = lives[side.label].server_version
        result.runtime_images[side.label] = lives[side.label].runtime_image
    for side in order:
        live = lives[side.label]
        check = check_served_outputs(live.server.protocol, live.endpoint, side.spec, side.artifact,
                                     settings.max_batch_size)
        if side.label not in result.served or not check.passed:  # the first pair's check, or the one that failed
            result.served[side.label] = check.to_dict()
        if not check.passed:
            result.error = (f"the {side.label} server {side.server.name} served outputs that differ from "
                            f"the reference: {check.detail}")
            return {}
    return lives


def pair_figure(pair: DuetPair, sides: list[DuetSide]) -> str:
    """"throughput 101.2 / 99.8 req/s (candidate / reference)": a pair's key figure, for progress lines."""
    figures = [pair.sides.get(side.label, {}).get("throughput_rps") for side in sides[::-1]]
    if any(not isinstance(f, (int, float)) for f in figures):
        return ""
    return f"throughput {figures[0]:.1f} / {figures[1]:.1f} req/s ({sides[1].label} / {sides[0].label})"


def measure_duet(reference: DuetSide, candidate: DuetSide, settings: DuetSettings,
                 decided: Callable[[int, list[DuetPair]], bool] | None = None) -> DuetResult:
    """Both sides served at once on the same CPUs; at each load point, pairs of simultaneous load points until
    `decided(load index, that load's pairs)` or the budget. Every pair has servers of its own, started in the
    pair's order (reference first, then candidate first, ...): whatever one server life or the start order does
    to a server's speed varies from pair to pair, where the paired test sees it as noise, instead of being shared
    by every pair of the duet and read as the change."""
    result = DuetResult()
    sides = [reference, candidate]
    scratch = Path(tempfile.mkdtemp(prefix="duet-", dir=settings.log_dir.parent))
    try:
        with host_lock(settings.run_id, settings.duet_id):
            stops = []
            for load_index in range(len(settings.loads)):
                mine: list[DuetPair] = []
                for index in range(settings.first_index, settings.first_index + settings.max_pairs):
                    order = sides if index % 2 == 0 else sides[::-1]
                    begin = time.monotonic()
                    with ExitStack() as stack:
                        lives = start_lives(order, settings, result, stack)
                        if not lives:
                            return result
                        pair, error = run_pair(load_index, index, order, lives, settings, scratch)
                    if error:
                        result.error = error
                        return result
                    mine.append(pair)
                    result.pairs.append(pair)
                    progress.emit("pair", f"{settings.duet_id} pair {index}", pair_figure(pair, sides),
                                  time.monotonic() - begin,
                                  settings.progress_left or f"pair {len(mine)} of at most {settings.max_pairs} at "
                                                            f"load {load_index + 1} of {len(settings.loads)}")
                    if len(mine) >= settings.min_pairs and decided is not None and decided(load_index, mine):
                        stops.append(f"load {load_index}: decided after {len(mine)} pairs")
                        break
                else:
                    stops.append(f"load {load_index}: the budget of {settings.max_pairs} pairs")
            result.stop_reason = "; ".join(stops)
    except Exception as exc:  # noqa: BLE001 - a side that does not start: the duet says why, the run goes on
        result.error = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result
