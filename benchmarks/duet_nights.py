"""Duets on real stacks: how often a night whose inputs changed without a performance effect alarms, how often a
real step of about 5 % and 10 % is found on its first night, how much of a real change a duet passes through,
and what it costs in measuring time. The figures docs/regressions.md quotes.

    .venv/bin/python benchmarks/duet_nights.py record [--stacks custom/onnx,triton/onnx,...] [--equal 20]
        [--steps 10] [--solo 20] [--engine 8] [--duration-s 2] --out benchmarks/data/duet_nights.json
    .venv/bin/python benchmarks/duet_nights.py analyse [--data benchmarks/data/duet_nights_1600utc.json]

Per stack (server/format) and model (`light`: the MLP, hidden 256, where a request is mostly the stack's own
overhead; `heavy`: the MLP at hidden 2048, where it is mostly compute):
- the real size of each step: `--solo` solo sessions of the base model and of each step's model (their widths,
  STEPS), round-robin so the host's drift hits each alike; the step is the median's change (throughput, server
  CPU per request);
- `--equal` changed-but-equal nights: the base model against the same architecture re-exported with another
  seed (another file, another SHA-256, the same compute), one duet each, judged as the pipeline judges
  (tasks/regress/duet.py, with the pass-through PASS_THROUGH holds for the stack when recorded);
- `--steps` duets of the base against each step's model (first-night detection);
- `--engine` rounds of the engine alone, in process (tasks/measure/engine_speed.py, one thread on the servers'
  core), the base and each step's model in turn within a round: the step's engine time per call, its change read
  round by round, so the host's drift cancels. The solo sessions' medians drift with the host (±25 % on the heavy
  MLP here); the engine's rounds give the step's size in µs of work per request, which over the base's solo CPU
  per request is the step a server sees.
Every duet is the pipeline's own (tasks/measure/duet.py with the run's pair rule), on the process launcher, at
concurrency 2, with the run's default thresholds; the noise floor is the default (no A/A here).

`analyse` prints per stack and model: the steps' real sizes and what the duets saw of them, the false-alarm rate of
the equal nights and the detection rates of the steps, and the time a duet costs; each stack's pass-through (duet
change / real change); the rates judged as recorded and again at each stack's own measured pass-through (the
PASS_THROUGH to put in tasks/regress/duet.py); then the whole suite's rates both ways (a night of the suite alarms
when any of its cells does).
Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
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
KEPT_SERVERS_DATA = REPO / "benchmarks" / "data" / "duet_nights_1600utc.json"  # servers kept per duet, no engine rounds
MODELS = {"light": 256, "heavy": 2048}  # the MLP's hidden width of each model
# step -> hidden width. A request of the light MLP is mostly the stack's overhead (250-380 us) and its hidden layer
# costs ~hidden^2: 384 adds about 5 % of it and 480 about 10 % (320 would add about 1 %, within the noise).
# The heavy MLP is mostly that layer: 2100 and 2150 add 5 and 10 % of its multiply-adds.
STEPS = {"light": {"5pct": 384, "10pct": 480}, "heavy": {"5pct": 2100, "10pct": 2150}}
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
SOLO_METRICS = ("throughput_rps", "server_cpu_us_per_request")  # what a solo session measures
MIN_REAL_STEP_PCT = 3.0  # a real step smaller than this is not used for the pass-through (solo noise dominates)


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


def _solo(server_name: str, variant, load, budget, log_dir: Path) -> dict:
    """One fresh server session, one load point: its throughput and CPU per request (over the measured window)."""
    from tasks.loadgen.measurement import server_cpu
    from tasks.loadgen.run import run_load_point
    from tasks.measure.hoststate import ServerReader
    from tasks.measure.window_reader import LiveServerWindowReader
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.session import SessionSettings, server_session

    side = _side("solo", server_name, variant, budget)
    settings = SessionSettings("duetbench", f"solo.{side.spec.name}", log_dir, cpus=budget.cpus)
    with server_session(side.server, side.artifact, side.spec, ProcessLauncher(), settings) as live:
        m, _ = run_load_point(live.endpoint, side.spec, load, Path(tempfile.mkdtemp(dir=log_dir)),
                              cpus=budget.generator_cpus, server=LiveServerWindowReader(ServerReader(live.handle)))
    return {"throughput_rps": m.throughput_rps, "server_cpu_us_per_request": server_cpu(m, None)[1],
            "errors": m.errors}


def _engine_us(variant, budget) -> float | None:
    """The engine's time per call (µs) for the variant in process, one thread on the servers' CPUs."""
    from tasks.measure.engine_speed import measure_in_process

    artifact, spec = variant
    out = measure_in_process(artifact, spec, 1, 1, budget.cpus)
    return 1e6 / out["rps"] if out and out.get("rps") else None


def _duet(server_name: str, reference, candidate, load, budget, log_dir: Path, index: int) -> dict:
    from tasks.measure.duet import DuetSettings, measure_duet
    from tasks.plan.config import RunConfig
    from tasks.regress.duet import DUET_METRICS, DuetThresholds, decided, judge_pairs
    from tasks.serve.launchers.process import ProcessLauncher

    tests = len(DUET_METRICS)  # a night of one changed cell: Bonferroni over its metrics, as the pipeline does
    fmt = reference[0].format
    thresholds = DuetThresholds.for_stack(server_name, fmt)
    settings = DuetSettings(run_id="duetbench", duet_id=f"duet{index}", log_dir=log_dir, launcher=ProcessLauncher(),
                            loads=(load,), server_cpus=budget.cpus, generator_cpus=budget.generator_cpus,
                            min_pairs=RunConfig.duet_min_pairs, max_pairs=RunConfig.duet_max_pairs)
    started = time.monotonic()
    result = measure_duet(_side("reference", server_name, reference, budget),
                          _side("candidate", server_name, candidate, budget), settings,
                          lambda _i, pairs: decided([p.to_dict() for p in pairs], thresholds, tests))
    pairs = [p.to_dict() for p in result.pairs]
    return {"pairs": pairs, "error": result.error, "seconds": time.monotonic() - started,
            "judged": judge_pairs(pairs, thresholds, tests) if len(pairs) >= 2 else []}


def record(args: argparse.Namespace) -> int:
    from tasks.runtimes import interrupts

    # Ctrl-C or SIGTERM stops the recording with its servers and folders cleaned up: the handler records the stop
    # and the load points' loops raise it again (a KeyboardInterrupt raised inside a fork hook is otherwise lost).
    with interrupts.stop_on_signals(), tempfile.TemporaryDirectory(prefix="duetbench-specs-") as specs, \
            tempfile.TemporaryDirectory(prefix="duetbench-logs-") as log_dir:  # removed also on failure
        os.environ["SERVING_EVAL_MODELS"] = specs
        return _record(args, Path(specs), Path(log_dir))


def _record(args: argparse.Namespace, specs: Path, log_dir: Path) -> int:
    from tasks.loadgen.settings import LoadSettings
    from tasks.serve.budget import plan_budget

    budget = plan_budget(None, None, True)
    load = LoadSettings(mode="concurrency", load=CONCURRENCY, duration_s=args.duration_s, warmup_s=args.warmup_s,
                        window_s=args.duration_s / 4)
    data = {"settings": {k: v for k, v in vars(args).items() if k != "func"}, "stacks": {}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    index = 0
    for stack in args.stacks.split(","):
        server_name, fmt = stack.split("/")
        for model in args.models.split(","):
            key = f"{stack}/{model}"
            base = _variant(specs, fmt, model, MODELS[model], 0)
            steps = {name: _variant(specs, fmt, model, hidden, 0) for name, hidden in STEPS[model].items()}
            entry = {"solo": {name: [] for name in ("base", *steps)}, "equal": [], "steps": {n: [] for n in steps}}
            for _ in range(args.solo):  # round-robin: the host's drift hits each variant alike
                for name, variant in (("base", base), *steps.items()):
                    entry["solo"][name].append(_solo(server_name, variant, load, budget, log_dir))
            entry["engine"] = {name: [] for name in ("base", *steps)}
            for _ in range(args.engine):  # round by round, each variant in turn: the drift cancels in a round
                for name, variant in (("base", base), *steps.items()):
                    entry["engine"][name].append(_engine_us(variant, budget))
            for seed in range(1, args.equal + 1):
                index += 1
                entry["equal"].append(_duet(server_name, base, _variant(specs, fmt, model, MODELS[model], seed), load,
                                            budget, log_dir, index))
            for _ in range(args.steps):
                for name, variant in steps.items():
                    index += 1
                    entry["steps"][name].append(_duet(server_name, base, variant, load, budget, log_dir, index))
            data["stacks"][key] = entry
            out.write_text(json.dumps(data, indent=1))
            print(f"{key}: recorded", flush=True)
    print(f"wrote {out}")
    return 0


def _median(values: list[float]) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def _alarm(judged: list[dict]) -> bool:
    return any(j["verdict"] == "regression" for j in judged)


def _rejudge(duet: dict, thresholds) -> list[dict]:
    """The duet's pairs judged again under other thresholds (as the pipeline judges a night of one changed cell:
    Bonferroni over its metrics), on at most the run's `duet_max_pairs` of them (a recording made with more pairs
    is read as the pipeline would have stopped). The pairs stay those the recording's stopping rule measured."""
    from tasks.plan.config import RunConfig
    from tasks.regress.duet import DUET_METRICS, judge_pairs

    pairs = duet["pairs"][:RunConfig.duet_max_pairs]
    return judge_pairs(pairs, thresholds, len(DUET_METRICS)) if len(pairs) >= 2 else []


