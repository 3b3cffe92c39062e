"""Command line: run the pipeline without a scheduler, run the demo, start a local Airflow.

    python -m tasks.cli run --conf '{"servers": ["custom"]}'   # the steps in order, no Airflow
    python -m tasks.cli run --logical-date 2026-03-01           # a backfill: judged against earlier nights only
    python -m tasks.cli exclude RUN_ID [--cell CELL_ID ...] --reason TEXT   # keep a run out of baselines
    python -m tasks.cli demo                                    # `airflow dags test` against an embedded S3
    python -m tasks.cli airflow                                 # the Airflow UI on 127.0.0.1:8080
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

from tasks.errors import ConfigError, ServingEvalError
from tasks.runtimes import REPO_ROOT

DAG_ID = "nightly_serving_eval"
# Every stack that runs as a local process here, side by side on the same model and load.
DEMO_CONF = {"servers": ["custom", "triton", "torchserve", "bentoml", "kserve"], "formats": ["onnx", "torchscript"],
             "models": ["mlp"], "concurrencies": [1, 4], "duration_s": 3.0, "warmup_s": 1.0, "window_s": 1.0,
             "fail_on_cell_failure": False}
DEMO_OUT = REPO_ROOT / "demo-results"
SUMMARY_COLUMNS = ("model", "format", "server", "batch_size", "load", "throughput_rps", "latency_ms_p50",
                   "latency_ms_p99", "error_rate", "server_cpu_pct", "startup_s", "stable", "status")


def airflow_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
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
    from tasks.config import RunConfig
    from tasks.convert import find_path
    from tasks.plan import make_plan
    from tasks.serve.servers import get_server
    from tasks.spec import load_spec

    config = RunConfig.from_params(conf)
    names = {hop.runtime for c in make_plan(config).conversions for hop in find_path(load_spec(c["model"]), c["format"])
             if not hop.needs_gpu}
    names |= {get_server(s).runtime for s in config.servers if not get_server(s).skip_reason(config.launcher)}
    return sorted(names)


def prebuild_runtimes(conf: dict) -> None:
    """Build (or find in the cache) every runtime the run needs, and say which it was."""
    from tasks.runtimes import ensure_runtime

    for name in needed_runtimes(conf):
        env = ensure_runtime(name, log=lambda line: print(f"  {line}"))
        how = f"built in {env.build_s:.0f} s" if env.built_now else "reused from the cache, no reinstall"
        print(f"runtime {name}: {how} ({env.venv_dir})")


def cmd_demo(args: argparse.Namespace) -> int:
    import pandas as pd

    from tasks.embedded_s3 import start_embedded_s3
    from tasks.store import S3Store

    conf = {**DEMO_CONF, **json.loads(args.conf or "{}")}
    conn_id, bucket = "serving_eval_s3", "serving-eval"
    conf.update(aws_conn_id=conn_id, s3_bucket=bucket)
    prebuild_runtimes(conf)
    with start_embedded_s3() as s3:
        s3.create_bucket(bucket)
        env = airflow_env(s3.airflow_conn_env(conn_id))
        print(f"embedded S3 (moto) at {s3.endpoint_url}; Airflow home {env['AIRFLOW_HOME']}")
        migrate_db(env)
        log_path = Path(env["AIRFLOW_HOME"]) / "demo.log"
        print(f"running `airflow dags test {DAG_ID}` (log: {log_path}) ...")
        started = time.monotonic()
        with open(log_path, "w") as log:
            proc = airflow("dags", "test", DAG_ID, "-c", json.dumps(conf), env=env, stdout=log,
                           stderr=subprocess.STDOUT)
        print(f"DAG run finished in {time.monotonic() - started:.0f} s with exit code {proc.returncode}")
        store = S3Store(bucket, conf.get("s3_prefix", "serving-eval"), s3.connection(conn_id))
        try:
            pointer, manifest = fetch_latest(store)
        except Exception as exc:  # noqa: BLE001 - nothing was published: show the log's end
            print(log_path.read_text()[-4000:])
            print(f"no run was published ({exc})")
            return 1
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
    print(f"\nresults copied to {out} (the embedded S3 stops with the demo)")
    return 0 if manifest["status"] in ("complete", "partial") else 1


def cmd_run(args: argparse.Namespace) -> int:
    """The pipeline's steps in order, in this process: what the DAG does, without a scheduler."""
    from tasks.config import RunConfig
    from tasks.pipeline import check_outcome, run_pipeline
    from tasks.results import to_frame
    from tasks.store import connection_from_env

    params = json.loads(args.conf or "{}")
    conn = connection_from_env(RunConfig.from_params(params).aws_conn_id)
    now = datetime.now(UTC)
    logical = parse_logical_date_arg(args.logical_date) if args.logical_date else now
    default_id = f"cli__backfill__{logical.strftime('%Y%m%dT%H%M')}" if args.logical_date else \
        f"cli__{now.strftime('%Y%m%dT%H%M%S')}"
    summary, rows = run_pipeline(params, run_id=args.run_id or default_id, logical_date=logical.isoformat(),
                                 conn=conn)
    print_summary(to_frame(rows))
    print(json.dumps(summary, indent=2))
    check_outcome(summary)
    return 0


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
    from tasks.config import RunConfig
    from tasks.pipeline import result_store
    from tasks.store import connection_from_env

    config = RunConfig.from_params(json.loads(conf or "{}"))
    return result_store(config, connection_from_env(config.aws_conn_id))


