"""Run one load point in separate generator processes (pinned to their own cores when the host allows): the
coordinator, in the measuring task's process.

The orchestrator calls `run_load_point`; it starts `settings.workers` processes of `python -m tasks.loadgen.worker`
(tasks/loadgen/worker.py, each given a `WorkerJob`)
so each generator has an interpreter, an event loop and CPU affinity of its own. Every worker opens its
connections and reports ready; the parent then hands all of them the same start time (CLOCK_MONOTONIC is
system-wide), so their recordings share t0 and merge by concatenation: the merged percentiles are exact,
and each worker's HDR histogram adds up to the merged one bucket for bucket.

The codec's `transport` picks the engine: `http_engine.py` (lean HTTP/1.1) or `grpc_engine.py` (grpc.aio, for
KServe v2 gRPC on the endpoint's "grpc" port); both write the same `Recording`.

Given the server's reader (`window_reader.ServerWindowReader`), the parent reads the server's own counter, timings
and CPU time at the start and end of the measured time and before/after the whole load point, so the server-side
throughput, breakdown and CPU are recorded next to the client's figures over the same window.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tasks.core.errors import LoadTestError
from tasks.core.paths import REPO_ROOT
from tasks.core.spec import ModelSpec
from tasks.loadgen.measurement import Measurement, ServerCounts, ServerTiming, summarize
from tasks.loadgen.protocols.base import OK
from tasks.loadgen.recording import Recording, window_stable
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.window_reader import ServerWindowReader
from tasks.loadgen.worker import SCHEDULE_FILE, WINDOW_LINE, Schedule, WorkerJob, prepare_worker
from tasks.runtimes import interrupts
from tasks.serve.base import Endpoint

PROCESS_GRACE_S = 60.0
READY_TIMEOUT_S = 60.0  # workers must import, connect and report ready within this
READER_DRAIN_S = 5.0  # after the workers exit, at most this long for their last window lines to be read
START_LEAD_NS = 50_000_000  # the common start is this far after the last worker reported ready
REACHABLE_TIMEOUT_S = 2.0


def check_reachable(endpoint: Endpoint, timeout_s: float = REACHABLE_TIMEOUT_S) -> None:
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s):
            return
    except OSError as exc:
        raise LoadTestError(f"endpoint={endpoint.base_url}: must accept TCP connections before load starts "
                            f"({exc}); no load was sent") from exc


@dataclass(frozen=True)
class PointHooks:
    """What the caller does while a load point runs: `progress` receives one line per measured window
    (`WindowProgress`); `agree_start` turns the point's proposed start (CLOCK_MONOTONIC ns, once its workers are
    ready) into the start it shares with another load point run at the same time (a duet: `StartRendezvous.agree`)."""

    progress: Callable[[str], object] | None = None
    agree_start: Callable[[int], int] | None = None


def run_load_point(endpoint: Endpoint, spec: ModelSpec | None, settings: LoadSettings, workdir: Path, *,
                   cpus: tuple[int, ...] = (), server: ServerWindowReader | None = None,
                   hooks: PointHooks | None = None,
                   schedule: Schedule | None = None) -> tuple[Measurement, Path]:
    """Drive `endpoint` at one load point; return the summary and the path of the merged raw recording.

    `server`, when given, is read before the start, at both ends of the measured time and after the point: the
    server's own count of successful requests, its timings (`measurement.ServerTiming`; a read that fails leaves
    the point without them, never fails it) and its CPU time, so its CPU is the one over exactly the window its
    throughput is counted in (`Measurement.server_window_cpu_pct`). `hooks`: the caller's part while the point
    runs (`PointHooks`). `schedule`, when given, replaces the open loop's steady schedule with its own send times: an
    overload phase's (tasks/loadgen/overload.py) or a trace's replay (tasks/loadgen/trace.py); `settings` then open
    loop, their warm-up plus `duration_s` the schedule's length).
    """
    hooks = hooks or PointHooks()
    interrupts.check()
    check_reachable(endpoint)
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / "job.json"
    schedule_file = None
    if schedule is not None:  # written once: a long trace is too big for the job's JSON
        schedule_file = str(workdir / SCHEDULE_FILE)
        np.save(schedule_file, schedule.schedule_ns())
    job.write_text(WorkerJob(endpoint.host, endpoint.port, endpoint.model_name, endpoint.protocol,
                             json.loads(spec.to_json()) if spec else None, settings.to_dict(),
                             schedule_file).to_json())
    limit_s = settings.warmup_s + settings.duration_s + settings.request_timeout_s + PROCESS_GRACE_S
    procs: list[subprocess.Popen] = []
    scraper: ServerScraper | None = None
    try:
        for index in range(settings.workers):
            affinity = (cpus[index % len(cpus)],) if len(cpus) >= settings.workers > 1 else cpus
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tasks.loadgen.worker", "--job", str(job), "--out", str(workdir),
                 "--worker", str(index)],
                env=worker_env(), cwd=REPO_ROOT,  # importable from any working directory
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(workdir / f"worker{index}.log", "wb"),
                text=True, preexec_fn=lambda a=affinity: prepare_worker(a),
            ))
        interrupts.check()  # a stop requested while the workers forked is lost by fork hooks (runtimes/interrupts)
        for index, proc in enumerate(procs):
            _await_ready(proc, index, workdir)
        start_ns = time.monotonic_ns() + START_LEAD_NS
        if hooks.agree_start is not None:
            start_ns = hooks.agree_start(start_ns)
        if server is not None:
            scraper = ServerScraper(server_probe(server), start_ns, settings)
        # the workers' stdout is always drained (a full pipe would block a worker mid-load)
        windows = WindowProgress(settings, hooks.progress or (lambda line: None))
        readers = []
        for index, proc in enumerate(procs):
            proc.stdin.write(f"{start_ns}\n")
            proc.stdin.close()
            readers.append(threading.Thread(target=windows.follow, args=(index, proc.stdout), daemon=True))
            readers[-1].start()
        deadline = time.monotonic() + limit_s
        for index, proc in enumerate(procs):
            code = interrupts.wait(proc, deadline)
            if code is None:
                raise LoadTestError(f"load generator worker {index}: ran past its bound of {limit_s:.0f} s")
            if code != 0:
                raise LoadTestError(f"load generator worker {index} failed (exit {code}):\n"
                                    f"{_tail(workdir / f'worker{index}.log')}")
        for reader in readers:  # a worker's last window line may still be in its pipe when it exits
            reader.join(timeout=READER_DRAIN_S)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if scraper is not None:
            scraper.finish()
    parts = [Recording.load(str(workdir / f"recording{i}.npz")) for i in range(settings.workers)]
    recording = Recording.merge(parts)
    recording.save(str(workdir / "recording.npz"))
    counts = scraper.counts(recording) if scraper is not None else None
    timing = scraper.timing() if scraper is not None else None
    cpu_pct = scraper.cpu_pct() if scraper is not None else None
    latency_from = "sent" if settings.mode == "concurrency" else "scheduled"
    return (summarize(recording, settings, latency_from=latency_from, server=counts, timing=timing,
                      server_window_cpu_pct=cpu_pct),
            workdir / "recording.npz")


COUNT = "count"  # the probe's key for the server's request count
CPU_S = "cpu_s"  # the probe's key for the server's CPU time


def server_probe(server: ServerWindowReader) -> Callable[[], dict[str, float]]:
    """One scrape of what the server reports: its success counter (errors propagate: the counter is checked
    against the client's), its timings and its CPU time (a failed scrape of either is none: neither is ever worth a
    load point). What the server does not report is absent."""
    def probe() -> dict[str, float]:
        count = server.request_count()
        values = {COUNT: float(count)} if count is not None else {}
        try:
            values.update({f"timing.{k}": float(v) for k, v in (server.timings() or {}).items()})
        except (OSError, ValueError, KeyError):
            pass
        try:
            seconds = server.cpu_s()
        except (OSError, ValueError, KeyError):
            seconds = None
        if seconds is not None:
            values[CPU_S] = float(seconds)
        return values

    return probe


class StartRendezvous:
    """One start time for `parties` load points run at once (the two sides of a duet): each proposes its own
    (`agree(start_ns)`, once its workers are ready) and all get the latest, so their measured windows coincide.
    A party that does not arrive within `timeout_s` breaks the rendezvous for all (threading.BrokenBarrierError)."""

    def __init__(self, parties: int, timeout_s: float = READY_TIMEOUT_S) -> None:
        self._barrier = threading.Barrier(parties, timeout=timeout_s)
        self._lock = threading.Lock()
        self._proposals: list[int] = []

    def agree(self, start_ns: int) -> int:
        with self._lock:
            self._proposals.append(start_ns)
        self._barrier.wait()
        return max(self._proposals)

    def abort(self) -> None:
        """A party that cannot come (its load point failed before its start) releases the others at once."""
        self._barrier.abort()


def worker_env() -> dict[str, str]:
    """The caller's environment with the repository first on PYTHONPATH, so `python -m tasks.loadgen.worker` imports
    wherever the caller's working directory is."""
    paths = [str(REPO_ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _await_ready(proc: subprocess.Popen, index: int, workdir: Path) -> None:
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT_S)
    if not result or result[0].strip() != "ready":
        proc.kill()
        proc.wait()
        raise LoadTestError(f"load generator worker {index}: not ready within {READY_TIMEOUT_S:.0f} s:\n"
                            f"{_tail(workdir / f'worker{index}.log')}")


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class WindowProgress:
    """One progress line per measured window, once every worker reported it: load, throughput, errors, latency
    p50 (the workers' count-weighted mean) and p99 (their largest), and whether the stability rule holds so far.
    For people watching a task's log; the published figures come from the merged recording."""

    def __init__(self, settings: LoadSettings, emit: Callable[[str], object]) -> None:
        self.settings, self.emit = settings, emit
        self.reports: dict[int, list[dict]] = {}
        self.rps: list[float] = []
        self.lock = threading.Lock()

    def follow(self, worker: int, stream) -> None:
        for line in stream:
            if line.startswith(WINDOW_LINE):
                try:
                    self.add(json.loads(line[len(WINDOW_LINE):]))
                except ValueError:
                    continue

    def add(self, figures: dict) -> None:
        with self.lock:
            reports = self.reports.setdefault(figures["window"], [])
            reports.append(figures)
            if len(reports) == self.settings.workers:
                self.emit(self.line(figures["window"], reports))

    def line(self, k: int, reports: list[dict]) -> str:
        ok = sum(r["ok"] for r in reports)
        errors = sum(r["errors"] for r in reports)
        rps = ok / self.settings.window_s
        self.rps.append(rps)
        p50s = [(r["p50_ms"], r["ok"]) for r in reports if r["p50_ms"] is not None]
        p50 = sum(p * n for p, n in p50s) / sum(n for _, n in p50s) if p50s else None
        p99 = max((r["p99_ms"] for r in reports if r["p99_ms"] is not None), default=None)
        stable = window_stable(self.rps, self.settings.stability_pct)

        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f} ms"

        return (f"window {k}/{self.settings.max_windows}: {self.settings.mode} {self.settings.load:g}, "
                f"{rps:.1f} req/s, errors {errors}, p50 {ms(p50)}, p99 {ms(p99)}, stable so far: "
                f"{'yes' if stable else 'no'}")


