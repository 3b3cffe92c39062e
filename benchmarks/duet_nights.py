"""Duets on real stacks: how often a night whose inputs changed without a performance effect alarms, how often a
real step of about 5 % and 10 % is found on its first night, how much of a real change a duet passes through,
and what it costs in measuring time. The figures docs/regressions.md quotes.

    .venv/bin/python benchmarks/duet_nights.py record [--stacks custom/onnx,triton/onnx,...] [--equal 20]
        [--steps 10] [--solo 20] [--duration-s 2] --out benchmarks/data/duet_nights.json
    .venv/bin/python benchmarks/duet_nights.py analyse [--data benchmarks/data/duet_nights.json]

Per stack (server/format) and model (`light`: the MLP, hidden 256, where a request is mostly the stack's own
overhead; `heavy`: the MLP at hidden 2048, where it is mostly compute):
- the real size of each step: `--solo` solo sessions of the base model and of each step's model (their widths,
  STEPS), round-robin so the host's drift hits each alike; the step is the median's change (throughput, server
  CPU per request);
- `--equal` changed-but-equal nights: the base model against the same architecture re-exported with another
  seed (another file, another SHA-256, the same compute), one duet each, judged as the pipeline judges
  (tasks/regress/duet.py, DEFAULT_PASS_THROUGH or the stack's measured pass-through: run `analyse` twice);
- `--steps` duets of the base against each step's model (first-night detection).
Every duet is the pipeline's own (tasks/measure/duet.py with the run's pair rule), on the process launcher, at
concurrency 2, with the run's default thresholds; the noise floor is the default (no A/A here).

`analyse` prints per stack and model: the steps' real sizes, the duet's pass-through (duet change / real change,
per metric family), the false-alarm rate of the equal nights, the detection rates of the steps, and the minutes
of measuring a duet costs; then the whole suite's rates (a night of the suite alarms when any of its cells does).
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
MODELS = {"light": 256, "heavy": 2048}  # the MLP's hidden width of each model
STEPS = {"light": {"5pct": 320, "10pct": 384}, "heavy": {"5pct": 2100, "10pct": 2150}}  # step -> hidden width
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
    """One fresh server session, one load point: its throughput and CPU per request."""
    from tasks.loadgen.resources import sampler_for
    from tasks.loadgen.run import run_load_point
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.session import SessionSettings, server_session

    side = _side("solo", server_name, variant, budget)
    settings = SessionSettings("duetbench", f"solo.{side.spec.name}", log_dir, cpus=budget.cpus)
    with server_session(side.server, side.artifact, side.spec, ProcessLauncher(), settings) as live:
        with sampler_for(live.handle) as sampler:
            m, _ = run_load_point(live.endpoint, side.spec, load, Path(tempfile.mkdtemp(dir=log_dir)),
                                  cpus=budget.generator_cpus)
    cpu = sampler.summary().server_cpu_pct
    return {"throughput_rps": m.throughput_rps, "server_cpu_us_per_request":
            cpu / 100 / m.throughput_rps * 1e6 if cpu and m.throughput_rps else None, "errors": m.errors}


def _duet(server_name: str, reference, candidate, load, budget, log_dir: Path, index: int) -> dict:
    from tasks.measure.duet import DuetSettings, measure_duet
    from tasks.regress.duet import DUET_METRICS, DuetThresholds, decided, judge_pairs
    from tasks.serve.launchers.process import ProcessLauncher

    tests = len(DUET_METRICS)  # a night of one changed cell: Bonferroni over its metrics, as the pipeline does
    fmt = reference[0].format
    thresholds = DuetThresholds.for_stack(server_name, fmt)
    settings = DuetSettings(run_id="duetbench", duet_id=f"duet{index}", log_dir=log_dir, launcher=ProcessLauncher(),
                            loads=(load,), server_cpus=budget.cpus, generator_cpus=budget.generator_cpus)
    started = time.monotonic()
    result = measure_duet(_side("reference", server_name, reference, budget),
                          _side("candidate", server_name, candidate, budget), settings,
                          lambda _i, pairs: decided([p.to_dict() for p in pairs], thresholds, tests))
    pairs = [p.to_dict() for p in result.pairs]
    return {"pairs": pairs, "error": result.error, "seconds": time.monotonic() - started,
            "judged": judge_pairs(pairs, thresholds, tests) if len(pairs) >= 2 else []}


def record(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="duetbench-specs-") as specs, \
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


def _alarm(duet: dict) -> bool:
    return any(j["verdict"] == "regression" for j in duet["judged"])


def analyse(args: argparse.Namespace) -> int:
    data = json.loads(Path(args.data).read_text())
    print(f"duets at concurrency {CONCURRENCY}, {data['settings']['duration_s']:g} s per pair; "
          "real step = change of the median of the solo sessions")
    suite_equal: list[list[bool]] = []
    suite_found: dict[str, list[list[bool]]] = {}
    for key, entry in data["stacks"].items():
        base_tp = _median([s["throughput_rps"] for s in entry["solo"]["base"]])
        base_cpu = _median([s["server_cpu_us_per_request"] for s in entry["solo"]["base"]])
        equal = [_alarm(d) for d in entry["equal"] if not d["error"]]
        suite_equal.append(equal)
        every = entry["equal"] + sum(entry["steps"].values(), [])
        seconds = _median([d["seconds"] for d in every])
        failed = [d["error"] for d in every if d["error"]]
        print(f"\n{key}: base {base_tp:.0f} req/s, {base_cpu:.0f} us CPU/request; equal nights: "
              f"{sum(equal)}/{len(equal)} alarmed; a duet {seconds:.0f} s"
              + (f"; {len(failed)} duets failed (first: {failed[0][:300]})" if failed else ""))
        for name, duets in entry["steps"].items():
            tp = _median([s["throughput_rps"] for s in entry["solo"][name]])
            cpu = _median([s["server_cpu_us_per_request"] for s in entry["solo"][name]])
            real_tp, real_cpu = 100 * (tp / base_tp - 1), 100 * (cpu / base_cpu - 1)
            found = [_alarm(d) for d in duets if not d["error"]]
            suite_found.setdefault(name, []).append(found)
            through = {}
            for metric, real in (("throughput_rps", real_tp), ("server_cpu_us_per_request", real_cpu)):
                seen = _median([next(j["change_pct"] for j in d["judged"] if j["metric"] == metric)
                                for d in duets if d["judged"]])
                through[metric] = seen / real if real else float("nan")
            print(f"  step {name}: real {real_tp:+.1f} % throughput, {real_cpu:+.1f} % CPU/request; found on its "
                  f"first night {sum(found)}/{len(found)}; pass-through throughput {through['throughput_rps']:.2f}, "
                  f"CPU {through['server_cpu_us_per_request']:.2f}")
    nights = min((len(e) for e in suite_equal), default=0)
    alarmed = sum(any(e[i] for e in suite_equal) for i in range(nights))
    print(f"\nthe whole suite ({len(suite_equal)} cells): {alarmed}/{nights} changed-but-equal nights alarmed "
          "(goal: at most 1 in 20)")
    for name, per_cell in suite_found.items():
        trials = sum(len(f) for f in per_cell)
        print(f"  step {name}: found on its first night in {sum(sum(f) for f in per_cell)}/{trials} trials "
              f"(goal: {'90' if name == '10pct' else '80'} %)")
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
