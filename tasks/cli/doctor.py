"""`doctor`: is this host fit to measure on? Every finding of the pre-flight check (tasks/measure/hostcheck.py)
with what it does to the numbers; with a suite or `--conf`, also that run's hard limits.

    python -m tasks.cli doctor                          # this host, with other work's CPU sampled for 3 s
    python -m tasks.cli doctor --suite nightly --json   # and what the nightly suite needs of it, as JSON
"""

from __future__ import annotations

import argparse
import json

from tasks.cli.output import EXIT_NOT_OK, EXIT_OK
from tasks.cli.runs import conf_params
from tasks.measure.hostcheck import check_host, describe
from tasks.plan.config import RunConfig

DEFAULT_SAMPLE_S = 3.0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print the host's findings; exit 1 when it fails a hard limit (a run would be refused), else 0."""
    config = RunConfig.from_params(conf_params(args.suite, args.conf)) if (args.suite or args.conf) else None
    check = check_host(config, sample_s=args.sample_s, refuse=False)
    if args.json:
        print(json.dumps(check.to_dict(), indent=2, sort_keys=True))
        return EXIT_NOT_OK if check.refused else EXIT_OK
    print(f"host check ({'for ' + (config.suite or 'the given Params') if config else 'no run given'}; other work "
          f"sampled for {args.sample_s:g} s):")
    for line in describe(check):
        print(line)
    counts = {s: sum(f.severity == s for f in check.findings) for s in ("refused", "warning", "note", "ok")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()) + (
        ": a run would be refused here" if check.refused else ": a run may measure here"))
    return EXIT_NOT_OK if check.refused else EXIT_OK


def add_commands(sub) -> None:
    doctor = sub.add_parser("doctor", help="check this host for measuring (cores, isolation, governor, turbo, SMT, "
                                           "limits, load and steal, hardware counters, memory, disk)")
    doctor.add_argument("--suite", help="suites/<name>.yaml: also check what that run needs of this host")
    doctor.add_argument("--conf", help="JSON of Params: also check what that run needs of this host")
    doctor.add_argument("--sample-s", type=float, default=DEFAULT_SAMPLE_S,
                        help=f"seconds to sample other work's CPU and the steal (default {DEFAULT_SAMPLE_S:g}; "
                             "0: none)")
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    doctor.set_defaults(func=cmd_doctor)