class ServerScraper:
    """Scrapes what the server reports (`server_probe`) before the start, at both ends of the measured time, and
    after the load point."""

    def __init__(self, probe: Callable[[], dict[str, float]], start_ns: int, settings: LoadSettings) -> None:
        self.probe, self.start_ns = probe, start_ns
        self.samples: dict[str, tuple[int, dict[str, float]]] = {"before": self._scrape()}
        self.window = (start_ns + int(settings.warmup_s * 1e9),
                       start_ns + int((settings.warmup_s + settings.duration_s) * 1e9))
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _scrape(self) -> tuple[int, dict[str, float]]:
        before = time.monotonic_ns()
        values = self.probe()
        return (before + time.monotonic_ns()) // 2, values

    def _run(self) -> None:
        for name, at_ns in zip(("window_start", "window_end"), self.window, strict=True):
            if self.done.wait(max(0.0, (at_ns - time.monotonic_ns()) / 1e9)) and name == "window_start":
                return  # the load point ended before its measured time began: no window
            self.samples[name] = self._scrape()

    def finish(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        try:
            self.samples["after"] = self._scrape()
        except OSError:
            pass

    def counts(self, recording: Recording) -> ServerCounts | None:
        """The server's count against the client's over the measured window and the whole point, where every
        scrape read the server's counter."""
        s = self.samples
        if not all(k in s and COUNT in s[k][1] for k in ("before", "window_start", "window_end", "after")):
            return None
        w0, w1 = s["window_start"][0] - recording.t0_ns, s["window_end"][0] - recording.t0_ns
        ok = recording.codes == OK
        in_window = ok & (recording.done_ns >= w0) & (recording.done_ns < w1)
        return ServerCounts(window_start_ns=w0, window_end_ns=w1,
                            server_requests=s["window_end"][1][COUNT] - s["window_start"][1][COUNT],
                            client_requests=int(in_window.sum()),
                            server_requests_total=s["after"][1][COUNT] - s["before"][1][COUNT],
                            client_requests_total=int(ok.sum()))

    def timing(self) -> ServerTiming | None:
        """The server's own timings over the measured window (both scrapes answered), else None."""
        if not {"window_start", "window_end"} <= self.samples.keys():
            return None
        start, end = (self.samples[k][1] for k in ("window_start", "window_end"))
        deltas = {key.removeprefix("timing."): end[key] - start[key] for key in end
                  if key.startswith("timing.") and key in start}
        return ServerTiming.from_deltas(deltas)

    def cpu_pct(self) -> float | None:
        """The server's CPU over the measured window (100 = one core), where both ends read its CPU time."""
        ends = [self.samples.get(k) for k in ("window_start", "window_end")]
        if any(end is None or CPU_S not in end[1] for end in ends):
            return None
        (t0, start), (t1, end) = ends
        return 100.0 * (end[CPU_S] - start[CPU_S]) / ((t1 - t0) / 1e9) if t1 > t0 else None


