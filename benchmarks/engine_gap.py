"""Where the time goes when several stacks serve the same engine: each stack at concurrency 1 over JSON and over its
best wire (binary tensors or gRPC, the fastest of those it speaks, measured), beside the engine's own speed in
process (same threads, same CPUs); where a stack's best wire is still more than 20 % below the engine, the
breakdown of one request as the stack itself reports it. Also the cost of what a Python stack adds per request for
this model's JSON (reading and writing its tensors, in Python and in KServe's own REST path).

    .venv/bin/python benchmarks/engine_gap.py --models resnet50,bert-base --duration-s 15   # the docs' table
    .venv/bin/python benchmarks/engine_gap.py --models mlp --duration-s 2                    # a quick check
    .venv/bin/python benchmarks/engine_gap.py --models resnet50 --costs-only                 # the JSON costs alone

The five local stacks each serve their engine's format: ONNX (ONNX Runtime) on Triton, BentoML, KServe and the
custom service, TorchScript on TorchServe (its only format); each stack's engine in process is the same format's.
Figures, not pass/fail: docs/tuning.md ("Fair defaults, explained gaps") says how to read them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.core.metrics import number  # noqa: E402
from tasks.core.spec import load_spec  # noqa: E402
from tasks.pipeline import run_pipeline  # noqa: E402
from tasks.report.wires import best_wires, breakdown, row_wire  # noqa: E402
from tasks.store.embedded_s3 import start_embedded_s3  # noqa: E402

STACKS = {"triton": "onnx", "torchserve": "torchscript", "bentoml": "onnx", "kserve": "onnx", "custom": "onnx"}
GAP_EXPLAINED_PCT = 20.0  # a best wire this far below the engine gets its breakdown printed


def json_cost_ms(model: str, batch_size: int = 1, rounds: int = 20) -> dict:
    """What a Python stack does per request besides inference, for this model, timed here: read the KServe v2
    JSON request into arrays (json.loads + np.asarray, as the custom service does) and write the outputs as JSON
    (.tolist() + json.dumps); with the bodies' sizes."""
    from tasks.core.spec import make_inputs
    from tasks.loadgen.protocols.kserve_v2_rest import KServeV2Rest

    spec = load_spec(model)
    request = KServeV2Rest("h", 1, model, make_inputs(spec, batch_size), {}).body()
    outputs = {t.name: np.random.default_rng(0).standard_normal((batch_size, *t.shape[1:])).astype(t.dtype)
               for t in spec.outputs}

    def timed(step) -> tuple[float, object]:
        started = time.perf_counter()
        for _ in range(rounds):
            result = step()
        return (time.perf_counter() - started) / rounds * 1e3, result

    decode_in, _ = timed(lambda: [np.asarray(i["data"]).reshape(i["shape"]) for i in json.loads(request)["inputs"]])
    encode_out, body = timed(lambda: json.dumps({"model_name": model, "outputs": [
        {"name": k, "shape": list(v.shape), "datatype": "FP32", "data": v.ravel().tolist()}
        for k, v in outputs.items()]}))
    return {"request_mb": len(request) / 1e6, "decode_request_ms": decode_in, "response_mb": len(body) / 1e6,
            "encode_response_ms": encode_out}


