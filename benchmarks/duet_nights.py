"""The regression check's rulers against a known truth, on real stacks: how large a change the duet (the detector)
reads, how large the interleaved solo rounds (the ruler, tasks/measure/interleaved.py) size it, with what interval,
and how large the one alternative the literature suggests reads it (each duet side on a core of its own, Japke et
al., 2025); how often a night whose inputs changed without a performance effect alarms; how often a step is found
on its first night. The figures docs/regressions.md quotes.

    .venv/bin/python benchmarks/duet_nights.py record [--stacks custom/onnx,triton/onnx] [--models light,heavy]
        [--steps 5,10,30] [--trials 2] [--equal 4] [--rounds 12] [--engine 8] [--duration-s 2]
        --out benchmarks/data/duet_nights.json
    .venv/bin/python benchmarks/duet_nights.py analyse [--data benchmarks/data/duet_nights.json]

Per stack (server/format) and model (`light`: the MLP at hidden 256, where a request is mostly the stack's own
overhead; `heavy`: hidden 2048, where it is mostly compute):
- the base's server CPU per request alone (`--solo` sessions), and steps of a known size injected into the served
  model: the MLP's hidden layer widened until the engine's extra time per call is about 5, 10 and 30 % of it
  (`--steps`), calibrated from the engine's time at the base and one wider probe (its cost grows as the square);
- the known size of each step: the engine's extra time per call over `--engine` interleaved rounds in process (the
  base and each step in turn within a round, so the host's drift cancels; tasks/measure/engine_speed.py), over the
  base's server CPU per request in the same trial's solo rounds (their reference sides);
- `--trials` trials of each step, each a first night as the pipeline runs it: the duet (tasks/measure/duet.py, the
  run's pair rule, judged by tasks/regress/duet_verdict.py), the interleaved rounds (`--rounds`, the pipeline's size
  rule, tasks/regress/size_verdict.py: their mean and 95 % interval), and the duet again with each side on its own core;
- `--equal` changed-but-equal nights: the base against itself re-exported with another seed (another file, the
  same compute), judged by the duet, and sized where the duet alarmed, as the pipeline would.
Every measurement is the pipeline's own code on the process launcher at concurrency 2; the noise floor is the
default (no A/A here).

`analyse` prints per stack and model: each step's known size and, per trial, what each ruler read (server CPU per
request), whether the size's interval holds the known size and its half-width; the equal nights alarmed and the
steps found on their first night; then over the whole recording, per ruler, the median error against the known
size and the share of readings within 5 points of it. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / "benchmarks" / "data" / "duet_nights.json"
MODELS = {"light": 256, "heavy": 2048}  # the MLP's hidden width of each model
MLP_SPEC = """name: {name}
source:
  framework: torch
  builder: models.builders.torch_models:build_mlp
  seed: {seed}
  args: {{in_features: 64, hidden: {hidden}, out_features: 10}}
inputs:
  - {{name: input, dtype: float32, shape: [-1, 64], generator: normal}}
outputs:
  - {{name: output, dtype: float32, shape: [-1, 10]}}
