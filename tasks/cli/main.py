"""Command line: run the pipeline without a scheduler, run the demo, start a local Airflow, read the store.

    python -m tasks.cli run --conf '{"servers": ["custom"]}'   # the steps in order, no Airflow
    python -m tasks.cli run --logical-date 2026-03-01           # a backfill: judged against earlier nights only
    python -m tasks.cli exclude RUN_ID [--cell CELL_ID ...] --reason TEXT   # keep a run out of baselines
    python -m tasks.cli demo                                    # `airflow dags test` against an embedded S3
    python -m tasks.cli airflow                                 # the Airflow UI on 127.0.0.1:8080
    python -m tasks.cli plan --suite nightly --conf '{...}'     # the cells a run would measure; nothing runs
    python -m tasks.cli runs                                    # the published runs: status, suite, regressions
    python -m tasks.cli report RUN --out report.html            # rebuild a run's report from the store
    python -m tasks.cli compare RUN_A RUN_B                     # side by side per cell, changes beyond noise

Exit codes of run/demo: 0 the run published and fully ok; 1 published but not fully ok (failed cells, failed
validation, nothing measured, or a failing `check`); 2 refused before any work (bad input, store unreachable);
130 interrupted (Ctrl-C or SIGTERM: every process the command started is stopped first).
Exit codes of plan/runs/report/compare: 0 ok; 1 `compare` found B worse than A beyond noise (or an ok cell of A
failed in B), or `report --check` found the rebuilt page differs from the published one; 2 bad input (a field,
a run id).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from tasks.core.errors import ConfigError, ServingEvalError
from tasks.core.paths import REPO_ROOT
from tasks.runtimes import interrupts
from tasks.runtimes.proctree import create_time_of, terminate_tree

DAG_ID = "nightly_serving_eval"
# Every stack that runs as a local process here, side by side on the same model and load.
DEMO_CONF = {"suite": "smoke",
             "servers": ["custom", "triton", "torchserve", "bentoml", "kserve"], "formats": ["onnx", "torchscript"],
             "models": ["mlp"], "concurrencies": [1, 4], "duration_s": 3.0, "warmup_s": 1.0, "window_s": 1.0,
             "fail_on_cell_failure": False}
DEMO_OUT = REPO_ROOT / "demo-results"
CHILD_GRACE_S = 15.0  # Airflow's components get this long after SIGTERM before SIGKILL
EXIT_OK, EXIT_NOT_OK, EXIT_REFUSED, EXIT_INTERRUPTED = 0, 1, 2, 130
SUMMARY_COLUMNS = ("model", "format", "server", "batch_size", "load", "throughput_rps", "latency_ms_p50",
                   "latency_ms_p99", "error_rate", "server_cpu_pct", "startup_s", "stable", "status")


def airflow_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # LocalExecutor starts `parallelism` worker processes (32 by default): as many as the host has cores is
    # plenty, since measuring tasks run one at a time per host anyway.
    env.setdefault("AIRFLOW__CORE__PARALLELISM", str(max(2, os.cpu_count() or 2)))
    # `airflow standalone` starts its components as `airflow ...` from PATH: the orchestrator venv first.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("AIRFLOW_HOME", str(REPO_ROOT / ".airflow"))
    env.update({
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"), "PYTHONPATH": str(REPO_ROOT),
        "GX_ANALYTICS_ENABLED": "false",
    })
    env.update(extra or {})
    return env


def airflow(*args: str, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("airflow")), *args], env=env, **kwargs)


def run_child(argv: list[str], env: dict[str, str], grace_s: float = CHILD_GRACE_S, **popen_kwargs) -> int:
    """Run a long-lived child (Airflow standalone, `dags test`) in its own session; however this ends (its own
    exit, Ctrl-C, SIGTERM), its whole process tree is stopped by PID before returning."""
    proc = subprocess.Popen(argv, env=env, start_new_session=True, **popen_kwargs)
    created = create_time_of(proc.pid)
    try:
        return interrupts.wait(proc)
    except KeyboardInterrupt:
        print(f"\nstopping {Path(argv[0]).name} (pid {proc.pid}) and every process it started ...", flush=True)
        raise
    finally:
        terminate_tree(proc.pid, proc.pid, created, grace_s, reap=proc.poll)


def migrate_db(env: dict[str, str]) -> None:
    proc = airflow("db", "migrate", env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ServingEvalError(f"airflow db migrate failed:\n{proc.stderr[-3000:]}")


def print_summary(frame) -> None:
    cols = [c for c in SUMMARY_COLUMNS if c in frame.columns]
    print(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    failed = frame[frame["status"] != "ok"]
    for _, row in failed.iterrows():
        print(f"  {row['server']}/{row['format']} load={row['load']}: {row['status']}: {str(row['reason'])[:300]}")


def fetch_latest(store) -> tuple[dict, dict]:
    pointer = store.get_json(store.key("latest.json"))
    return pointer, store.get_json(pointer["manifest"])


def needed_runtimes(conf: dict) -> list[str]:
    """The runtimes a run of `conf` uses on the process launcher: converters on the paths, then servers."""
    from tasks.convert import find_path
    from tasks.core.spec import load_spec
    from tasks.plan.cells import make_plan
    from tasks.plan.config import RunConfig
    from tasks.serve.servers import get_server

    config = RunConfig.from_params(conf)
    names = {hop.runtime for c in make_plan(config).conversions for hop in find_path(load_spec(c["model"]), c["format"])
             if not hop.needs_gpu}
    names |= {get_server(s).runtime for s in config.servers if not get_server(s).skip_reason(config.launcher)}
    return sorted(names)


def prebuild_runtimes(conf: dict) -> None:
    """Build (or find in the cache) every runtime the run needs, and say which it was."""
    from tasks.runtimes.venvs import ensure_runtime

    for name in needed_runtimes(conf):
        env = ensure_runtime(name, log=lambda line: print(f"  {line}"))
        how = f"built in {env.build_s:.0f} s" if env.built_now else "reused from the cache, no reinstall"
        print(f"runtime {name}: {how} ({env.venv_dir})")


def cmd_demo(args: argparse.Namespace) -> int:
    import pandas as pd

    from tasks.serve.images import containers_for
    from tasks.store.embedded_s3 import LOCAL_STATE_DIR, start_embedded_s3
    from tasks.store.s3 import S3Store

    conf = {**DEMO_CONF, **json.loads(args.conf or "{}")}
    conn_id, bucket = "serving_eval_s3", "serving-eval"
    conf.update(aws_conn_id=conn_id, s3_bucket=bucket)
    prebuild_runtimes(conf)
    with containers_for(conf), start_embedded_s3(state_dir=LOCAL_STATE_DIR) as s3:  # docker: an engine, images
        s3.create_bucket(bucket)
        env = airflow_env(s3.airflow_conn_env(conn_id))
        print(f"embedded S3 (moto) at {s3.endpoint_url}; Airflow home {env['AIRFLOW_HOME']}")
        migrate_db(env)
        log_path = Path(env["AIRFLOW_HOME"]) / "demo.log"
        print(f"running `airflow dags test {DAG_ID}` (log: {log_path}) ...")
        started = time.monotonic()
        try:
            with open(log_path, "w") as log:
                returncode = run_child([str(Path(sys.executable).with_name("airflow")), "dags", "test", DAG_ID, "-c",
                                        json.dumps(conf)], env, stdout=log, stderr=subprocess.STDOUT)
        finally:
            from tasks.pipeline import sweep_leftovers

            sweep_leftovers()  # servers of a `dags test` that was stopped halfway
        print(f"DAG run finished in {time.monotonic() - started:.0f} s with exit code {returncode}")
        store = S3Store(bucket, conf.get("s3_prefix", "serving-eval"), s3.connection(conn_id))
        try:
            pointer, manifest = fetch_latest(store)
        except Exception as exc:  # noqa: BLE001 - nothing was published: show the log's end
            print(log_path.read_text()[-4000:])
            print(f"no run was published ({exc})")
            return EXIT_NOT_OK
        out = DEMO_OUT / Path(manifest["prefix"]).name
        out.mkdir(parents=True, exist_ok=True)
        for obj in manifest["objects"]:
            target = out / obj["name"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(store.get(obj["key"]))
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
        frame = pd.read_parquet(io.BytesIO(store.get(f"{manifest['prefix']}/results.parquet")))
    print(f"\nrun {pointer['run_id']}: status {manifest['status']}, {len(manifest['objects'])} objects published to "
          f"s3://{bucket}/{manifest['prefix']}/")
    print_summary(frame)
    print(f"\nresults copied to {out}; the embedded S3 keeps every published run in {LOCAL_STATE_DIR}")
    problems = []
    if manifest["status"] != "complete":
        problems.append(f"run status {manifest['status']} (see the failed cells above)")
    if returncode != 0:
        problems.append(f"the DAG run failed (exit code {returncode}; log: {log_path})")
    for problem in problems:
        print(f"not fully ok: {problem}", file=sys.stderr)
    return EXIT_NOT_OK if problems else EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """The pipeline's steps in order, in this process: what the DAG does, without a scheduler."""
    from tasks.core.results import to_frame
    from tasks.pipeline import RunFailed, check_outcome, run_pipeline, run_problems
    from tasks.plan.config import RunConfig
    from tasks.store.s3 import connection_from_env

    params = json.loads(args.conf or "{}")
    if args.suite:
        params = {"suite": args.suite, **params}
    conn = connection_from_env(RunConfig.from_params(params).aws_conn_id)
    now = datetime.now(UTC)
    logical = parse_logical_date_arg(args.logical_date) if args.logical_date else now
    default_id = f"cli__backfill__{logical.strftime('%Y%m%dT%H%M')}" if args.logical_date else \
        f"cli__{now.strftime('%Y%m%dT%H%M%S')}"
    summary, rows = run_pipeline(params, run_id=args.run_id or default_id, logical_date=logical.isoformat(),
                                 conn=conn)
    print_summary(to_frame(rows))
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
    import re

    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2})?", value):
        raise ConfigError("--logical-date", value, "must be YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)")
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError as exc:
        raise ConfigError("--logical-date", value, f"must be a real date and time ({exc})") from exc


