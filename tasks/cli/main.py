"""Command line: run the pipeline without a scheduler, the local demo and Airflow, the store reader, and the
set-up of runtimes, images, the Docker engine and a deployment. Each group of commands is one file here.

    python -m tasks.cli run | plan | publish         runs.py    the pipeline in this process; its plan, checked; a
                                                            failed publish's kept results, published
    python -m tasks.cli demo | airflow               local.py   `airflow dags test` on an embedded S3; the UI
    python -m tasks.cli runs | report | compare | hosts | exclude | exclusions | include | accept | acceptances
                        | watchdog | migrate         store.py   read (annotate, move, watch) the published runs
    python -m tasks.cli reference                    contract.py  the results' data dictionary, from the contract
    python -m tasks.cli doctor                       doctor.py  is this host fit to measure on (the pre-flight check)
    python -m tasks.cli images build|prune|compose-env   images.py  container images
    python -m tasks.cli engine start|stop|status|run     engine.py  the local Docker engine
    python -m tasks.cli deploy init|bucket               deploy.py  a deployment's one-shot set-up
    python -m tasks.cli trace shape|from-log|show        traces.py  make a trace (a load shape, an access log), show one

Exit codes of run/demo/publish: 0 the run published and fully ok; 1 published but not fully ok (failed cells, failed
validation, nothing measured, or a failing `check`); 2 refused before any work (bad input, store unreachable), or
the store did not answer within the run's store_wait_s (its results kept for `publish`);
130 interrupted (Ctrl-C or SIGTERM: every process the command started is stopped first).
Exit codes of plan/runs/report/compare/migrate/reference/doctor/watchdog: 0 ok; 1 `compare` found B worse than A beyond
noise (or an ok cell of A failed in B), `watchdog` found latest.json older than allowed, `report --check` found the
rebuilt page differs from the published one, `migrate` left a folder in the old layout, `reference --check` found the
page differs from the contract, or `doctor` found a hard limit this host fails (a run would be refused); 2 bad
input (a field, a run id).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from tasks.cli import contract, deploy, doctor, engine, images, local, runs, store, traces
from tasks.cli.output import EXIT_INTERRUPTED, EXIT_REFUSED
from tasks.core.errors import ServingEvalError
from tasks.runtimes import interrupts

COMMAND_GROUPS = (runs, local, store, contract, doctor, images, engine, deploy, traces)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m tasks.cli", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = root.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_commands(sub)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    with interrupts.stop_on_signals():  # SIGTERM unwinds like Ctrl-C: clean-ups run
        try:
            return args.func(args)
        except (ServingEvalError, subprocess.CalledProcessError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        except KeyboardInterrupt:
            print("interrupted: every process this command started was stopped", file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