def _thresholds(share: float):
    from tasks.core.metrics import METRICS
    from tasks.regress.duet import DEFAULT_NOISE_FLOOR, DUET_METRICS, NOISE_FLOOR, DuetThresholds

    return DuetThresholds({m: METRICS[m].min_effect * share for m in DUET_METRICS},
                          {m: NOISE_FLOOR.get(m, DEFAULT_NOISE_FLOOR) for m in DUET_METRICS},
                          source={"pass_through": share, "measured": True})


def _seen(duets: list[dict], metric: str) -> float:
    """The median change the duets saw in `metric`, in percent (their recorded judgement's mean ratio)."""
    return _median([next(j["change_pct"] for j in d["judged"] if j["metric"] == metric)
                    for d in duets if d["judged"]])


def _engine_step_us(entry: dict, name: str) -> float | None:
    """The step's extra engine time per call (µs): the median over rounds of (step - base) within a round."""
    rounds = entry.get("engine") or {}
    deltas = [b - a for a, b in zip(rounds.get("base", []), rounds.get(name, []), strict=False)
              if a is not None and b is not None]
    return statistics.median(deltas) if deltas else None


def _steps(entry: dict) -> dict[str, dict]:
    """Each step's real change and what its duets saw, per metric, in percent. The real change is the engine's
    (its extra µs per call, round by round, over the base's solo CPU per request; throughput the inverse) where
    the recording has engine rounds, else the solo medians' change; both are kept ("solo", "engine")."""
    base = {m: _median([x[m] for x in entry["solo"]["base"]]) for m in SOLO_METRICS}
    out = {}
    for name, duets in entry["steps"].items():
        solo = {m: 100 * (_median([x[m] for x in entry["solo"][name]]) / base[m] - 1) for m in SOLO_METRICS}
        extra_us = _engine_step_us(entry, name)
        engine = None if extra_us is None else {
            "server_cpu_us_per_request": 100 * extra_us / base["server_cpu_us_per_request"],
            "throughput_rps": 100 * (base["server_cpu_us_per_request"]
                                     / (base["server_cpu_us_per_request"] + extra_us) - 1)}
        out[name] = {"real": engine or solo, "solo": solo, "engine": engine, "extra_us": extra_us,
                     "seen": {m: _seen(duets, m) for m in SOLO_METRICS}}
    return out


