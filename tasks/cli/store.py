"""The store reader: the published runs, a run's report rebuilt, two runs compared, the hosts a matrix needs, the
exclusions that keep a night out of the baselines, and the move of old-layout runs to the new folder layout.

    python -m tasks.cli runs                                    # the published runs: status, suite, regressions
    python -m tasks.cli report RUN --out report.html            # rebuild a run's report from the store
    python -m tasks.cli compare RUN_A RUN_B                     # side by side per cell, changes beyond noise
    python -m tasks.cli hosts RUN --window-h 4                  # measuring hosts a nightly matrix needs
    python -m tasks.cli exclude RUN_ID [--cell CELL_ID ...] --reason TEXT   # keep a run out of baselines
    python -m tasks.cli exclusions | include EXCLUSION_ID
    python -m tasks.cli accept RUN_ID [--cell CELL_ID ...] --reason TEXT    # a regressed night's level accepted
    python -m tasks.cli acceptances
    python -m tasks.cli watchdog --max-age-h 30                 # exit 1 when latest.json is older (from outside)
    python -m tasks.cli migrate [--dry-run]                     # move runs of the old folder layout to the new one

Every one of them names the store the same way: `--bucket`, `--prefix` and `--conn-id` (the run's defaults).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tasks.cli.output import change_text, table
from tasks.core.errors import ConfigError
from tasks.core.metrics import METRICS
from tasks.core.results import frame_records
from tasks.plan.capacity import cell_durations, hosts_needed, run_matrix
from tasks.plan.config import RunConfig
from tasks.regress.annotations import add_acceptance, add_exclusion, list_acceptances, list_exclusions, remove_exclusion
from tasks.regress.compare import compare_rows
from tasks.report.page import rebuild_report
from tasks.report.record import record_rows
from tasks.report.run_index import latest_records
from tasks.report.trend import differences
from tasks.report.watchdog import check_latest
from tasks.store.history import find_run, read_results, run_summaries
from tasks.store.layout import safe_run_id
from tasks.store.migrate import LEFT, migrate_layout
from tasks.store.s3 import S3Store, connection_from_env

DEFAULTS = RunConfig()


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bucket", default=DEFAULTS.s3_bucket, help=f"the result store's bucket (default "
                                                                     f"{DEFAULTS.s3_bucket})")
    parser.add_argument("--prefix", default=DEFAULTS.s3_prefix, help=f"the result store's prefix (default "
                                                                     f"{DEFAULTS.s3_prefix})")
    parser.add_argument("--conn-id", default=DEFAULTS.aws_conn_id,
                        help=f"the Airflow AWS connection, from AIRFLOW_CONN_<ID> (default {DEFAULTS.aws_conn_id})")


def open_store(args: argparse.Namespace) -> S3Store:
    store = S3Store(args.bucket, args.prefix, connection_from_env(args.conn_id), sse=DEFAULTS.s3_sse)
    store.check()
    return store


def cmd_runs(args: argparse.Namespace) -> int:
    """The published runs, oldest first: date, run id, status, suite, regression count."""
    store = open_store(args)
    runs = run_summaries(store, args.limit or None)
    records = latest_records(store)
    if args.json:
        print(json.dumps(records if args.records else runs, indent=2))
        return 0
    if not runs:
        print(f"no published run in {store.describe()}")
        return 0
    print(table([[r["dt"], r["run_id"], r["status"], r["suite"] or "-",
                  "-" if r["regressions"] is None else str(r["regressions"]), (r["git_sha"] or "-")[:10]]
                 for r in runs], ["dt", "run_id", "status", "suite", "regressions", "git"]))
    for record in records:
        print_record(record)
    return 0


def print_record(record: dict) -> None:
    """Each stack's record over the nights, as the report shows it, and every reason a cell was not ok."""
    nights = record.get("nights") or []
    print(f"\neach stack's record over the last {len(nights)} nights of suite {record.get('suite') or '-'} "
          f"(as of {record.get('run_id')}): cells ok of ok, failed and missing; contended apart, skipped not counted")
    rows = record_rows(record)
    print(table([[r["model"], r["stack"], r["share"], str(r["failed"]), str(r["missing"]), str(r["contended"]),
                  str(r["skipped"])] for r in rows],
                ["model", "stack", "cells ok", "failed", "missing", "contended", "skipped"]))
    for row in rows:
        for f in row["failures"] + row["contended_cells"]:
            print(f"  {row['model']} {row['stack']} {f['logical_date'][:10]} {f['cell_id']}: {f['status']}: "
                  f"{f['reason'][:300]}")


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild a run's report.html from its published files; say whether it equals the published page."""
    store = open_store(args)
    manifest = find_run(store, args.run)
    page = rebuild_report(store, manifest).encode()
    out = Path(args.out or f"report-{safe_run_id(manifest['run_id'])}.html")
    out.write_bytes(page)
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    same = "report.html" in names and store.get(names["report.html"]) == page
    verdict = "identical to" if same else "differs from" if "report.html" in names else "no"
    print(f"wrote {out} ({len(page):,} bytes) for run {manifest['run_id']}: {verdict} the published report.html")
    return 1 if args.check and not same else 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Two published runs side by side per cell key; exit 1 when B is worse than A beyond noise somewhere."""
    store = open_store(args)
    manifest_a, manifest_b = find_run(store, args.run_a), find_run(store, args.run_b)
    rows_a = frame_records(read_results(store, manifest_a))
    rows_b = frame_records(read_results(store, manifest_b))
    records = compare_rows(rows_a, rows_b)
    diffs = differences(manifest_a.get("provenance") or {}, rows_a, manifest_b.get("provenance") or {}, rows_b)
    if args.json:
        print(json.dumps({"a": manifest_a["run_id"], "b": manifest_b["run_id"], "incomparable": diffs,
                          "cells": records}, indent=2, default=str))
    else:
        print(f"A = {manifest_a['run_id']} ({manifest_a['logical_date'][:19]}, {manifest_a['status']})")
        print(f"B = {manifest_b['run_id']} ({manifest_b['logical_date'][:19]}, {manifest_b['status']})")
        for diff in diffs:
            print(f"warning: not comparable: {diff}")
        metrics = ("throughput_rps", "latency_ms_p99")
        header = ["cell", "status", *(f"{METRICS[m].label} ({METRICS[m].unit})" for m in metrics), "verdict", "notes"]
        print(table([[r["label"], f"{r['status_a'] or '-'} -> {r['status_b'] or '-'}",
                      *(change_text(r["metrics"].get(m)) for m in metrics), r["verdict"], "; ".join(r["notes"])]
                     for r in records], header))
        counts = {v: sum(r["verdict"] == v for r in records) for v in ("worse", "better", "same", "contended", "new",
                                                                        "gone")}
        print(f"{len(records)} cells: " + ", ".join(f"{n} {v}" for v, n in counts.items())
              + " (++/--: better/worse beyond noise)")
    return 1 if any(r["verdict"] == "worse" for r in records) else 0


DEFAULT_WINDOW_H = 4.0  # a run without a night's budget: a night of four hours


def cmd_hosts(args: argparse.Namespace) -> int:
    """How many measuring hosts a nightly matrix needs for a window (by default the run's night's budget), from a
    published run's session timelines; the matrix is the run's whole plan, the cells its budget deferred included."""
    store = open_store(args)
    manifest = find_run(store, args.run)
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    if "logs/sessions.json" not in names:
        raise ConfigError("run", args.run, "must be a published run with logs/sessions.json")
    durations = cell_durations(json.loads(store.get(names["logs/sessions.json"])))
    plan = json.loads(store.get(names["plan.json"])) if "plan.json" in names else {}
    models, stacks, loads = run_matrix(plan)
    budget = (plan.get("config") or {}).get("night_budget_s")
    window_h = args.window_h or (budget / 3600 if budget else DEFAULT_WINDOW_H)  # the night's budget by default
    estimate = hosts_needed(durations, args.models or models, args.stacks or stacks, args.loads or loads,
                            window_h * 3600)
    if args.json:
        print(json.dumps({"run_id": manifest["run_id"], "durations": durations.to_dict(),
                          "estimate": estimate.to_dict()}, indent=2))
        return 0
    print(f"run {manifest['run_id']} ({manifest['logical_date'][:10]}): {durations.sessions} server sessions, "
          f"{durations.points} load points, on host(s) {', '.join(durations.hosts)}; "
          f"{durations.busy_s:.0f} s of servers up")
    print(f"  per load point: {durations.point_s:.1f} s (longest {durations.point_max_s:.1f} s)")
    print(f"  per session besides its load points (start-up, served check, stop): {durations.overhead_s:.1f} s "
          f"(longest {durations.overhead_max_s:.1f} s)")
    print(f"  between two sessions on a host (the next task's start): {durations.gap_s:.1f} s "
          f"({durations.gaps} gaps measured)")
    print(f"matrix: {estimate.models} models x {estimate.stacks} stacks x {estimate.loads} load points = "
          f"{estimate.sessions} sessions, {estimate.host_time_s / 3600:.2f} h of host time")
    if estimate.hosts_needed is None:
        print(f"window {window_h:g} h: no number of hosts fits it: {estimate.note}")
    else:
        print(f"window {window_h:g} h: {estimate.hosts_needed} host(s) to measure the whole matrix every night "
              f"({estimate.note})")
    return 0


def cmd_exclude(args: argparse.Namespace) -> int:
    exclusion = add_exclusion(open_store(args), args.run, args.cell, args.reason)
    what = f"cells {exclusion['cells']}" if exclusion["cells"] else "the whole run"
    print(f"excluded {what} of run {exclusion['run_id']} from baselines (exclusion {exclusion['id']}): "
          f"{exclusion['reason']}")
    return 0


def print_annotations(annotations: list[dict], whole: str) -> int:
    """One line per exclusion or acceptance: id, run, its cells (or `whole`), when, who, why."""
    for e in annotations:
        print(f"{e['id']}  {e['run_id']}  {','.join(e['cells']) if e['cells'] else whole}  "
              f"{e['created_at'][:16]} {e['created_by']}: {e['reason']}")
    return 0


def cmd_exclusions(args: argparse.Namespace) -> int:
    return print_annotations(list_exclusions(open_store(args)), "(whole run)")


def cmd_accept(args: argparse.Namespace) -> int:
    acceptance = add_acceptance(open_store(args), args.run, args.cell, args.reason)
    what = f"cells {acceptance['cells']}" if acceptance["cells"] else "every cell"
    print(f"accepted the level of run {acceptance['run_id']} for {what} (acceptance {acceptance['id']}): it is their "
          f"reference from now on, and a regression judged on it is no longer open: {acceptance['reason']}")
    return 0


def cmd_acceptances(args: argparse.Namespace) -> int:
    return print_annotations(list_acceptances(open_store(args)), "(every cell)")


def cmd_watchdog(args: argparse.Namespace) -> int:
    """Exit 1 when the store's latest.json is older than --max-age-h: a check to run from outside Airflow (cron, a
    monitoring system), which also sees a night missed because Airflow itself was down."""
    from datetime import UTC, datetime

    stale = check_latest(open_store(args), datetime.now(UTC), args.max_age_h, args.period_h)
    if stale is None:
        print(f"ok: latest.json is at most {args.max_age_h:g} h old")
        return 0
    latest = stale["latest"] or {}
    print(f"missing: no run published for the night due {stale['night']}; newest {latest.get('run_id') or 'none'} "
          f"({latest.get('logical_date') or 'never'}), {stale['age_h']:.1f} h ago (at most {args.max_age_h:g} h)")
    return 1


def cmd_include(args: argparse.Namespace) -> int:
    exclusion = remove_exclusion(open_store(args), args.exclusion_id)
    print(f"removed exclusion {exclusion['id']} of run {exclusion['run_id']}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Move the runs published in the old folder layout (`dt=<date>/run_id=<id>/`, before schema 1.4) to
    `dt=<date>/run=<id>/` and say what moved; exit 1 when a folder had to be left in the old layout."""
    store = open_store(args)
    moves = migrate_layout(store, dry_run=args.dry_run)
    for move in moves:
        print(move.describe())
    left = sum(m.action == LEFT for m in moves)
    if not moves:
        print(f"nothing to move: every run in {store.describe()} is in the dt=<date>/run=<id> layout")
    else:
        print(f"{len(moves) - left} old-layout folders {'to move or delete' if args.dry_run else 'moved or deleted'}, "
              f"{left} left, in {store.describe()}")
    return 1 if left else 0