def conf_store(conf: str | None):
    """The result store named by a --conf JSON's s3_bucket, s3_prefix and aws_conn_id (the run's defaults)."""
    from tasks.pipeline import result_store
    from tasks.plan.config import RunConfig
    from tasks.store.s3 import connection_from_env

    config = RunConfig.from_params(json.loads(conf or "{}"))
    return result_store(config, connection_from_env(config.aws_conn_id))


def cmd_exclude(args: argparse.Namespace) -> int:
    from tasks.regress.annotations import add_exclusion

    exclusion = add_exclusion(conf_store(args.conf), args.run, args.cell, args.reason)
    what = f"cells {exclusion['cells']}" if exclusion["cells"] else "the whole run"
    print(f"excluded {what} of run {exclusion['run_id']} from baselines (exclusion {exclusion['id']}): "
          f"{exclusion['reason']}")
    return 0


def cmd_exclusions(args: argparse.Namespace) -> int:
    from tasks.regress.annotations import list_exclusions

    for e in list_exclusions(conf_store(args.conf)):
        print(f"{e['id']}  {e['run_id']}  {','.join(e['cells']) if e['cells'] else '(whole run)'}  "
              f"{e['created_at'][:16]} {e['created_by']}: {e['reason']}")
    return 0


def cmd_include(args: argparse.Namespace) -> int:
    from tasks.regress.annotations import remove_exclusion

    exclusion = remove_exclusion(conf_store(args.conf), args.exclusion_id)
    print(f"removed exclusion {exclusion['id']} of run {exclusion['run_id']}")
    return 0