parity: {{atol: 1.0e-4, rtol: 1.0e-3, batch_sizes: [1, 4]}}
"""
CONCURRENCY = 2
METRIC = "server_cpu_us_per_request"  # what the rulers are held to: the known size is in engine time per request
WITHIN_PCT = 5.0  # a reading this close to the known size (in points) counts as near it


def _variant(folder: Path, fmt: str, model: str, hidden: int, seed: int):
    from tasks.convert.artifact import Artifact
    from tasks.core.spec import load_spec
    from tasks.pipeline import convert_step

    name = f"duetbench-{model}-h{hidden}-s{seed}"
    (folder / f"{name}.yaml").write_text(MLP_SPEC.format(name=name, seed=seed, hidden=hidden))
    out = convert_step({"model": name, "format": fmt}, log=lambda _: None)
    if out["error"] or out["skipped"]:
        raise SystemExit(f"conversion of {name} to {fmt} failed: {out['error'] or out['skipped']}")
    return Artifact.from_dict(out["artifact"]), load_spec(name)


def _side(label: str, server_name: str, variant, budget):
    from tasks.measure.duet import DuetSide
    from tasks.serve.options import ServingOptions
    from tasks.serve.servers import get_server

    artifact, spec = variant
    return DuetSide(label, get_server(server_name, ServingOptions(cpus=budget.cpu_count)), artifact, spec)


def _solo_cpu_us(server_name: str, variant, load, budget, log_dir: Path) -> float:
    """One fresh server session, one load point: its server CPU per request (µs, over the measured window)."""
    from tasks.loadgen.coordinator import run_load_point
    from tasks.loadgen.measurement import server_cpu
    from tasks.measure.hoststate import ServerReader
    from tasks.measure.window_reader import LiveServerWindowReader
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.session import SessionSettings, server_session

    side = _side("solo", server_name, variant, budget)
    settings = SessionSettings("duetbench", f"solo.{side.spec.name}", log_dir, cpus=budget.cpus)
    with server_session(side.server, side.artifact, side.spec, ProcessLauncher(), settings) as live:
        m, _ = run_load_point(live.endpoint, side.spec, load, Path(tempfile.mkdtemp(dir=log_dir)),
                              cpus=budget.generator_cpus, server=LiveServerWindowReader(ServerReader(live.handle)))
    return server_cpu(m, None)[1]


def _engine_us(variant, budget) -> float | None:
    """The engine's time per call (µs) for the variant in process, one thread on the servers' CPUs."""
    from tasks.measure.engine_speed import measure_in_process

    artifact, spec = variant
    out = measure_in_process(artifact, spec, 1, 1, budget.cpus)
    return 1e6 / out["rps"] if out and out.get("rps") else None


def calibrate(e0_us: float, e1_us: float, h0: int, h1: int, base_cpu_us: float, step_pct: float) -> int:
    """The hidden width whose engine time per call is `step_pct` % of `base_cpu_us` above the base's, from the
    engine's time at the base width h0 and a probe h1 (the hidden layer's cost grows as the square of its width)."""
    slope = max(1e-9, (e1_us - e0_us) / (h1 ** 2 - h0 ** 2))
    return int(round(math.sqrt(h0 ** 2 + step_pct / 100.0 * base_cpu_us / slope)))


def _settings(duet_id: str, load, budget, log_dir: Path, split: bool = False):
    from tasks.measure.duet import DuetSettings
    from tasks.plan.config import RunConfig
    from tasks.serve.launchers.process import ProcessLauncher

    if split:  # each side on a core of its own, the generators on any (this host has no third core for them)
        cores = tuple(budget.host_cpus)
        return DuetSettings(run_id="duetbench", duet_id=duet_id, log_dir=log_dir, launcher=ProcessLauncher(),
                            loads=(load,), server_cpus=cores[-1:], generator_cpus=(),
                            min_pairs=RunConfig.duet_min_pairs, max_pairs=RunConfig.duet_max_pairs,
                            side_cpus={"reference": cores[:1], "candidate": cores[-1:]})
    return DuetSettings(run_id="duetbench", duet_id=duet_id, log_dir=log_dir, launcher=ProcessLauncher(),
                        loads=(load,), server_cpus=budget.cpus, generator_cpus=budget.generator_cpus,
                        min_pairs=RunConfig.duet_min_pairs, max_pairs=RunConfig.duet_max_pairs)


def _duet(server_name: str, reference, candidate, load, budget, log_dir: Path, duet_id: str,
          split: bool = False) -> dict:
    """The pipeline's duet on this night of one changed cell (Bonferroni over its metrics), judged."""
    from tasks.measure.duet import measure_duet
    from tasks.regress.duet_verdict import DUET_METRICS, DuetThresholds, decided, judge_pairs

    tests = len(DUET_METRICS)
    thresholds = DuetThresholds.detector()
    started = time.monotonic()
    result = measure_duet(_side("reference", server_name, reference, budget),
                          _side("candidate", server_name, candidate, budget),
                          _settings(duet_id, load, budget, log_dir, split),
                          lambda _i, pairs: decided([p.to_dict() for p in pairs], thresholds, tests))
    pairs = [p.to_dict() for p in result.pairs]
    return {"pairs": pairs, "error": result.error, "seconds": time.monotonic() - started,
            "judged": judge_pairs(pairs, thresholds, tests) if len(pairs) >= 2 else []}