def kserve_cost_ms(model: str, batch_size: int = 1) -> dict:
    """KServe's own REST path for this model's largest input and output (benchmarks/kserve_json_cost.py, run in
    the kserve runtime): what its pydantic models and FastAPI's encoder add per request."""
    import subprocess

    from tasks.runtimes.venvs import ensure_runtime, runtime_env_vars

    spec = load_spec(model)
    env = ensure_runtime("kserve")
    script = str(Path(__file__).resolve().parent / "kserve_json_cost.py")
    out = {}
    for kind, tensors in (("request", spec.inputs), ("response", spec.outputs)):
        biggest = max(tensors, key=lambda t: int(np.prod(t.shape[1:])))
        if biggest.dtype != "float32":
            continue  # integer token ids: a small body, nothing to see
        shape = ",".join(str(d) for d in (batch_size, *biggest.shape[1:]))
        done = subprocess.run([str(env.bin_dir / "python"), script, kind, shape], env=runtime_env_vars(env),
                              capture_output=True, text=True, check=True, timeout=300)
        out[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def print_costs(model: str) -> None:
    cost = json_cost_ms(model)
    print(f"\n{model}, per request in Python (one thread, here): the {cost['request_mb']:.2f} MB JSON request read "
          f"into arrays in {cost['decode_request_ms']:.1f} ms; the outputs written as a {cost['response_mb']:.2f} MB "
          f"JSON response in {cost['encode_response_ms']:.1f} ms")
    for kind, figures in kserve_cost_ms(model).items():
        steps = ", ".join(f"{k.removesuffix('_ms')} {v:.1f} ms" for k, v in figures.items() if k.endswith("_ms"))
        size = figures.get(f"{kind}_mb", 0.0)
        print(f"KServe's own REST path, the {size:.2f} MB {kind}: {steps}")


def measure(models: list[str], stacks: dict[str, str], duration_s: float) -> list[dict]:
    """Every stack at concurrency 1 over JSON and every wire it speaks: one run per format (each stack serves only
    its format), the rows of all."""
    rows = []
    with start_embedded_s3() as s3:
        s3.create_bucket("bench")
        for fmt in sorted(set(stacks.values())):
            servers = [s for s, f in stacks.items() if f == fmt]
            conf = {"suite": "smoke", "models": models, "formats": [fmt], "servers": servers,
                    "protocols": ["best", "json"], "concurrencies": [1], "duration_s": duration_s,
                    "warmup_s": 3.0, "window_s": 1.0, "control_cell": "none", "duets": False,
                    "fail_on_cell_failure": False, "s3_bucket": "bench", "s3_prefix": "gap", "request_timeout_s": 60.0}
            _, found = run_pipeline(conf, run_id=f"bench-gap-{fmt}", logical_date="2026-01-01T00:00:00+00:00",
                                    conn=s3.connection("bench"))
            rows += found
    return rows


def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _gap(rps: float | None, engine: float | None) -> str:
    return "" if not rps or not engine else f" ({100 * (1 - rps / engine):.0f} %)"


def print_table(rows: list[dict], duration_s: float, stacks: dict[str, str] = STACKS) -> None:
    """The docs' table: per model and stack, the engine, JSON and the best wire (gaps to the engine in brackets),
    then where the time goes for every best wire still more than GAP_EXPLAINED_PCT below its engine."""
    ok = [r for r in rows if r.get("status") == "ok"]
    best = best_wires(ok)
    print(f"\nconcurrency 1, {duration_s:g} s per point; the gap in brackets is how far below the engine in process")
    print("| model | stack | engine in process (calls/s) | JSON (req/s) | best wire | best wire (req/s) | JSON tax |")
    print("|---|---|---|---|---|---|---|")
    explained = []
    for model in sorted({r["model"] for r in rows}):
        for server, fmt in stacks.items():
            mine = [r for r in ok if r["model"] == model and r["server"] == server and r["format"] == fmt]
            failed = [r for r in rows if r["model"] == model and r["server"] == server and r["status"] != "ok"]
            if not mine:
                reason = failed[0]["reason"][:80] if failed else "not measured"
                print(f"| {model} | {server}/{fmt} | – | – | – | – | {reason} |")
                continue
            by_wire = {row_wire(r): r for r in mine}
            wire = best.get((model, 1, f"{server}/{fmt}"), "json")
            top, plain = by_wire[wire], by_wire.get("json")
            engine = number(top.get("engine_inprocess_rps"))
            top_rps, json_rps = number(top.get("throughput_rps")), number((plain or {}).get("throughput_rps"))
            tax = f"{100 * (1 - json_rps / top_rps):.0f} %" if top_rps and json_rps is not None else "–"
            print(f"| {model} | {server}/{fmt} | {_f(engine)} | {_f(json_rps)}{_gap(json_rps, engine)} | {wire} "
                  f"({top.get('protocol')}) | {_f(top_rps)}{_gap(top_rps, engine)} | {tax} |")
            if engine and top_rps and 100 * (1 - top_rps / engine) > GAP_EXPLAINED_PCT:
                explained.append(top)
    if explained:
        print(f"\nwhere the time goes, per request, for each best wire more than {GAP_EXPLAINED_PCT:g} % below its "
              "engine (ms, as the stack reports it):")
    for row in explained:
        engine_ms = 1000.0 / number(row["engine_inprocess_rps"])
        segments, note = breakdown(row)
        parts = " + ".join(f"{name} {value:.2f}" for name, value in segments) or note
        source = str(row.get("breakdown_source") or "none reported").split(" (")[0]
        print(f"- {row['model']} {row['server']}/{row['format']} over {row_wire(row)}: "
              f"{_f(number(row.get('latency_ms_mean')))} ms at the client against {engine_ms:.2f} ms a call in "
              f"process = {parts} (the server's own total {_f(number(row.get('server_ms')))}; request "
              f"{_f(number(row.get('request_bytes')), 0)} B, response {_f(number(row.get('response_bytes')), 0)} B; "
              f"from {source})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,bert-base")
    parser.add_argument("--servers", default=",".join(STACKS), help=f"a subset of {','.join(STACKS)}")
    parser.add_argument("--duration-s", type=float, default=15.0)
    parser.add_argument("--costs", action="store_true", help="also the per-request JSON costs of each model")
    parser.add_argument("--costs-only", action="store_true", help="only the per-request JSON costs, no servers")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    if args.costs_only:
        for model in models:
            print_costs(model)
        return 0
    stacks = {s: STACKS[s] for s in args.servers.split(",") if s}
    rows = measure(models, stacks, args.duration_s)
    print_table(rows, args.duration_s, stacks)
    if args.costs:
        for model in models:
            print_costs(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
