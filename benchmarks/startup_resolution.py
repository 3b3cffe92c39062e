"""Start-up time as the readiness poll reads it: a fixed 0.1 s poll against polling every 5 % of the wait.

    .venv/bin/python benchmarks/startup_resolution.py [--server custom] [--format onnx] [--rounds 15]

Starts the server on the MLP `--rounds` times under each policy, alternating (process launcher), and prints
each policy's start-ups: median, spread (1.4826 MAD), range (max - min, over the median: the MAD hides a
step that only a third of the readings take), how many distinct values, and the ratio of the medians.
The fixed poll reads a start-up as the first poll after it, in steps of 0.1 s (the custom service's 0.33 s
start-up read 0.33 or 0.44 s at random: +33 % "regressions"); the fine poll should resolve it to about 5 %
and read it no later (its extra polls must not slow the start-up they time). Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIXED_POLL_S = 0.1  # the policy before 2026-12-01


def start_once(server_name: str, artifact, spec, log_dir: Path, policy: str) -> float:
    import tasks.serve.session as session
    from tasks.serve.launchers.process import ProcessLauncher
    from tasks.serve.servers import get_server

    fine = session.ready_poll_interval
    if policy == "fixed":
        session.ready_poll_interval = lambda waited_s: FIXED_POLL_S
    try:
        with session.server_session(get_server(server_name), artifact, spec, ProcessLauncher(),
                                    session.SessionSettings(run_id="bench-startup", session_id=f"startup-{policy}",
                                                            log_dir=log_dir)) as live:
            return live.startup_s
    finally:
        session.ready_poll_interval = fine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="custom")
    parser.add_argument("--format", default="onnx")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)

    from tasks.convert import convert
    from tasks.core.spec import load_spec

    spec = load_spec("mlp")
    artifact = convert(spec, args.format, log=lambda _: None)
    log_dir = Path(tempfile.mkdtemp(prefix="serving-eval-bench-startup-"))
    readings: dict[str, list[float]] = {"fixed": [], "fine": []}
    try:
        start_once(args.server, artifact, spec, log_dir, "fine")  # the first start fills the OS's caches
        for i in range(args.rounds):
            for policy in (("fixed", "fine") if i % 2 == 0 else ("fine", "fixed")):
                readings[policy].append(start_once(args.server, artifact, spec, log_dir, policy))
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    print(f"{args.server} on mlp/{args.format}, {args.rounds} start-ups per policy, alternating\n")
    print(f"{'readiness poll':<26}{'median s':>10}{'spread %':>10}{'range %':>10}{'distinct':>10}   values")
    medians = {}
    for policy, label in (("fixed", f"fixed {FIXED_POLL_S:g} s"), ("fine", "5 % of the wait, 10-100 ms")):
        values = readings[policy]
        med = medians[policy] = statistics.median(values)
        spread = 100 * 1.4826 * statistics.median(abs(v - med) for v in values) / med
        spans = 100 * (max(values) - min(values)) / med
        distinct = len({round(v, 3) for v in values})
        print(f"{label:<26}{med:>10.3f}{spread:>10.1f}{spans:>10.1f}{distinct:>10}   "
              + " ".join(f"{v:.3f}" for v in sorted(values)))
    print(f"\nfine / fixed median: x{medians['fine'] / medians['fixed']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
