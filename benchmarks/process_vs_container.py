"""What a container costs on this host: the same server, model, load and CPU budget under the process launcher (its
runtime venv) and the Docker launcher (its project image), side by side, as ratios.

Rounds alternate the launchers (process, container, process, ...) so that a drift of the host hits both; the
figures are medians over the rounds. The server gets the CPUs the load generator does not (the runs' default
budget), a closed loop drives it, and each round starts the server afresh (start-up time is shown too).
Needs a Docker engine: one is started for the benchmark's length when none answers (and stopped after).

    .venv/bin/python benchmarks/process_vs_container.py [--server custom] [--format onnx] [--concurrency 4]
                                                        [--duration-s 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LAUNCHERS = ("process", "docker")
WARMUP_S = 2.0
WINDOW_S = 1.0


def measure_round(launcher_name: str, server_name: str, artifact, spec, budget, concurrency: int,
                  duration_s: float, log_dir: Path) -> dict:
    """One fresh server session under `launcher_name`, one closed-loop load point: its figures."""
    from tasks.loadgen.coordinator import run_load_point
    from tasks.loadgen.resources import sampler_for
    from tasks.loadgen.settings import LoadSettings
    from tasks.serve.launchers import get_launcher
    from tasks.serve.options import ServingOptions
    from tasks.serve.servers import get_server
    from tasks.serve.session import SessionSettings, server_session

    server = get_server(server_name, ServingOptions(cpus=budget.cpu_count))
    settings = LoadSettings(mode="concurrency", load=concurrency, batch_size=1, duration_s=duration_s,
                            warmup_s=WARMUP_S, window_s=WINDOW_S)
    workdir = Path(tempfile.mkdtemp(prefix="serving-eval-bench-load-"))
    try:
        with server_session(server, artifact, spec, get_launcher(launcher_name),
                            SessionSettings(run_id="bench-process-vs-container", session_id=f"bench-{launcher_name}",
                                            log_dir=log_dir, cpus=budget.cpus)) as live:
            with sampler_for(live.handle) as sampler:
                measurement, _ = run_load_point(live.endpoint, spec, settings, workdir, cpus=budget.generator_cpus)
            return {"rps": measurement.throughput_rps, "p99_ms": measurement.latency_ms_p99,
                    "p50_ms": measurement.latency_ms_p50, "errors": measurement.errors, "startup_s": live.startup_s,
                    "cpu_pct": sampler.summary().server_cpu_pct, "image": live.runtime_image}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="custom", help="triton, torchserve, bentoml, kserve or custom")
    parser.add_argument("--format", default="onnx")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from tasks.convert import convert
    from tasks.core.spec import load_spec
    from tasks.runtimes.docker_engine import engine_for_a_while
    from tasks.runtimes.images import ensure_image
    from tasks.runtimes.venvs import ensure_runtime
    from tasks.serve.budget import format_cpu_set, plan_budget
    from tasks.serve.servers import get_server

    spec = load_spec("mlp")
    artifact = convert(spec, args.format, log=lambda _: None)
    budget = plan_budget(None, None, True)
    runtime = get_server(args.server).runtime
    log_dir = Path(tempfile.mkdtemp(prefix="serving-eval-bench-logs-"))
    with engine_for_a_while() as engine:
        if engine is None:
            print("no Docker engine: nothing to compare (see above)")
            return 1
        ensure_runtime(runtime)
        image = ensure_image(runtime)
        print(f"server {args.server} on mlp/{args.format}: venv {runtime} vs image {image.ref}; server CPUs "
              f"{format_cpu_set(budget.cpus or budget.host_cpus)}, generator CPUs "
              f"{format_cpu_set(budget.generator_cpus) or 'unpinned'}; closed loop, concurrency {args.concurrency}, "
              f"{args.duration_s:g} s measured after {WARMUP_S:g} s warm-up; {args.rounds} rounds, medians\n")
        rounds: dict[str, list[dict]] = {name: [] for name in LAUNCHERS}
        try:
            for i in range(args.rounds):
                for name in LAUNCHERS:
                    figures = measure_round(name, args.server, artifact, spec, budget, args.concurrency,
                                            args.duration_s, log_dir)
                    rounds[name].append(figures)
                    print(f"  round {i + 1} {name:<8} {figures['rps']:9.1f} req/s  p99 {figures['p99_ms']:7.2f} ms  "
                          f"errors {figures['errors']}", flush=True)
        finally:
            shutil.rmtree(log_dir, ignore_errors=True)
    med = {name: {key: statistics.median(r[key] for r in rows if r[key] is not None)
                  for key in ("rps", "p99_ms", "p50_ms", "startup_s", "cpu_pct")} for name, rows in rounds.items()}
    print(f"\n{'launcher':<10}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'server CPU %':>14}{'start-up s':>12}")
    for name, label in (("process", "process"), ("docker", "container")):
        m = med[name]
        print(f"{label:<10}{m['rps']:>10.1f}{m['p50_ms']:>9.2f}{m['p99_ms']:>9.2f}{m['cpu_pct']:>14.1f}"
              f"{m['startup_s']:>12.2f}")
    proc, cont = med["process"], med["docker"]
    print(f"\ncontainer / process: throughput x{cont['rps'] / proc['rps']:.3f}, "
          f"p99 x{cont['p99_ms'] / proc['p99_ms']:.3f}, p50 x{cont['p50_ms'] / proc['p50_ms']:.3f}, "
          f"start-up x{cont['startup_s'] / proc['startup_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