def cmd_airflow(args: argparse.Namespace) -> int:
    from tasks.store.embedded_s3 import LOCAL_STATE_DIR, start_embedded_s3

    with start_embedded_s3(args.s3_port, state_dir=LOCAL_STATE_DIR) as s3:
        s3.create_bucket("serving-eval")
        env = airflow_env({
            **s3.airflow_conn_env("serving_eval_s3"),
            "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(args.port),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": os.environ.get(
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True"),
        })
        migrate_db(env)
        create_pools(env)
        print(f"embedded S3 at {s3.endpoint_url}; Airflow UI at http://127.0.0.1:{args.port} (Ctrl-C stops both)")
        try:
            run_child([str(Path(sys.executable).with_name("airflow")), "standalone"], env)
        except KeyboardInterrupt:
            pass
    return EXIT_OK


def create_pools(env: dict[str, str]) -> None:
    """One one-slot pool per measuring host (tasks/plan/hosts.py): one server session at a time each."""
    from tasks.plan.hosts import deployed_hosts

    for host in deployed_hosts(env):
        airflow("pools", "set", host.pool, "1", host.pool_description, env=env, capture_output=True, check=True)


def add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bucket", default="serving-eval", help="the result store's bucket (default serving-eval)")
    parser.add_argument("--prefix", default="serving-eval", help="the result store's prefix (default serving-eval)")
    parser.add_argument("--conn-id", default="serving_eval_s3",
                        help="the Airflow AWS connection, read from AIRFLOW_CONN_<ID> (default serving_eval_s3)")


def open_store(args: argparse.Namespace):
    from tasks.store.s3 import S3Store, connection_from_env

    return S3Store(args.bucket, args.prefix, connection_from_env(args.conn_id))


def plan_params(suite: str | None, conf_text: str | None) -> dict:
    """A suite's Params (if named) overridden by `conf_text`; a key that is not a Param is refused."""
    from dataclasses import fields

    from tasks.core.errors import ConfigError
    from tasks.plan.config import RunConfig
    from tasks.plan.suites import load_suite

    try:
        conf = json.loads(conf_text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError("conf", conf_text, f"must be a JSON object of Params: {exc}") from exc
    if not isinstance(conf, dict):
        raise ConfigError("conf", conf_text, "must be a JSON object of Params")
    params = {**(load_suite(suite) if suite else {}), **conf}
    known = {f.name for f in fields(RunConfig)} | {"suite"}
    for key in sorted(params):
        if key not in known:
            raise ConfigError(key, params[key], f"is not a Param; Params are {sorted(known)}")
    return params


def cmd_plan(args: argparse.Namespace) -> int:
    """The cells a run of this suite/conf would measure, checked like a run's start; nothing is run."""
    from tasks.plan.cells import make_plan
    from tasks.plan.config import RunConfig

    params = plan_params(args.suite, args.conf)
    plan = make_plan(RunConfig.from_params(params))
    if args.json:
        print(json.dumps({"suite": params.get("suite"), **plan.to_dict()}, indent=2, sort_keys=True))
        return 0
    print(f"plan of {'suite ' + params['suite'] if params.get('suite') else 'the default Params'}"
          f"{' with overrides' if args.conf else ''}: {len(plan.conversions)} conversions, "
          f"{len(plan.sessions)} server sessions, {len(plan.cells)} cells (nothing run)")
    print("conversions: " + ", ".join(f"{c['model']}/{c['format']}" for c in plan.conversions))
    for session in plan.sessions:
        print(f"session {session['session_id']}")
        for cell in session["cells"]:
            print(f"  {cell['cell_id']:<60} {cell['protocol']}")
    return 0


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


def cmd_runs(args: argparse.Namespace) -> int:
    """The published runs, oldest first: date, run id, status, suite, regression count."""
    from tasks.store.history import run_summaries

    store = open_store(args)
    store.check()
    runs = run_summaries(store, args.limit or None)
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print(f"no published run in {store.describe()}")
        return 0
    print(_table([[r["dt"], r["run_id"], r["status"], r["suite"] or "-",
                   "-" if r["regressions"] is None else str(r["regressions"]), (r["git_sha"] or "-")[:10]]
                  for r in runs], ["dt", "run_id", "status", "suite", "regressions", "git"]))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild a run's report.html from its published files; say whether it equals the published page."""
    from tasks.report.page import rebuild_report
    from tasks.store.history import find_run
    from tasks.store.publish import safe_run_id

    store = open_store(args)
    store.check()
    manifest = find_run(store, args.run)
    page = rebuild_report(store, manifest).encode()
    out = Path(args.out or f"report-{safe_run_id(manifest['run_id'])}.html")
    out.write_bytes(page)
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    same = "report.html" in names and store.get(names["report.html"]) == page
    verdict = "identical to" if same else "differs from" if "report.html" in names else "no"
    print(f"wrote {out} ({len(page):,} bytes) for run {manifest['run_id']}: {verdict} the published report.html")
    return 1 if args.check and not same else 0


def _change_text(entry: dict | None) -> str:
    if not entry or (entry["a"] is None and entry["b"] is None):
        return "-"
    a = "-" if entry["a"] is None else f"{entry['a']:,.2f}"
    b = "-" if entry["b"] is None else f"{entry['b']:,.2f}"
    text = f"{a} -> {b}"
    if entry["change_pct"] is not None:
        text += f" ({entry['change_pct']:+.1f}%)"
    if entry["beyond_noise"]:
        text += " ++" if entry["direction"] == "better" else " --"
    return text


def cmd_compare(args: argparse.Namespace) -> int:
    """Two published runs side by side per cell key; exit 1 when B is worse than A beyond noise somewhere."""
    from tasks.core.metrics import METRICS
    from tasks.core.results import frame_records
    from tasks.regress.compare import compare_rows
    from tasks.report.trend import differences
    from tasks.store.history import find_run, read_results

    store = open_store(args)
    store.check()
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
        print(_table([[r["label"], f"{r['status_a'] or '-'} -> {r['status_b'] or '-'}",
                       *(_change_text(r["metrics"].get(m)) for m in metrics), r["verdict"], "; ".join(r["notes"])]
                      for r in records], header))
        counts = {v: sum(r["verdict"] == v for r in records) for v in ("worse", "better", "same", "new", "gone")}
        print(f"{len(records)} cells: " + ", ".join(f"{n} {v}" for v, n in counts.items())
              + " (++/--: better/worse beyond noise)")
    return 1 if any(r["verdict"] == "worse" for r in records) else 0


def cmd_hosts(args: argparse.Namespace) -> int:
    """How many measuring hosts a nightly matrix needs for a window, from a published run's session timelines."""
    from tasks.plan.capacity import cell_durations, hosts_needed, run_matrix
    from tasks.store.history import find_run

    store = open_store(args)
    store.check()
    manifest = find_run(store, args.run)
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    if "logs/sessions.json" not in names:
        raise ConfigError("run", args.run, "must be a published run with logs/sessions.json")
    durations = cell_durations(json.loads(store.get(names["logs/sessions.json"])))
    plan = json.loads(store.get(names["plan.json"])) if "plan.json" in names else {}
    models, stacks, loads = run_matrix(plan)
    estimate = hosts_needed(durations, args.models or models, args.stacks or stacks, args.loads or loads,
                            args.window_h * 3600)
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
        print(f"window {args.window_h:g} h: no number of hosts fits it: {estimate.note}")
    else:
        print(f"window {args.window_h:g} h: {estimate.hosts_needed} host(s) ({estimate.note})")
    return 0


def add_store_commands(sub) -> None:
    """The subcommands that plan a run or read the store: plan, runs, report, compare."""
    plan = sub.add_parser("plan", help="the cells a run of a suite/conf would measure (nothing is run)")
    plan.add_argument("--suite", help="suites/<name>.yaml: its Params, overridden by --conf")
    plan.add_argument("--conf", help="JSON of Params")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.set_defaults(func=cmd_plan)
    runs = sub.add_parser("runs", help="the published runs with status, suite and regression count")
    runs.add_argument("--limit", type=int, default=0, help="only the newest N")
    runs.add_argument("--json", action="store_true")
    report = sub.add_parser("report", help="rebuild a run's report.html from the store")
    report.add_argument("run", help="run id, `latest`, or the run's folder dt=<date>/run_id=<id>")
    report.add_argument("--out", help="where to write the page (default report-<run id>.html)")
    report.add_argument("--check", action="store_true", help="exit 1 when it differs from the published page")
    compare = sub.add_parser("compare", help="two runs side by side per cell, changes beyond noise marked")
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.add_argument("--json", action="store_true")
    hosts = sub.add_parser("hosts", help="measuring hosts a nightly matrix needs for a window (from a run's timelines)")
    hosts.add_argument("run", help="run id, `latest`, or the run's folder dt=<date>/run_id=<id>")
    hosts.add_argument("--window-h", type=float, default=4.0, help="the nightly window, hours (default 4)")
    hosts.add_argument("--models", type=int, help="M models (default: the run's)")
    hosts.add_argument("--stacks", type=int, help="S stacks, server x format (default: the run's)")
    hosts.add_argument("--loads", type=int, help="L load points per session (default: the run's)")
    hosts.add_argument("--json", action="store_true")
    for parser, func in ((runs, cmd_runs), (report, cmd_report), (compare, cmd_compare), (hosts, cmd_hosts)):
        add_store_options(parser)
        parser.set_defaults(func=func)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the DAG once against an embedded S3 and print a summary")
    demo.add_argument("--conf", help="JSON overriding the demo's Params")
    demo.set_defaults(func=cmd_demo)
    run = sub.add_parser("run", help="run the pipeline steps in this process (no scheduler)")
    run.add_argument("--conf", help="JSON of Params (see the DAG); they override the suite's")
    run.add_argument("--suite", help="suites/<name>.yaml to run (default: none, the built-in defaults)")
    run.add_argument("--run-id")
    run.add_argument("--logical-date", help="YYYY-MM-DD[THH:MM] (UTC), for backfills; default now")
    run.set_defaults(func=cmd_run)
    exclude = sub.add_parser("exclude", help="exclude a published run (or some of its cells) from baselines")
    exclude.add_argument("run", help="the run id")
    exclude.add_argument("--cell", action="append", help="a cell id (tasks.plan.cells.cell_id); repeat; default all")
    exclude.add_argument("--reason", required=True, help="why (shown next to the baselines)")
    exclude.add_argument("--conf", help="JSON with the store Params (s3_bucket, s3_prefix, aws_conn_id)")
    exclude.set_defaults(func=cmd_exclude)
    exclusions = sub.add_parser("exclusions", help="list the exclusions in the store")
    exclusions.add_argument("--conf", help="JSON with the store Params (s3_bucket, s3_prefix, aws_conn_id)")
    exclusions.set_defaults(func=cmd_exclusions)
    include = sub.add_parser("include", help="remove an exclusion (by its id)")
    include.add_argument("exclusion_id")
    include.add_argument("--conf", help="JSON with the store Params (s3_bucket, s3_prefix, aws_conn_id)")
    include.set_defaults(func=cmd_include)
    af = sub.add_parser("airflow", help="start Airflow (standalone) on 127.0.0.1 with an embedded S3")
    af.add_argument("--port", type=int, default=8080)
    af.add_argument("--s3-port", type=int, default=None)
    af.set_defaults(func=cmd_airflow)
    add_store_commands(sub)
    args = parser.parse_args(argv)
    with interrupts.stop_on_signals():  # SIGTERM unwinds like Ctrl-C: clean-ups run
        try:
            return args.func(args)
        except ServingEvalError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        except KeyboardInterrupt:
            print("interrupted: every process this command started was stopped", file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
