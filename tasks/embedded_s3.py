"""An embedded S3 endpoint (moto's server) on a free loopback port, for the demo and the tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tasks.serve.session import free_port
from tasks.store import ConnectionFields

ACCESS_KEY = "testing"  # moto accepts any key; these are not secrets
SECRET_KEY = "testing"
REGION = "us-east-1"
START_TIMEOUT_S = 30


@dataclass
class EmbeddedS3:
    port: int
    process: subprocess.Popen

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
        from tasks.store import S3Store

        S3Store(bucket, "", self.connection("embedded")).client.create_bucket(Bucket=bucket)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> EmbeddedS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_embedded_s3(port: int | None = None) -> EmbeddedS3:
    port = port or free_port()
    moto = Path(sys.executable).with_name("moto_server")
    argv = [str(moto)] if moto.exists() else [sys.executable, "-m", "moto.server"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    proc = subprocess.Popen([*argv, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited with code {proc.returncode} on port {port}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return EmbeddedS3(port, proc)
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"moto server did not answer on 127.0.0.1:{port} within {START_TIMEOUT_S} s")