def _size(server_name: str, reference, candidate, load, budget, log_dir: Path, duet_id: str, rounds: int) -> dict:
    """The pipeline's size alone: interleaved solo rounds, each metric's size and interval."""
    from tasks.measure.interleaved import measure_interleaved
    from tasks.regress.size_verdict import SIZE_METRICS, size_metric, trusted_rounds

    result = measure_interleaved(_side("reference", server_name, reference, budget),
                                 _side("candidate", server_name, candidate, budget),
                                 _settings(duet_id, load, budget, log_dir), rounds=rounds, budget_s=1e9,
                                 seed=duet_id).to_dict()
    kept, flags = trusted_rounds(result["rounds"], 25.0)
    return {**result, "set_aside": flags, "sizes": {m: size_metric(kept, m, "concurrency") for m in SIZE_METRICS}}


def record(args: argparse.Namespace) -> int:
    from tasks.runtimes import interrupts

    # Ctrl-C or SIGTERM stops the recording with its servers and folders cleaned up: the handler records the stop
    # and the load points' loops raise it again (a KeyboardInterrupt raised inside a fork hook is otherwise lost).
    with interrupts.stop_on_signals(), tempfile.TemporaryDirectory(prefix="duetbench-specs-") as specs, \
            tempfile.TemporaryDirectory(prefix="duetbench-logs-") as log_dir:  # removed also on failure
        os.environ["SERVING_EVAL_MODELS"] = specs
        return _record(args, Path(specs), Path(log_dir))


def _record_cell(args, server_name: str, fmt: str, model: str, specs: Path, log_dir: Path, load, budget) -> dict:
    h0 = MODELS[model]
    base = _variant(specs, fmt, model, h0, 0)
    base_cpu = statistics.median(_solo_cpu_us(server_name, base, load, budget, log_dir) for _ in range(args.solo))
    probe_h = int(h0 * 1.5)
    probe = _variant(specs, fmt, model, probe_h, 0)
    e0 = statistics.median(v for v in (_engine_us(base, budget) for _ in range(3)) if v)
    e1 = statistics.median(v for v in (_engine_us(probe, budget) for _ in range(3)) if v)
    steps = {}
    for pct in args.steps.split(","):
        hidden = calibrate(e0, e1, h0, probe_h, base_cpu, float(pct))
        steps[pct] = {"hidden": hidden, "variant": _variant(specs, fmt, model, hidden, 0)}
    entry = {"base_hidden": h0, "base_cpu_us": base_cpu, "probe": {"hidden": probe_h, "engine_us": [e0, e1]},
             "steps": {p: {"hidden": s["hidden"]} for p, s in steps.items()},
             "engine": {"base": [], **{p: [] for p in steps}}, "trials": {p: [] for p in steps}, "equal": []}
    for _ in range(args.engine):  # round by round, each variant in turn: the drift cancels within a round
        entry["engine"]["base"].append(_engine_us(base, budget))
        for pct, step in steps.items():
            entry["engine"][pct].append(_engine_us(step["variant"], budget))
    key = f"{server_name}/{fmt}/{model}"
    for trial in range(args.trials):
        for pct, step in steps.items():
            tag = f"{key}.{pct}.{trial}".replace("/", "-")
            started = time.monotonic()
            entry["trials"][pct].append({
                "duet": _duet(server_name, base, step["variant"], load, budget, log_dir, f"duet.{tag}"),
                "split": _duet(server_name, base, step["variant"], load, budget, log_dir, f"split.{tag}", split=True),
                "size": _size(server_name, base, step["variant"], load, budget, log_dir, f"size.{tag}", args.rounds),
                "seconds": time.monotonic() - started})
    for seed in range(1, args.equal + 1):
        equal = _variant(specs, fmt, model, h0, seed)
        tag = f"{key}.equal{seed}".replace("/", "-")
        night = {"duet": _duet(server_name, base, equal, load, budget, log_dir, f"duet.{tag}")}
        if _alarm(night["duet"]["judged"]):  # the pipeline sizes what its duet found
            night["size"] = _size(server_name, base, equal, load, budget, log_dir, f"size.{tag}", args.rounds)
        entry["equal"].append(night)
    return entry


