"""`run`, `plan` and `publish`: the pipeline's steps in this process, only its plan (checked as a run's start
checks it), or the publish step of a run whose publishing failed.

    python -m tasks.cli run --conf '{"servers": ["custom"]}'   # the steps in order, no Airflow
    python -m tasks.cli run --logical-date 2026-03-01           # a backfill: judged against earlier nights only
    python -m tasks.cli plan --suite nightly --conf '{...}'     # the cells a run would measure; nothing runs
    python -m tasks.cli publish RUN_ID                          # the results a failed publish kept, published
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime

from tasks.cli.output import EXIT_NOT_OK, EXIT_OK, print_summary
from tasks.core.errors import ConfigError
from tasks.core.metadata import collect_host_metadata
from tasks.core.results import to_frame
from tasks.pipeline import (
    RunFailed,
    check_outcome,
    fit_plan,
    plan_run,
    publish_kept,
    read_unpublished,
    result_store,
    run_pipeline,
    run_problems,
    unpublished_runs,
)
from tasks.plan.capacity import measuring_estimate_s
from tasks.plan.cells import Plan
from tasks.plan.config import RunConfig
from tasks.plan.night import night_lines
from tasks.report.lead import published_lines
from tasks.store.s3 import connection_from_env


def conf_params(suite: str | None, conf_text: str | None) -> dict:
    """The Params of a command line: `--conf` JSON, with `--suite` as its `suite` unless the JSON names one."""
    try:
        conf = json.loads(conf_text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError("conf", conf_text, f"must be a JSON object of Params: {exc}") from exc
    if not isinstance(conf, dict):
        raise ConfigError("conf", conf_text, "must be a JSON object of Params")
    return {"suite": suite, **conf} if suite else conf


def cmd_run(args: argparse.Namespace) -> int:
    """The pipeline's steps in order, in this process: what the DAG does, without a scheduler."""
    params = conf_params(args.suite, args.conf)
    conn = connection_from_env(RunConfig.from_params(params).aws_conn_id)
    now = datetime.now(UTC)
    logical = parse_logical_date_arg(args.logical_date) if args.logical_date else now
    default_id = f"cli__backfill__{logical.strftime('%Y%m%dT%H%M')}" if args.logical_date else \
        f"cli__{now.strftime('%Y%m%dT%H%M%S')}"
    summary, rows = run_pipeline(params, run_id=args.run_id or default_id, logical_date=logical.isoformat(),
                                 conn=conn)
    print_lead(RunConfig.from_params(params), conn, summary)
    print_summary(to_frame(rows))
    return report_outcome(summary)


def print_lead(config: RunConfig, conn, summary: dict) -> None:
    """What the night found and its budget, read back from the store it was published to (nothing when publishing
    failed: the summary says why)."""
    if not summary.get("prefix"):
        return
    store = result_store(config, conn)
    try:
        manifest = store.get_json(f"{summary['prefix']}/manifest.json")
        print("\n".join(published_lines(store, manifest)))
    except Exception as exc:  # noqa: BLE001 - the run is published; only its first lines could not be read back
        print(f"(the night's findings could not be read back from the store: {type(exc).__name__}: {exc})")


def report_outcome(summary: dict) -> int:
    """The publish summary printed, then every reason the run is not fully ok; the exit code of `run`."""
    print(json.dumps(summary, indent=2))
    problems = run_problems(summary)
    try:
        check_outcome(summary)
    except RunFailed as exc:
        problems.append(str(exc))
    for problem in dict.fromkeys(problems):
        print(f"not fully ok: {problem}", file=sys.stderr)
    return EXIT_NOT_OK if problems else EXIT_OK