def stack_pass_through(data: dict) -> dict[tuple[str, str], float]:
    """(server, format) -> the share of a real step its duets saw, within 0.2-1.0: per model the median over its
    steps and the two metrics whose real size is established (throughput, CPU per request), then the stack's
    smallest over its models. The threshold must let a real minimum-size change through on every model of the
    stack, so the model the duet passes least through sets it (the light MLP's duets read more than the engine's
    step in process, the heavy MLP's about half of it: docs/regressions.md). A step whose real change is under
    MIN_REAL_STEP_PCT is left out: its ratio is mostly noise."""
    per_model: dict[tuple[str, str], list[float]] = {}
    for key, entry in data["stacks"].items():
        server, fmt, _model = key.split("/")
        shares = []
        for step in _steps(entry).values():
            for m in SOLO_METRICS:
                if abs(step["real"][m]) >= MIN_REAL_STEP_PCT:
                    ratio = step["seen"][m] / step["real"][m]
                    if ratio == ratio and ratio > 0:
                        shares.append(ratio)
        if shares:
            per_model.setdefault((server, fmt), []).append(_median(shares))
    return {stack: min(1.0, max(0.2, min(values))) for stack, values in per_model.items()}


def analyse(args: argparse.Namespace) -> int:
    """Per cell the real steps, the pass-through, the rates as recorded (the default pass-through's thresholds) and
    re-judged at the stack's own measured pass-through (what PASS_THROUGH in tasks/regress/duet.py then holds),
    and the whole suite's rates both ways."""
    from tasks.regress.duet import DEFAULT_PASS_THROUGH

    data = json.loads(Path(args.data).read_text())
    s = data["settings"]
    real = (f"the engine's extra time a call over {s.get('engine')} rounds in process, over the base's solo CPU per "
            "request" if s.get("engine") else f"change of the median of {s['solo']} solo sessions")
    print(f"duets at concurrency {CONCURRENCY}, {s['duration_s']:g} s per pair; real step = {real}; {s['equal']} "
          f"changed-but-equal nights and {s['steps']} trials per step a cell")
    shares = stack_pass_through(data)
    ways = ("recorded", "measured")  # thresholds: the default pass-through, the stack's own
    suite_equal: dict[str, list[list[bool]]] = {w: [] for w in ways}
    suite_found: dict[str, dict[str, list[list[bool]]]] = {w: {} for w in ways}
    for key, entry in data["stacks"].items():
        server, fmt, _model = key.split("/")
        share = shares.get((server, fmt), DEFAULT_PASS_THROUGH)
        base = {m: _median([x[m] for x in entry["solo"]["base"]]) for m in SOLO_METRICS}
        every = entry["equal"] + sum(entry["steps"].values(), [])
        failed = [d["error"] for d in every if d["error"]]
        print(f"\n{key}: base {base['throughput_rps']:.0f} req/s, {base['server_cpu_us_per_request']:.0f} us "
              f"CPU/request; a duet {_median([d['seconds'] for d in every]):.0f} s, "
              f"{_median([len(d['pairs']) for d in every]):g} pairs (median)"
              + (f"; {len(failed)} duets failed (first: {failed[0][:300]})" if failed else ""))
        for name, step in _steps(entry).items():
            solo, seen, engine = step["solo"], step["seen"], step["engine"]
            engine_text = ("" if engine is None else
                           f"; the engine in process {step['extra_us']:+.0f} us a call: {engine['throughput_rps']:+.1f}"
                           f" %, {engine['server_cpu_us_per_request']:+.1f} % (the real step)")
            print(f"  step {name}: solo sessions {solo['throughput_rps']:+.1f} % throughput, "
                  f"{solo['server_cpu_us_per_request']:+.1f} % CPU/request{engine_text}; the duets saw "
                  f"{seen['throughput_rps']:+.1f} % and {seen['server_cpu_us_per_request']:+.1f} %")
        for way, thresholds in (("recorded", _thresholds(DEFAULT_PASS_THROUGH)), ("measured", _thresholds(share))):
            def judged(d: dict, thresholds=thresholds) -> list[dict]:
                return _rejudge(d, thresholds)

            equal = [_alarm(judged(d)) for d in entry["equal"] if not d["error"]]
            suite_equal[way].append(equal)
            found_text = []
            for name, duets in entry["steps"].items():
                found = [_alarm(judged(d)) for d in duets if not d["error"]]
                suite_found[way].setdefault(name, []).append(found)
                found_text.append(f"step {name} found {sum(found)}/{len(found)}")
            label = (f"the default pass-through {DEFAULT_PASS_THROUGH:g}" if way == "recorded"
                     else f"the stack's own pass-through {share:.2f}")
            print(f"  judged at {label}: equal nights alarmed {sum(equal)}/{len(equal)}; " + "; ".join(found_text))
    for way in ways:
        nights = min((len(e) for e in suite_equal[way]), default=0)
        alarmed = sum(any(e[i] for e in suite_equal[way]) for i in range(nights))
        label = "the default pass-through" if way == "recorded" else "each stack's own pass-through"
        print(f"\nthe whole suite ({len(suite_equal[way])} cells), judged at {label}: {alarmed}/{nights} "
              "changed-but-equal nights alarmed (goal: at most 1 in 20)")
        for name, per_cell in suite_found[way].items():
            trials = sum(len(f) for f in per_cell)
            print(f"  step {name}: found on its first night in {sum(sum(f) for f in per_cell)}/{trials} trials "
                  f"(goal: {'90' if name == '10pct' else '80'} %)")
    print("\nPASS_THROUGH for tasks/regress/duet.py: {"
          + ", ".join(f"{k!r}: {v:.2f}" for k, v in sorted(shares.items())) + "}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--stacks", default="custom/onnx,custom/torchscript,triton/onnx,triton/torchscript")
    rec.add_argument("--models", default="light,heavy")
    rec.add_argument("--equal", type=int, default=20)
    rec.add_argument("--steps", type=int, default=10)
    rec.add_argument("--solo", type=int, default=20)
    rec.add_argument("--engine", type=int, default=8, help="rounds of the engine alone in process (0: none)")
    rec.add_argument("--duration-s", type=float, default=2.0)
    rec.add_argument("--warmup-s", type=float, default=0.5)
    rec.add_argument("--out", default=str(DEFAULT_DATA))
    rec.set_defaults(func=record)
    ana = sub.add_parser("analyse")
    ana.add_argument("--data", default=str(DEFAULT_DATA if DEFAULT_DATA.exists() else KEPT_SERVERS_DATA),
                     help="a recording (default: duet_nights.json, else the recording with servers kept per duet)")
    ana.set_defaults(func=analyse)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
