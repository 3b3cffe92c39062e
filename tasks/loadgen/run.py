"""Run one load point in a separate generator process (pinned to its own cores when the host allows).

The orchestrator calls `run_load_point`; it starts `python -m tasks.loadgen.run` so the generator has an
interpreter, an event loop and CPU affinity of its own, and reads back the recording and its summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tasks.errors import LoadTestError
from tasks.loadgen.engine import Recording, closed_loop, open_loop
from tasks.loadgen.measurement import Measurement, summarize
from tasks.loadgen.protocols import get_codec
from tasks.loadgen.settings import LoadSettings
from tasks.serve.base import Endpoint
from tasks.spec import ModelSpec, make_inputs

ARRIVALS = ("constant", "poisson")
PROCESS_GRACE_S = 60.0


def check_reachable(endpoint: Endpoint, timeout_s: float = 2.0) -> None:
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s):
            return
    except OSError as exc:
        raise LoadTestError(f"endpoint {endpoint.base_url} is unreachable ({exc}); no load was sent") from exc


def run_load_point(endpoint: Endpoint, spec: ModelSpec, settings: LoadSettings, workdir: Path, *,
                   arrival: str = "constant", cpus: tuple[int, ...] = ()) -> tuple[Measurement, Path]:
    """Drive `endpoint` at one load point; return the summary and the path of the raw recording."""
    if arrival not in ARRIVALS:
        raise LoadTestError(f"arrival={arrival!r}: must be one of {list(ARRIVALS)}")
    check_reachable(endpoint)
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / "job.json"
    job.write_text(json.dumps({
        "host": endpoint.host, "port": endpoint.port, "model_name": endpoint.model_name,
        "protocol": endpoint.protocol, "spec": json.loads(spec.to_json()), "settings": settings.to_dict(),
        "arrival": arrival,
    }))
    limit_s = settings.warmup_s + settings.duration_s + settings.request_timeout_s + PROCESS_GRACE_S
    proc = subprocess.run(
        [sys.executable, "-m", "tasks.loadgen.run", "--job", str(job), "--out", str(workdir)],
        capture_output=True, text=True, timeout=limit_s,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    if proc.returncode != 0:
        raise LoadTestError(f"load generator failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    data = json.loads((workdir / "measurement.json").read_text())
    data["window_throughput_rps"] = tuple(data["window_throughput_rps"])
    return Measurement(**data), workdir / "recording.npz"


def output_shapes(spec: ModelSpec, batch_size: int) -> dict[str, tuple[int, ...]]:
    return {t.name: (batch_size, *t.shape[1:]) for t in spec.outputs}


def generate(job: dict) -> tuple[Recording, Measurement]:
    spec = ModelSpec.from_dict(job["spec"])
    settings = LoadSettings(**job["settings"])
    codec = get_codec(job["protocol"])(job["host"], job["port"], job["model_name"],
                                       make_inputs(spec, settings.batch_size), output_shapes(spec, settings.batch_size))
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # uvloop is in the orchestrator requirements; plain asyncio still measures correctly
        runner = asyncio.run
    if settings.mode == "concurrency":
        recording = runner(closed_loop(job["host"], job["port"], codec, settings))
        return recording, summarize(recording, settings, latency_from="sent")
    recording = runner(open_loop(job["host"], job["port"], codec, settings, arrival=job["arrival"]))
    return recording, summarize(recording, settings, latency_from="scheduled")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    recording, measurement = generate(json.loads(args.job.read_text()))
    recording.save(str(args.out / "recording.npz"))
    (args.out / "measurement.json").write_text(json.dumps(measurement.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