def parse_logical_date_arg(value: str) -> datetime:
    """`YYYY-MM-DD` or `YYYY-MM-DDTHH:MM` (UTC) -> an aware datetime."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2})?", value):
        raise ConfigError("--logical-date", value, "must be YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)")
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError as exc:
        raise ConfigError("--logical-date", value, f"must be a real date and time ({exc})") from exc


def cmd_plan(args: argparse.Namespace) -> int:
    """The cells a run of this suite/conf would measure, checked exactly as a run's plan step checks them (Params,
    specs, bring-your-own files and their `sha256`); nothing is converted, started or published."""
    params = conf_params(args.suite, args.conf)
    conn = connection_from_env(RunConfig.from_params(params).aws_conn_id)
    plan = plan_run(params, conn)
    plan, note = budget_plan(plan, conn)
    if args.json:
        print(json.dumps({"suite": plan.config.suite, **plan.to_dict()}, indent=2, sort_keys=True))
        return EXIT_OK
    suite = plan.config.suite
    print(f"plan of {'suite ' + suite if suite else 'the default Params'}{' with overrides' if args.conf else ''}: "
          f"{len(plan.conversions)} conversions, {len(plan.sessions)} server sessions, {len(plan.cells)} cells "
          "(nothing run)")
    print("conversions: " + ", ".join(f"{c['model']}/{c['format']}" for c in plan.conversions))
    planned_s, typical_s, most_s = measuring_estimate_s(plan.cells, plan.config)
    print(f"load points: at most {planned_s / 60:.0f} min of warm-up and measured time"
          + (f"; longer looks at undecided points an answer hinges on (at most max_point_s, "
             f"{plan.config.max_point_s:g} s) add at most {typical_s / 60:.0f} min at one look a lengthening cell, "
             f"{most_s / 60:.0f} min at the most looks"
             if plan.config.max_point_s is not None else ""))
    if plan.night:
        print(f"the night's budget ({note}):")
        for line in night_lines(plan.night):
            print(f"  {line}")
    classes = plan.night.get("classes") or {}
    for session in plan.sessions:
        print(f"session {session.session_id}")
        for cell in session.cells:
            wire = f"{cell.wire or 'json'}: {cell.protocol}" if not cell.skip else f"skipped: {cell.skip}"
            klass = f" [{classes[cell.cell_id]}]" if cell.cell_id in classes else ""
            print(f"  {cell.cell_id:<66} {wire}{klass}")
    deferred = plan.night.get("deferred") or []
    if deferred:
        print(f"deferred to a later night ({len(deferred)} cells):")
        for item in deferred:
            when = f"last measured {item['last_logical_date'][:10]}" if item.get("last_run_id") else "never measured"
            print(f"  {item['cell_id']:<66} [{item['class']}] {when}{'; past K' if item.get('overdue') else ''}")
    return EXIT_OK


def budget_plan(plan: Plan, conn) -> tuple[Plan, str]:
    """The plan fitted into its night's budget from the store's last nights on this host, as the run's plan step
    would fit it, and what the estimates rest on; without the store, on a first night's defaults."""
    if plan.config.night_budget_s is None:
        return plan, ""
    try:
        store = result_store(plan.config, conn)
        store.check()
    except Exception as exc:  # noqa: BLE001 - a dry run without its store: the first night's defaults, said so
        return fit_plan(plan, None, collect_host_metadata(), None), f"the store did not answer ({exc}); defaults"
    return fit_plan(plan, store, collect_host_metadata(), None), f"estimated from {store.describe()}"


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish the results a run kept in its work folder on this host when its publish failed (the store did not
    answer): the same run folder the step would have written; nothing is measured again. No id: the waiting runs."""
    if not args.run_id:
        waiting = unpublished_runs()
        print("\n".join(waiting) if waiting else "no run's results wait on this host to be published")
        return EXIT_OK
    kept = read_unpublished(args.run_id)
    config = kept["started"]["config"]
    conn = connection_from_env(args.conn_id or config["aws_conn_id"])
    summary = publish_kept(kept, conn, bucket=args.bucket, prefix=args.prefix)
    print(f"published run {kept['run_id']} to {summary['manifest']}; its work folder is removed")
    return report_outcome(summary)


def add_commands(sub) -> None:
    run = sub.add_parser("run", help="run the pipeline steps in this process (no scheduler)")
    run.add_argument("--conf", help="JSON of Params (see the DAG); they override the suite's")
    run.add_argument("--suite", help="suites/<name>.yaml to run (default: none, the built-in defaults)")
    run.add_argument("--run-id")
    run.add_argument("--logical-date", help="YYYY-MM-DD[THH:MM] (UTC), for backfills; default now")
    run.set_defaults(func=cmd_run)
    plan = sub.add_parser("plan", help="the cells a run of a suite/conf would measure (checked; nothing is run)")
    plan.add_argument("--suite", help="suites/<name>.yaml: its Params, overridden by --conf")
    plan.add_argument("--conf", help="JSON of Params")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.set_defaults(func=cmd_plan)
    publish = sub.add_parser("publish", help="publish the results a run kept when its publish failed (no id: list "
                                             "the runs waiting)")
    publish.add_argument("run_id", nargs="?", help="the run id (the failed publish names it)")
    publish.add_argument("--bucket", help="the result store's bucket (default: the run's, Param s3_bucket)")
    publish.add_argument("--prefix", help="the result store's prefix (default: the run's, Param s3_prefix)")
    publish.add_argument("--conn-id", help="the Airflow AWS connection, from AIRFLOW_CONN_<ID> (default: the run's, "
                                           "Param aws_conn_id)")
    publish.set_defaults(func=cmd_publish)
