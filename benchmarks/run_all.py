"""Run every benchmark in turn and print their figures (not pass/fail tests: they measure the project's
own speed next to peers measured in the same run).

    .venv/bin/python benchmarks/run_all.py            # what `make benchmarks` runs
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    ("conversion: small models cold vs cache hit, resnet50/bert-base", ["convert_models.py"]),
    ("load generator capacity vs wrk and Locust on nginx", ["loadgen_capacity.py"]),
    ("the harness's own cost per request: a null server beside the custom service and Triton", ["null_server.py"]),
    ("the same server as a process and in a container: throughput and p99", ["process_vs_container.py"]),
    ("default against tuned, per stack, on the MLP (a quick configuration search)", ["tune_stacks.py"]),
    ("each stack against its engine in process over JSON and its best wire, ResNet-50 and BERT-base",
     ["engine_gap.py"]),
    ("start-up time as the readiness poll reads it: fixed 0.1 s against 5 % of the wait",
     ["startup_resolution.py"]),
    ("the DAG file's import time, with airflow.sdk loaded and cold", ["dag_parse_time.py"]),
    ("how noisy this host is within the hour, on the recorded sessions (record new ones: host_noise.py record)",
     ["host_noise.py", "analyse"]),
    ("... the same, on the noisier half-hour recorded before it", ["host_noise.py", "analyse", "--data",
                                                                   str(HERE / "data" / "host_noise_1438utc.csv")]),
)
LIMIT_S = 3600


def main() -> int:
    failed = []
    for title, argv in BENCHMARKS:
        print(f"\n=== {title}\n", flush=True)
        started = time.monotonic()
        code = subprocess.run([sys.executable, str(HERE / argv[0]), *argv[1:]], timeout=LIMIT_S).returncode
        print(f"--- {argv[0]}: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        if code:
            failed.append(argv[0])
    if failed:
        print(f"\nbenchmarks that did not finish: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
