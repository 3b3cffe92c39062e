"""A load generator worker: one process of a load point's `settings.workers`, started by the coordinator
(tasks/loadgen/coordinator.py) as `python -m tasks.loadgen.worker --job job.json --out DIR --worker N`.

It reads its `WorkerJob`, encodes the request once, opens its connections, says `ready`, waits on stdin for the
common start time, drives its share of the load point (`worker_share`) on the engine its codec's transport picks
(`http_engine.py`, lean HTTP/1.1, or `grpc_engine.py`, grpc.aio), prints one `window ` line per measured window and
saves its recording as `recording<N>.npz`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from tasks.core.spec import ModelSpec, make_inputs
from tasks.loadgen import http_engine
from tasks.loadgen.http_engine import arrival_schedule_ns
from tasks.loadgen.protocols import get_codec
from tasks.loadgen.recording import Recording
from tasks.loadgen.settings import LoadSettings

PR_SET_PDEATHSIG = 1
WINDOW_LINE = "window "  # a worker's stdout line with one measured window's figures (JSON after it)
SCHEDULE_FILE = "schedule.npy"  # an explicit schedule's send times, ns from the start, beside the job


class Schedule(Protocol):
    """Send times of an open-loop point other than its steady rate's: an overload phase
    (tasks/loadgen/overload.py), a trace's replay (tasks/loadgen/trace.py)."""

    def schedule_ns(self, stride: int = 1, offset: int = 0) -> np.ndarray:
        """ns from the start; worker `offset` of `stride` takes every stride-th send."""


@dataclass(frozen=True)
class WorkerJob:
    """What every worker of one load point drives: the endpoint, its codec's protocol, the model's spec (None: a
    request without tensors), the load settings, and the file of an explicit schedule's send times (None: the
    settings' own; `Schedule`)."""

    host: str
    port: int
    model_name: str
    protocol: str
    spec: dict | None
    settings: dict
    schedule_file: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerJob:
        return cls(**json.loads(text))

    @property
    def load_settings(self) -> LoadSettings:
        return LoadSettings.from_dict(self.settings)


def worker_share(settings: LoadSettings, index: int) -> dict:
    """What worker `index` of `settings.workers` drives: its connections, or its rate, phase and seed."""
    n = settings.workers
    if settings.mode == "concurrency":
        c = settings.concurrency
        return {"concurrency": c // n + (1 if index < c % n else 0)}
    # N interleaved constant streams (every N-th slot) make the one stream; N Poisson streams of rate/N with
    # seeds seed+i make one Poisson stream of the full rate.
    return {"seed": settings.seed + index, "stride": n, "offset": index}


def prepare_worker(affinity: tuple[int, ...]) -> None:
    """In the worker, before exec: its cores, and death with its parent (a killed measuring task must not leave
    generators sending load at a server)."""
    if affinity:
        os.sched_setaffinity(0, affinity)
    die_with_parent()


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG); elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def output_shapes(spec: ModelSpec, batch_size: int) -> dict[str, tuple[int, ...]]:
    return {t.name: (batch_size, *t.shape[1:]) for t in spec.outputs}


def output_dtypes(spec: ModelSpec) -> dict[str, str]:
    return {t.name: t.dtype for t in spec.outputs}


def make_codec(job: WorkerJob, settings: LoadSettings):
    """The job's codec, with the request encoded once for its (model, batch size)."""
    spec = ModelSpec.from_dict(job.spec) if job.spec else None
    inputs = make_inputs(spec, settings.batch_size) if spec else {}
    shapes = output_shapes(spec, settings.batch_size) if spec else {}
    return get_codec(job.protocol)(job.host, job.port, job.model_name, inputs, shapes,
                                      output_dtypes(spec) if spec else {})


def event_loop_runner() -> Callable:
    try:
        import uvloop

        return uvloop.run
    except ImportError:  # uvloop is in the orchestrator requirements; plain asyncio still measures correctly
        return asyncio.run


def warm_window_figures() -> None:
    """Run, before the load point starts, the numpy call its window reports make while it runs: the first
    `np.percentile` of a process loads its code lazily (about 14 ms here), and at the first window's end that
    stall made the open loop's sends due then 6-10 ms late, every point (two generator late starts of 139 in a
    trace replay, five on a busier host: `generator_saturated`)."""
    np.percentile(np.arange(4, dtype=np.float64), (50, 99))


def generate(job: WorkerJob, worker: int = 0, start_ns=None, on_window=None) -> Recording:
    """Drive this worker's share of the job's load point and return its recording (`on_window` receives each
    measured window's figures as it ends)."""
    settings = job.load_settings
    warm_window_figures()
    codec = make_codec(job, settings)
    share = worker_share(settings, worker)
    runner = event_loop_runner()
    engine = http_engine
    if codec.transport == "grpc":
        from tasks.loadgen import grpc_engine as engine  # lazy: grpc.aio (about 0.3 s) only for gRPC codecs
    if settings.mode == "concurrency":
        return runner(engine.closed_loop(job.host, job.port, codec, settings, start_ns=start_ns,
                                         concurrency=share["concurrency"], on_window=on_window))
    if job.schedule_file:  # an overload phase or a trace: its own send times, not the settings' one rate
        schedule = np.load(job.schedule_file)[share["offset"]::share["stride"]]
    else:
        schedule = arrival_schedule_ns(settings, seed=share["seed"], stride=share["stride"], offset=share["offset"])
    return runner(engine.open_loop(job.host, job.port, codec, settings, start_ns=start_ns, schedule_ns=schedule,
                                   on_window=on_window))


async def _barrier() -> int:
    """Tell the parent this worker is connected and wait for the common start time."""
    print("ready", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return int(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--worker", type=int, default=0)
    args = parser.parse_args(argv)
    recording = generate(WorkerJob.from_json(args.job.read_text()), args.worker, start_ns=_barrier,
                         on_window=lambda figures: print(WINDOW_LINE + json.dumps(figures), flush=True))
    recording.save(str(args.out / f"recording{args.worker}.npz"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
