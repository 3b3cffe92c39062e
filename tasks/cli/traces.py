"""Traces: make one from a load shape or an access log, and say what one holds (docs/measuring.md#traces).

    python -m tasks.cli trace shape day --params '{"mean_rps": 8, "peak_ratio": 1.8, "length_s": 60}' \\
        --arrival poisson --seed 1 --out workloads/traces/synthetic-day.csv
    python -m tasks.cli trace from-log access.log --format clf --match 'POST /v2/models/.+/infer' --out my.csv
    python -m tasks.cli trace show workloads/traces/synthetic-day.csv
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.loadgen.access_log import FORMATS, trace_from_log
from tasks.loadgen.load_shapes import ARRIVALS, SHAPES, shape_trace
from tasks.loadgen.trace import Trace, read_trace, write_trace


def describe(trace: Trace) -> str:
    """One paragraph: arrivals, length, mean and peak rates, digest, where it came from."""
    mean = trace.arrivals / trace.length_s if trace.length_s > 0 else float("inf")
    return (f"trace {trace.name}: {trace.arrivals} arrivals over {trace.length_s:.3f} s, mean {mean:.2f} req/s, "
            f"peak {trace.peak_rps():.0f} req/s in a 1 s window, digest {trace.digest} ({trace.label}); "
            f"from {trace.source or 'nowhere said'}"
            + (f"; shape {json.dumps(trace.shape, sort_keys=True)}" if trace.shape else ""))


def _made_by(*argv: str) -> str:
    """The command that makes the file again, for its `# made by:` line."""
    return "python -m tasks.cli trace " + " ".join(shlex.quote(a) for a in argv)


def cmd_shape(args: argparse.Namespace) -> int:
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as exc:
        raise ConfigError("--params", args.params, f"must be a JSON object ({exc.msg})") from exc
    if not isinstance(params, dict):
        raise ConfigError("--params", args.params, "must be a JSON object of the shape's parameters")
    trace = shape_trace(args.kind, params, args.arrival, args.seed, args.name or Path(args.out).stem)
    write_trace(Path(args.out), trace, _made_by("shape", args.kind, "--params", args.params, "--arrival", args.arrival,
                                                "--seed", str(args.seed), "--out", args.out))
    print(f"wrote {args.out}: {describe(trace)}")
    return 0


def cmd_from_log(args: argparse.Namespace) -> int:
    made = trace_from_log(Path(args.log), args.format, args.match, args.name or Path(args.out).stem)
    write_trace(Path(args.out), made.trace, _made_by("from-log", args.log, "--format", args.format,
                                                     *(("--match", args.match) if args.match else ()),
                                                     "--out", args.out))
    print(f"read {args.log}: {made.lines} lines, {made.kept} kept, {made.unmatched} not matched, {made.untimed} "
          f"without a {args.format} time" + (", out of order (sorted)" if made.reordered else ""))
    print(f"wrote {args.out}: {describe(made.trace)}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    print(describe(read_trace(Path(args.trace))))
    return 0


def add_commands(sub) -> None:
    """The `trace` subcommands."""
    trace = sub.add_parser("trace", help="make a trace from a load shape or an access log; show one")
    verbs = trace.add_subparsers(dest="trace_command", required=True)
    shape = verbs.add_parser("shape", help="a generated trace: step, ramp, spike or day (tasks/loadgen/load_shapes.py)")
    shape.add_argument("kind", choices=sorted(SHAPES))
    shape.add_argument("--params", required=True, help="the shape's parameters as a JSON object")
    shape.add_argument("--arrival", choices=ARRIVALS, default="constant")
    shape.add_argument("--seed", type=int, default=0, help="the Poisson arrivals' seed")
    shape.add_argument("--name", help="the trace's name (default: the output file's stem)")
    shape.add_argument("--out", required=True, help="the trace file to write")
    shape.set_defaults(func=cmd_shape)
    log = verbs.add_parser("from-log", help="a trace from an access log's timestamps (tasks/loadgen/access_log.py)")
    log.add_argument("log", help="the access log")
    log.add_argument("--format", choices=FORMATS, required=True, help="how its lines write their time")
    log.add_argument("--match", help="keep only lines this regular expression finds (the inference requests)")
    log.add_argument("--name", help="the trace's name (default: the output file's stem)")
    log.add_argument("--out", required=True, help="the trace file to write")
    log.set_defaults(func=cmd_from_log)
    show = verbs.add_parser("show", help="what a trace file holds: arrivals, length, rates, digest")
    show.add_argument("trace")
    show.set_defaults(func=cmd_show)
