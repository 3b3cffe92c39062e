"""The engine's own speed, in process: the artifact run by the same engine classes the custom service uses
(app.py), on the model's seeded inputs, one call after another, with the given intra-op threads.

    python docker/custom/engine_speed.py --model-dir DIR --spec spec.json --batch-size 1 --threads 1 --seconds 3

Prints one JSON line: engine (name and version), calls/s, and the median and 99th percentile of a call's time.
It is the ceiling of a server that adds nothing to the engine: a served stack at concurrency 1 is compared with
it in the report (tasks/measure/engine_speed.py runs this in the `custom` runtime, on the server's CPUs).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from app import load_engine  # the same engines the custom service serves with

WARMUP_CALLS = 5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)

    from tasks.core.spec import ModelSpec, make_inputs

    spec = ModelSpec.from_dict(json.loads(args.spec.read_text()))
    engine = load_engine(args.model_dir, args.threads, [t.name for t in spec.inputs], [t.name for t in spec.outputs])
    inputs = make_inputs(spec, args.batch_size)
    for _ in range(WARMUP_CALLS):
        engine(inputs)
    times = []
    deadline = time.perf_counter() + args.seconds
    while time.perf_counter() < deadline or len(times) < 3:
        started = time.perf_counter()
        engine(inputs)
        times.append(time.perf_counter() - started)
    total = sum(times)
    print(json.dumps({"engine": engine.version, "calls": len(times), "rps": len(times) / total,
                      "p50_ms": float(np.percentile(times, 50) * 1e3), "p99_ms": float(np.percentile(times, 99) * 1e3),
                      "batch_size": args.batch_size, "threads": args.threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