def cmd_exclude(args: argparse.Namespace) -> int:
    from tasks.annotations import add_exclusion

    exclusion = add_exclusion(conf_store(args.conf), args.run, args.cell, args.reason)
    what = f"cells {exclusion['cells']}" if exclusion["cells"] else "the whole run"
    print(f"excluded {what} of run {exclusion['run_id']} from baselines (exclusion {exclusion['id']}): "
          f"{exclusion['reason']}")
    return 0


def cmd_exclusions(args: argparse.Namespace) -> int:
    from tasks.annotations import list_exclusions

    for e in list_exclusions(conf_store(args.conf)):
        print(f"{e['id']}  {e['run_id']}  {','.join(e['cells']) if e['cells'] else '(whole run)'}  "
              f"{e['created_at'][:16]} {e['created_by']}: {e['reason']}")
    return 0


def cmd_include(args: argparse.Namespace) -> int:
    from tasks.annotations import remove_exclusion

    exclusion = remove_exclusion(conf_store(args.conf), args.exclusion_id)
    print(f"removed exclusion {exclusion['id']} of run {exclusion['run_id']}")
    return 0


def cmd_airflow(args: argparse.Namespace) -> int:
    from tasks.embedded_s3 import start_embedded_s3

    with start_embedded_s3(args.s3_port) as s3:
        s3.create_bucket("serving-eval")
        env = airflow_env({
            **s3.airflow_conn_env("serving_eval_s3"),
            "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(args.port),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": os.environ.get(
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True"),
        })
        migrate_db(env)
        airflow("pools", "set", "serving_eval_host", "1", "one server session at a time on this host",
                env=env, capture_output=True)
        print(f"embedded S3 at {s3.endpoint_url}; Airflow UI at http://127.0.0.1:{args.port} (Ctrl-C stops both)")
        try:
            airflow("standalone", env=env)
        except KeyboardInterrupt:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the DAG once against an embedded S3 and print a summary")
    demo.add_argument("--conf", help="JSON overriding the demo's Params")
    demo.set_defaults(func=cmd_demo)
    run = sub.add_parser("run", help="run the pipeline steps in this process (no scheduler)")
    run.add_argument("--conf", help="JSON of Params (see the DAG)")
    run.add_argument("--run-id")
    run.add_argument("--logical-date", help="YYYY-MM-DD[THH:MM] (UTC), for backfills; default now")
    run.set_defaults(func=cmd_run)
    exclude = sub.add_parser("exclude", help="exclude a published run (or some of its cells) from baselines")
    exclude.add_argument("run", help="the run id")
    exclude.add_argument("--cell", action="append", help="a cell id (tasks.plan.cell_id); repeat; default all")
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
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ServingEvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
