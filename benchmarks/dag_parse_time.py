"""How long the DAG file takes to import, as a DAG processor parses it: a figure, not a check.

    .venv/bin/python benchmarks/dag_parse_time.py [--rounds 5]

Each round is a fresh interpreter. Warm: `airflow.sdk` is imported first (a DAG processor has it loaded) and only
the DAG file's own import is timed. Cold: the whole import including `airflow.sdk`, as `python dags/...` pays it.
Prints each kind's median, min and max in ms. What the parse must not do (open a connection, import torch,
pandas, great_expectations...) is checked by tests/unit/test_dag_integrity.py; how long it takes depends on
the machine and on what else runs there, so it is measured here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAG_FILE = REPO / "dags" / "nightly_serving_eval.py"

WARM = """
import importlib.util, time
import airflow.sdk
from airflow.sdk import Asset, Param, dag, get_current_context, setup, task, teardown
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("dag_under_test", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(time.perf_counter() - start)
"""
COLD = "import time; t = time.perf_counter(); import runpy; runpy.run_path({path!r}); print(time.perf_counter() - t)"


def one_round(code: str) -> float:
    """Seconds the timed part took in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code.format(path=str(DAG_FILE))], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=300, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    for kind, code in (("warm (airflow.sdk loaded)", WARM), ("cold (with airflow.sdk)", COLD)):
        ms = [1000 * one_round(code) for _ in range(args.rounds)]
        print(f"DAG file import, {kind}: median {statistics.median(ms):.0f} ms, min {min(ms):.0f}, max {max(ms):.0f} "
              f"({args.rounds} rounds)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