def _record(args: argparse.Namespace, specs: Path, log_dir: Path) -> int:
    from tasks.loadgen.settings import LoadSettings
    from tasks.serve.budget import plan_budget

    budget = plan_budget(None, None, True)
    load = LoadSettings(mode="concurrency", load=CONCURRENCY, duration_s=args.duration_s, warmup_s=args.warmup_s,
                        window_s=args.duration_s / 4)
    data = {"settings": {k: v for k, v in vars(args).items() if k != "func"}, "stacks": {},
            "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for stack in args.stacks.split(","):
        server_name, fmt = stack.split("/")
        for model in args.models.split(","):
            started = time.monotonic()
            data["stacks"][f"{stack}/{model}"] = _record_cell(args, server_name, fmt, model, specs, log_dir, load,
                                                              budget)
            data["stacks"][f"{stack}/{model}"]["seconds"] = time.monotonic() - started
            out.write_text(json.dumps(data, indent=1))
            print(f"{stack}/{model}: recorded in {(time.monotonic() - started) / 60:.0f} min", flush=True)
    print(f"wrote {out}")
    return 0


# --- reading a recording ---------------------------------------------------------------------------------------

def _alarm(judged: list[dict]) -> bool:
    return any(j["verdict"] in ("regression", "improvement") for j in judged)


def _duet_pct(duet: dict) -> float | None:
    return next((j["change_pct"] for j in duet.get("judged") or [] if j["metric"] == METRIC), None)


def known_pct(entry: dict, step: str, trial: dict) -> float | None:
    """The step's known size in server CPU per request (%): the engine's extra time per call (the median over
    rounds of the step's time less the base's within a round) over the base's CPU per request in the trial's own
    solo rounds (their reference sides: the same session, the same host state)."""
    rounds = entry["engine"]
    deltas = [b - a for a, b in zip(rounds["base"], rounds[step], strict=False) if a and b]
    base = [r["sides"]["reference"][METRIC] for r in trial["size"]["rounds"] if r["sides"]["reference"].get(METRIC)]
    if not deltas or not base:
        return None
    return 100.0 * statistics.median(deltas) / statistics.median(base)


def readings(data: dict) -> list[dict]:
    """Every step trial: its cell, step, known size, and each ruler's reading (%), the size's interval."""
    out = []
    for key, entry in data["stacks"].items():
        for step, trials in entry["trials"].items():
            for trial in trials:
                size = trial["size"]["sizes"][METRIC]
                out.append({"cell": key, "step": step, "known": known_pct(entry, step, trial),
                            "duet": _duet_pct(trial["duet"]), "split": _duet_pct(trial["split"]),
                            "size": size["change_pct"], "ci": size["change_ci"], "rounds": size["rounds"],
                            "found": _alarm(trial["duet"]["judged"]),
                            "seconds": {"duet": trial["duet"]["seconds"], "split": trial["split"]["seconds"],
                                        "size": trial["size"]["seconds"]}})
    return out


def ruler_errors(rows: list[dict]) -> dict[str, dict]:
    """Per ruler: the median absolute error against the known size (points), the median reading over the known
    (its scale), and the share of readings within WITHIN_PCT points of the known size."""
    out = {}
    for ruler in ("duet", "split", "size"):
        pairs = [(r[ruler], r["known"]) for r in rows if r[ruler] is not None and r["known"]]
        if not pairs:
            continue
        errors = [abs(seen - known) for seen, known in pairs]
        out[ruler] = {"median_error": statistics.median(errors),
                      "scale": statistics.median(seen / known for seen, known in pairs),
                      "within": sum(e <= WITHIN_PCT for e in errors) / len(errors), "n": len(pairs)}
    return out


def analyse(args: argparse.Namespace) -> int:
    data = json.loads(Path(args.data).read_text())
    s = data["settings"]
    print(f"recorded {data.get('recorded')}: concurrency {CONCURRENCY}, {s['duration_s']:g} s points; steps "
          f"{s['steps']} % of the base's CPU per request, {s['trials']} trials each; {s['rounds']} solo rounds a "
          f"size; {s['equal']} changed-but-equal nights a cell")
    rows = readings(data)
    for key, entry in data["stacks"].items():
        mine = [r for r in rows if r["cell"] == key]
        equal = [_alarm(n["duet"]["judged"]) for n in entry["equal"] if not n["duet"]["error"]]
        print(f"\n{key}: base {entry['base_cpu_us']:.0f} µs CPU/request alone; equal nights alarmed "
              f"{sum(equal)}/{len(equal)}; recorded in {entry.get('seconds', 0) / 60:.0f} min")
        for r in mine:
            ci = r["ci"]
            holds = ci is not None and r["known"] is not None and ci[0] <= r["known"] <= ci[1]
            half = None if ci is None else (ci[1] - ci[0]) / 2
            size = "-" if ci is None else (f"{r['size']:+.1f} % [{ci[0]:+.1f}, {ci[1]:+.1f}] (±{half:.1f}, "
                                           f"{r['rounds']} rounds, {'holds' if holds else 'misses'} the known)")
            print(f"  step {r['step']} % (hidden {entry['steps'][r['step']]['hidden']}): known {r['known']:+.1f} %;"
                  f" duet {_fmt(r['duet'])} ({'found' if r['found'] else 'not found'}), own cores "
                  f"{_fmt(r['split'])}; alone {size}; seconds: duet {r['seconds']['duet']:.0f}, own cores "
                  f"{r['seconds']['split']:.0f}, rounds {r['seconds']['size']:.0f}")
    sized = [r for r in rows if r["ci"] is not None and r["known"] is not None]
    holding = sum(r["ci"][0] <= r["known"] <= r["ci"][1] for r in sized)
    halves = [(r["ci"][1] - r["ci"][0]) / 2 for r in sized]
    print(f"\nthe sizes alone: {holding}/{len(sized)} intervals hold the known size; half-width median "
          f"{statistics.median(halves):.1f} points, largest {max(halves):.1f}" if sized else "\nno sizes")
    for step in sorted({r["step"] for r in rows}, key=float):
        found = [r["found"] for r in rows if r["step"] == step]
        print(f"  step {step} %: found by the duet on its first night in {sum(found)}/{len(found)} trials")
    nights = [_alarm(n["duet"]["judged"]) for e in data["stacks"].values() for n in e["equal"]
              if not n["duet"]["error"]]
    print(f"  changed-but-equal nights alarmed: {sum(nights)}/{len(nights)} cell-nights")
    print("\nthe rulers against the known size (server CPU per request):")
    for ruler, e in ruler_errors(rows).items():
        name = {"duet": "duet, shared core", "split": "duet, each side on its own core", "size": "interleaved solo "
                "rounds"}[ruler]
        print(f"  {name}: median error {e['median_error']:.1f} points, reads {e['scale']:.2f} x the known size "
              f"(median), {100 * e['within']:.0f} % of {e['n']} readings within {WITHIN_PCT:g} points")
    return 0


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--stacks", default="custom/onnx,triton/onnx")
    rec.add_argument("--models", default="light,heavy")
    rec.add_argument("--steps", default="5,10,30", help="the steps' sizes, % of the base's CPU per request")
    rec.add_argument("--trials", type=int, default=2)
    rec.add_argument("--equal", type=int, default=4)
    rec.add_argument("--rounds", type=int, default=12, help="interleaved solo rounds a size (as size_rounds)")
    rec.add_argument("--solo", type=int, default=3, help="solo sessions of the base that calibrate the steps")
    rec.add_argument("--engine", type=int, default=8, help="rounds of the engine alone in process")
    rec.add_argument("--duration-s", type=float, default=2.0)
    rec.add_argument("--warmup-s", type=float, default=0.5)
    rec.add_argument("--out", default=str(DEFAULT_DATA))
    rec.set_defaults(func=record)
    ana = sub.add_parser("analyse")
    ana.add_argument("--data", default=str(DEFAULT_DATA))
    ana.set_defaults(func=analyse)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
