"""An embedded S3 endpoint (moto's server) on a free loopback port, for `make airflow`, the demo and the tests.

With a state folder (`make airflow` and `make demo` use `LOCAL_STATE_DIR`, `.serving-eval/s3/` in the checkout)
its buckets and objects survive a restart and a crash (see `tasks/store/embedded_s3_server.py`); without one it
forgets everything when it stops, as the tests want.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tasks.core.paths import REPO_ROOT
from tasks.runtimes.ports import free_port
from tasks.store.s3 import ConnectionFields, S3Store

ACCESS_KEY = "testing"  # moto accepts any key; these are not secrets
SECRET_KEY = "testing"
REGION = "us-east-1"
START_TIMEOUT_S = 120  # a state folder is read back before the port opens
LOCAL_STATE_DIR = REPO_ROOT / ".serving-eval" / "s3"  # the store of `make airflow` / `make demo` (git-ignored)
LOG_TAIL_BYTES = 3000


@dataclass
class EmbeddedS3:
    port: int
    process: subprocess.Popen
    state_dir: Path | None = None
    log_path: Path | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connection(self, conn_id: str) -> ConnectionFields:
        extra = {"endpoint_url": self.endpoint_url, "region_name": REGION}
        return ConnectionFields(conn_id, ACCESS_KEY, SECRET_KEY, extra)

    def airflow_conn_env(self, conn_id: str) -> dict[str, str]:
        """`AIRFLOW_CONN_<ID>` pointing an Airflow AWS connection at this endpoint."""
        value = json.dumps({"conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY,
                            "extra": {"endpoint_url": self.endpoint_url, "region_name": REGION}})
        return {f"AIRFLOW_CONN_{conn_id.upper()}": value}

    def create_bucket(self, bucket: str) -> None:
        """Create the bucket; one that this store already holds (kept in its state folder) is fine."""
        from botocore.exceptions import ClientError  # lazy: botocore only when a bucket is made

        try:
            S3Store(bucket, "", self.connection("embedded")).client.create_bucket(Bucket=bucket)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.log_path is not None and self.state_dir is None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> EmbeddedS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_embedded_s3(port: int | None = None, state_dir: Path | None = None) -> EmbeddedS3:
    """Start the server (`python -m tasks.store.embedded_s3_server`) and wait until it answers.

    With `state_dir` it first reads back what an earlier run kept there and logs to `<state_dir>/server.log`.
    """
    port = port or free_port()
    if state_dir is not None:
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        log_path = state_dir / "server.log"
    else:
        # "-test-" in the name: the tests' leftover checks look for server session folders "serving-eval-*"
        fd, name = tempfile.mkstemp(prefix="serving-eval-test-s3-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    argv = [sys.executable, "-m", "tasks.store.embedded_s3_server", "--host", "127.0.0.1", "--port", str(port)]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    s3 = EmbeddedS3(port, proc, state_dir, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace")
            s3.stop()
            raise RuntimeError(f"embedded S3 (moto) exited with code {proc.returncode} on port {port}:\n{tail}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return s3
        except OSError:
            time.sleep(0.1)
    s3.stop()
    raise RuntimeError(f"embedded S3 (moto) did not answer on 127.0.0.1:{port} within {START_TIMEOUT_S} s "
                       f"(log: {log_path})")
