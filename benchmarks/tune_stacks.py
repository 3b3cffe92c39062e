"""Default against tuned, per stack, on this machine: a configuration search (Param tune) over every stack that
runs here as a process, on one model, printed as a table (and the engine's own speed in process next to it).

    .venv/bin/python benchmarks/tune_stacks.py --model mlp
    .venv/bin/python benchmarks/tune_stacks.py --model resnet50 --duration-s 8 --budget-s 600

It runs the real pipeline (tasks.pipeline.run_pipeline) against an embedded S3 in a temp folder: each stack's
knobs (Server.knobs) searched with the quick method, closed loop at the given concurrencies, a configuration's
score its highest throughput with p99 within --p99-bound-ms. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks.pipeline import run_pipeline  # noqa: E402
from tasks.store.embedded_s3 import start_embedded_s3  # noqa: E402

STACKS = ["triton", "torchserve", "bentoml", "kserve", "custom"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--formats", default="onnx,torchscript")
    parser.add_argument("--servers", default=",".join(STACKS))
    parser.add_argument("--concurrencies", default="1,4")
    parser.add_argument("--duration-s", type=float, default=3.0)
    parser.add_argument("--p99-bound-ms", type=float, default=50.0)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--method", default="quick", choices=["quick", "grid"])
    args = parser.parse_args(argv)
    conf = {"suite": "smoke", "models": [args.model], "formats": args.formats.split(","),
            "servers": args.servers.split(","), "concurrencies": [int(c) for c in args.concurrencies.split(",")],
            "duration_s": args.duration_s, "warmup_s": 1.0, "window_s": 1.0, "tune": args.method,
            "tune_budget_s": args.budget_s, "p99_bound_ms": args.p99_bound_ms, "control_cell": "none",
            "duets": False, "fail_on_cell_failure": False, "s3_bucket": "bench", "s3_prefix": "tune"}
    started = time.monotonic()
    with start_embedded_s3() as s3:
        s3.create_bucket("bench")
        summary, rows = run_pipeline(conf, run_id=f"bench-tune-{args.model}", logical_date="2026-01-01T00:00:00+00:00",
                                     conn=s3.connection("bench"))
        store_tuning = []
        from tasks.store.s3 import S3Store

        store = S3Store("bench", "tune", s3.connection("bench"))
        prefix = summary["prefix"]
        if store.exists(f"{prefix}/tuning.json"):
            store_tuning = store.get_json(f"{prefix}/tuning.json")["searches"]
    print(f"\n{args.model}: quick search per stack, p99 bound {args.p99_bound_ms:g} ms, concurrencies "
          f"{args.concurrencies}, {args.duration_s:g} s per point; {time.monotonic() - started:.0f} s in all")
    print(f"{'stack':24} {'default req/s':>14} {'tuned req/s':>12} {'gain':>7}  {'configs':>7}  winning knobs")
    for search in sorted(store_tuning, key=lambda s: (s["server"], s["format"])):
        trials = search["trials"]
        default = trials[0]["score_rps"] if trials else None
        best = search.get("best") or {}
        tuned = best.get("score_rps")
        gain = f"{100 * (tuned / default - 1):+.0f} %" if tuned and default else "–"
        print(f"{search['server'] + '/' + search['format']:24} {default or 0:14.1f} {tuned or 0:12.1f} {gain:>7}  "
              f"{len(trials):7d}  {search.get('best_change') or '–'}")
    engines = {(r["server"], r["format"]): r.get("engine_inprocess_rps") for r in rows if r.get("engine_inprocess_rps")}
    if engines:
        print("\nengine in process (calls/s, the servers' default threads):",
              json.dumps({f"{s}/{f}": round(v, 1) for (s, f), v in sorted(engines.items())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
