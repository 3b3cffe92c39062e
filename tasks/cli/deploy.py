"""One-shot set-up steps of a deployment (docker/compose.yaml runs them as its `airflow-init` and `store-init`):

    python -m tasks.cli deploy init                    # airflow db migrate; one one-slot pool per measuring host
    python -m tasks.cli deploy bucket --bucket NAME    # the results bucket, through the store's Airflow connection

Both are idempotent: a second run changes nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tasks.cli.local import create_pools
from tasks.core.errors import StoreError
from tasks.store.s3 import S3Store, connection_from_env

BUCKET_WAIT_S = 60.0


def init() -> None:
    """Migrate the metadata database, then create the pools of the deployment's hosts (tasks/plan/hosts.py)."""
    env = dict(os.environ)
    subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], env=env, check=True)
    create_pools(env)


def ensure_bucket(bucket: str, conn_id: str = "serving_eval_s3", wait_s: float = BUCKET_WAIT_S) -> bool:
    """Create `bucket` in the store of the Airflow connection `conn_id` (AIRFLOW_CONN_<ID>) unless it exists; True
    when it was created. Waits up to `wait_s` for the store to answer."""
    client = S3Store(bucket, "", connection_from_env(conn_id)).client
    deadline = time.monotonic() + wait_s
    while True:
        try:
            existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
            break
        except Exception as exc:  # noqa: BLE001 - the store is still starting
            if time.monotonic() > deadline:
                raise StoreError(f"the store of connection {conn_id} did not answer within {wait_s:.0f} s: "
                                 f"{exc}") from exc
            time.sleep(1)
    if bucket in existing:
        return False
    client.create_bucket(Bucket=bucket)
    return True


def cmd_init(args: argparse.Namespace) -> int:
    init()
    print("database migrated; pools created")
    return 0


def cmd_bucket(args: argparse.Namespace) -> int:
    created = ensure_bucket(args.bucket, args.conn_id)
    print(f"bucket {args.bucket}: {'created' if created else 'exists'}")
    return 0


def add_commands(sub) -> None:
    deploy = sub.add_parser("deploy", help="a deployment's one-shot set-up steps (docker/compose.yaml runs them)")
    inner = deploy.add_subparsers(dest="deploy_command", required=True)
    inner.add_parser("init", help="migrate the metadata database and create the measuring hosts' pools"
                     ).set_defaults(func=cmd_init)
    bucket = inner.add_parser("bucket", help="create the results bucket unless it exists")
    bucket.add_argument("--bucket", default="serving-eval")
    bucket.add_argument("--conn-id", default="serving_eval_s3")
    bucket.set_defaults(func=cmd_bucket)
