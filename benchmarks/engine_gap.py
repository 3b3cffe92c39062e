"""Where the time goes when several stacks serve the same engine: each stack at concurrency 1 next to the
engine's own speed in process (same threads, same CPUs), and the cost of what a Python stack adds per request
for this model (reading and writing its tensors as JSON, in Python and in KServe's own REST path), measured here.

    .venv/bin/python benchmarks/engine_gap.py --model bert-base --duration-s 15
    .venv/bin/python benchmarks/engine_gap.py --model resnet50 --costs-only   # the per-request costs alone

Figures, not pass/fail: docs/tuning.md ("Fair defaults, explained gaps") quotes them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.core.spec import load_spec  # noqa: E402
from tasks.pipeline import run_pipeline  # noqa: E402
from tasks.store.embedded_s3 import start_embedded_s3  # noqa: E402


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
    print(f"\nper request in Python (one thread, here): the {cost['request_mb']:.2f} MB JSON request read into "
          f"arrays in {cost['decode_request_ms']:.1f} ms; the outputs written as a {cost['response_mb']:.2f} MB JSON "
          f"response in {cost['encode_response_ms']:.1f} ms")
    for kind, figures in kserve_cost_ms(model).items():
        steps = ", ".join(f"{k.removesuffix('_ms')} {v:.1f} ms" for k, v in figures.items() if k.endswith("_ms"))
        size = figures.get(f"{kind}_mb", 0.0)
        print(f"KServe's own REST path, the {size:.2f} MB {kind}: {steps}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bert-base")
    parser.add_argument("--servers", default="triton,custom,kserve,bentoml")
    parser.add_argument("--duration-s", type=float, default=15.0)
    parser.add_argument("--costs-only", action="store_true", help="only the per-request JSON costs, no servers")
    args = parser.parse_args(argv)
    if args.costs_only:
        print_costs(args.model)
        return 0
    conf = {"suite": "smoke", "models": [args.model], "formats": ["onnx"], "servers": args.servers.split(","),
            "concurrencies": [1], "duration_s": args.duration_s, "warmup_s": 3.0, "window_s": 1.0,
            "control_cell": "none", "duets": False, "fail_on_cell_failure": False,
            "s3_bucket": "bench", "s3_prefix": "gap", "request_timeout_s": 30.0}
    with start_embedded_s3() as s3:
        s3.create_bucket("bench")
        _, rows = run_pipeline(conf, run_id=f"bench-gap-{args.model}", logical_date="2026-01-01T00:00:00+00:00",
                               conn=s3.connection("bench"))
    print(f"\n{args.model} in ONNX Runtime at concurrency 1, {args.duration_s:g} s per point")
    print(f"{'stack':16} {'req/s':>8} {'p50 ms':>8} {'engine calls/s':>15} {'gap':>6}  server CPU %")
    for row in sorted(rows, key=lambda r: -(r.get("throughput_rps") or 0)):
        engine = row.get("engine_inprocess_rps")
        rps = row.get("throughput_rps") or 0.0
        gap = f"{100 * (1 - rps / engine):.0f} %" if engine else "–"
        print(f"{row['server'] + '/' + row['format']:16} {rps:8.2f} {row.get('latency_ms_p50') or 0:8.1f} "
              f"{engine or 0:15.2f} {gap:>6}  {row.get('server_cpu_pct') or 0:.0f}  {row['status']}")
    print_costs(args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
