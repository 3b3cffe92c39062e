"""`demo` and `airflow`: the DAG once against an embedded S3 (`airflow dags test`), or the Airflow UI, locally.

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
from pathlib import Path

from tasks.cli.output import EXIT_NOT_OK, EXIT_OK, print_summary
from tasks.cli.prepare import prebuild_runtimes
from tasks.cli.progress_view import following
from tasks.core.errors import ServingEvalError
from tasks.core.paths import REPO_ROOT
from tasks.pipeline import sweep_leftovers
from tasks.plan.deadline_alert import DEADLINE_ENV, DEADLINE_OFF
from tasks.plan.hosts import deployed_hosts
from tasks.report.lead import published_lines
from tasks.runtimes import interrupts
from tasks.runtimes.proctree import create_time_of, terminate_tree
from tasks.serve.images import containers_for
from tasks.store.embedded_s3 import LOCAL_STATE_DIR, start_embedded_s3
from tasks.store.s3 import S3Store

DAG_ID = "nightly_serving_eval"
# Every stack that runs as a local process here, side by side on the same model and load; within a budget, so a
# demo after a change of every stack's runtime (on a machine with earlier demos in its store) sizes what the
# budget's reserve allows and says what it left, instead of running its regression work unbounded.
DEMO_CONF = {"suite": "smoke",
             "servers": ["custom", "triton", "torchserve", "bentoml", "kserve"], "formats": ["onnx", "torchscript"],
             "models": ["mlp"], "concurrencies": [1, 4], "duration_s": 3.0, "warmup_s": 1.0, "window_s": 1.0,
             "fail_on_cell_failure": False, "night_budget_s": 900}
DEMO_OUT = REPO_ROOT / "demo-results"
CHILD_GRACE_S = 15.0  # Airflow's components get this long after SIGTERM before SIGKILL


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


def create_pools(env: dict[str, str]) -> None:
    """One one-slot pool per measuring host (tasks/plan/hosts.py): one server session at a time each."""
    for host in deployed_hosts(env):
        airflow("pools", "set", host.pool, "1", host.pool_description, env=env, capture_output=True, check=True)


def fetch_latest(store: S3Store) -> tuple[dict, dict]:
    pointer = store.get_json(store.key("latest.json"))
    return pointer, store.get_json(pointer["manifest"])


def cmd_demo(args: argparse.Namespace) -> int:
    import pandas as pd  # lazy: pandas (about 0.5 s) only once the demo has results to read

    given = json.loads(args.conf or "{}")
    # another suite runs as it is shipped (`{"suite": "nightly"}` is the schedule's night); the demo's widening of the
    # smoke suite applies to the smoke suite only
    conf = dict(given) if given.get("suite", DEMO_CONF["suite"]) != DEMO_CONF["suite"] else {**DEMO_CONF, **given}
    conn_id, bucket = "serving_eval_s3", "serving-eval"
    conf.update(aws_conn_id=conn_id, s3_bucket=bucket)
    prebuild_runtimes(conf)
    with containers_for(conf), start_embedded_s3(state_dir=LOCAL_STATE_DIR) as s3:  # docker: an engine, images
        s3.create_bucket(bucket)
        env = airflow_env(s3.airflow_conn_env(conn_id))
        print(f"embedded S3 (moto) at {s3.endpoint_url}; Airflow home {env['AIRFLOW_HOME']}")
        migrate_db(env)
        log_path = Path(env["AIRFLOW_HOME"]) / "demo.log"
        print(f"running `airflow dags test {DAG_ID}` (log: {log_path}); its progress lines follow ...")
        started = time.monotonic()
        try:
            with open(log_path, "w") as log, following(log_path):  # its progress lines echoed here
                # `dags test` evaluates no deadline and cannot finish a run of a DAG with one (Airflow 3.3.2)
                returncode = run_child([str(Path(sys.executable).with_name("airflow")), "dags", "test", DAG_ID, "-c",
                                        json.dumps(conf)], {**env, DEADLINE_ENV: DEADLINE_OFF}, stdout=log,
                                       stderr=subprocess.STDOUT)
        finally:
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
        lead = published_lines(store, manifest)
    print(f"\nrun {pointer['run_id']}: status {manifest['status']}, {len(manifest['objects'])} objects published to "
          f"s3://{bucket}/{manifest['prefix']}/")
    print("\n".join(lead))
    print_summary(frame)
    print(f"\nresults copied to {out}; the embedded S3 keeps every published run in {LOCAL_STATE_DIR}")
    problems = []
    if manifest["status"] != "complete":
        problems.append(f"run status {manifest['status']} (see the failed or contended cells above)")
    if returncode != 0:
        problems.append(f"the DAG run failed (exit code {returncode}; log: {log_path})")
    for problem in problems:
        print(f"not fully ok: {problem}", file=sys.stderr)
    return EXIT_NOT_OK if problems else EXIT_OK


def cmd_airflow(args: argparse.Namespace) -> int:
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


def add_commands(sub) -> None:
    demo = sub.add_parser("demo", help="run the DAG once against an embedded S3 and print a summary")
    demo.add_argument("--conf", help="JSON overriding the demo's Params")
    demo.set_defaults(func=cmd_demo)
    af = sub.add_parser("airflow", help="start Airflow (standalone) on 127.0.0.1 with an embedded S3")
    af.add_argument("--port", type=int, default=8080)
    af.add_argument("--s3-port", type=int, default=None)
    af.set_defaults(func=cmd_airflow)