def add_commands(sub) -> None:
    """The subcommands that read (or annotate, or move) the store: runs, report, compare, hosts, exclude,
    exclusions, include, accept, acceptances, watchdog, migrate."""
    runs = sub.add_parser("runs", help="the published runs with status, suite and regression count")
    runs.add_argument("--limit", type=int, default=0, help="only the newest N")
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--records", action="store_true",
                      help="with --json: each suite's stacks' record over the nights instead of the runs")
    report = sub.add_parser("report", help="rebuild a run's report.html from the store")
    report.add_argument("run", help="run id, `latest`, or the run's folder dt=<date>/run=<id> (or the old run_id=<id>)")
    report.add_argument("--out", help="where to write the page (default report-<run id>.html)")
    report.add_argument("--check", action="store_true", help="exit 1 when it differs from the published page")
    compare = sub.add_parser("compare", help="two runs side by side per cell, changes beyond noise marked")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--json", action="store_true")
    hosts = sub.add_parser("hosts", help="measuring hosts a nightly matrix needs for a window (from a run's timelines)")
    hosts.add_argument("run", help="run id, `latest`, or the run's folder dt=<date>/run=<id> (or the old run_id=<id>)")
    hosts.add_argument("--window-h", type=float, default=None,
                       help=f"the nightly window, hours (default: the run's night_budget_s, else {DEFAULT_WINDOW_H:g})")
    hosts.add_argument("--models", type=int, help="M models (default: the run's)")
    hosts.add_argument("--stacks", type=int, help="S stacks, server x format (default: the run's)")
    hosts.add_argument("--loads", type=int, help="L load points per session (default: the run's)")
    hosts.add_argument("--json", action="store_true")
    exclude = sub.add_parser("exclude", help="exclude a published run (or some of its cells) from baselines")
    exclude.add_argument("run", help="the run id")
    exclude.add_argument("--cell", action="append", help="a cell id (`tasks.cli plan` lists them); repeat; default all")
    exclude.add_argument("--reason", required=True, help="why (shown next to the baselines)")
    exclusions = sub.add_parser("exclusions", help="list the exclusions in the store")
    include = sub.add_parser("include", help="remove an exclusion (by its id)")
    include.add_argument("exclusion_id")
    accept = sub.add_parser("accept", help="accept a regressed night's level for its cells: their new reference")
    accept.add_argument("run", help="the run id")
    accept.add_argument("--cell", action="append", help="a cell id (`tasks.cli plan` lists them); repeat; default all")
    accept.add_argument("--reason", required=True, help="why the new level is the stack's")
    acceptances = sub.add_parser("acceptances", help="list the acceptances in the store")
    watchdog = sub.add_parser("watchdog", help="exit 1 when latest.json is older than the schedule allows")
    watchdog.add_argument("--max-age-h", type=float, default=30.0, help="the oldest latest.json allowed (default 30)")
    watchdog.add_argument("--period-h", type=float, default=24.0, help="a night is due every (default 24)")
    migrate = sub.add_parser("migrate", help="move runs published in the old folder layout (run_id=, before schema "
                                             "1.4) to the new one (run=)")
    migrate.add_argument("--dry-run", action="store_true", help="only say what would be moved or deleted")
    for parser, func in ((runs, cmd_runs), (report, cmd_report), (compare, cmd_compare), (hosts, cmd_hosts),
                         (exclude, cmd_exclude), (exclusions, cmd_exclusions), (include, cmd_include),
                         (accept, cmd_accept), (acceptances, cmd_acceptances), (watchdog, cmd_watchdog),
                         (migrate, cmd_migrate)):
        add_store_options(parser)
        parser.set_defaults(func=func)
