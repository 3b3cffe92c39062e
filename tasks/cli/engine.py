"""`engine`: the local Docker engine (tasks/runtimes/docker_engine.py) started, stopped, asked, or held for a command.

    python -m tasks.cli engine start           # start dockerd unless an engine answers; wait for it
    python -m tasks.cli engine stop            # stop the dockerd that `start` started (its recorded PID)
    python -m tasks.cli engine status
    python -m tasks.cli engine run -- CMD ...  # an engine for the length of CMD (make test): started if needed
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from tasks.cli.output import EXIT_INTERRUPTED, EXIT_NOT_OK, EXIT_OK
from tasks.runtimes.docker_engine import (
    engine_answers,
    engine_for_a_while,
    engine_host,
    recorded_engine,
    start_engine,
    stop_engine,
)


def cmd_status(args: argparse.Namespace) -> int:
    ours = recorded_engine()
    state = "answers" if engine_answers() else "does not answer"
    print(f"docker engine at {engine_host()} {state}" + (f"; started here, pid {ours.pid}" if ours else ""))
    return EXIT_OK if state == "answers" else EXIT_NOT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    if not stop_engine():
        print("docker engine: none started here is running (nothing to stop)")
    return EXIT_OK


def cmd_start(args: argparse.Namespace) -> int:
    handle = start_engine()  # EngineUnavailable: exit 2 with its message (tasks/cli/main.py)
    if not handle.started_here:
        print(f"docker engine: one already answers at {handle.host}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    with engine_for_a_while(log=lambda line: print(line, file=sys.stderr)):
        try:
            return subprocess.call(command)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED


def add_commands(sub) -> None:
    engine = sub.add_parser("engine", help="the local Docker engine: start, stop, status, or run a command with one")
    inner = engine.add_subparsers(dest="engine_command", required=True)
    inner.add_parser("start", help="start dockerd unless an engine answers").set_defaults(func=cmd_start)
    inner.add_parser("stop", help="stop the dockerd `start` started (by its recorded PID)").set_defaults(func=cmd_stop)
    inner.add_parser("status", help="whether an engine answers").set_defaults(func=cmd_status)
    run = inner.add_parser("run", help="run a command with an engine up for its length (started and stopped here "
                                       "when none answers)")
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD ...")
    run.set_defaults(func=cmd_run)
