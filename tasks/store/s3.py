"""The result store: an S3 bucket and prefix reached through an Airflow AWS connection's fields.

`tasks/` never imports Airflow: the DAG looks the connection up and passes its fields here; the CLI reads
the same connection from its `AIRFLOW_CONN_<ID>` environment variable. A store with `wait_s` (a run's, Param
`store_wait_s`) waits that long for an endpoint that does not answer, each request on its own (tasks/store/wait.py).
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tasks.core.errors import StoreError
from tasks.store.wait import is_away, say, wait_for_store

T = TypeVar("T")

RETRY_MAX_ATTEMPTS = 8  # botocore's standard mode: exponential backoff with jitter
CHECK_MAX_ATTEMPTS = 2
# A waiting store's client retries once itself; its wait (tasks/store/wait.py) backs off for longer, and says so.
WAITING_MAX_ATTEMPTS = 2
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 60


@dataclass(frozen=True)
class ConnectionFields:
    conn_id: str
    login: str | None = None
    password: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def connection_from_env(conn_id: str) -> ConnectionFields:
    """Read an Airflow connection from `AIRFLOW_CONN_<ID>` (JSON or URI form), for runs without Airflow."""
    raw = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}")
    if raw is None:
        return ConnectionFields(conn_id)  # boto3's default credential chain applies
    if raw.lstrip().startswith("{"):
        data = json.loads(raw)
        extra = data.get("extra") or {}
        return ConnectionFields(conn_id, data.get("login"), data.get("password"),
                                json.loads(extra) if isinstance(extra, str) else extra)
    uri = urllib.parse.urlsplit(raw)
    extra = dict(urllib.parse.parse_qsl(uri.query))
    return ConnectionFields(conn_id, urllib.parse.unquote(uri.username or "") or None,
                            urllib.parse.unquote(uri.password or "") or None, extra)


@dataclass
class S3Store:
    bucket: str
    prefix: str
    conn: ConnectionFields
    sse: str = "AES256"
    kms_key_id: str | None = None
    wait_s: float = 0.0  # how long each request waits for an endpoint that does not answer (0: not at all)
    log: Callable[[str], object] = say  # where a waiting request says what failed and how long it has waited
    _client: Any = None

    @property
    def client(self):
        if self._client is None:
            self._client = self.make_client(WAITING_MAX_ATTEMPTS if self.wait_s else RETRY_MAX_ATTEMPTS)
        return self._client

    def request(self, what: str, call: Callable[[], T]) -> T:
        """`call()` (one request, named by `what`), waited on for `wait_s` while the store does not answer."""
        if not self.wait_s:
            return call()
        return wait_for_store(call, where=self.describe(), what=what, wait_s=self.wait_s, log=self.log)

    def make_client(self, max_attempts: int):
        """A boto3 S3 client for this connection; botocore's standard retries (backoff with jitter)."""
        import boto3
        from botocore.config import Config

        extra = self.conn.extra
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=extra.get("region_name", "us-east-1"),
            aws_access_key_id=self.conn.login or extra.get("aws_access_key_id"),
            aws_secret_access_key=self.conn.password or extra.get("aws_secret_access_key"),
            aws_session_token=extra.get("aws_session_token"),
            config=Config(retries={"max_attempts": max_attempts, "mode": "standard"},
                          connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S),
        )

    @property
    def endpoint_url(self) -> str | None:
        """`endpoint_url` of the connection's extra (also under service_config.s3, as Airflow allows)."""
        extra = self.conn.extra
        return extra.get("endpoint_url") or ((extra.get("service_config") or {}).get("s3") or {}).get("endpoint_url")

    def key(self, *parts: str) -> str:
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p)

    def describe(self) -> str:
        endpoint = self.endpoint_url or "AWS"
        return f"s3://{self.bucket}/{self.prefix} via connection {self.conn.conn_id!r} ({endpoint})"

    def check(self) -> None:
        """Fail early, before any load test, when the bucket cannot be written through this connection."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            # Few retries: a typo in the bucket or endpoint should fail the plan step in seconds.
            self.make_client(CHECK_MAX_ATTEMPTS).head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchBucket", "NotFound"):
                rule = "the bucket does not exist"
            elif code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                rule = f"access denied ({code}): check the connection's credentials"
            else:
                rule = f"S3 answered {code}: {exc}"
            raise StoreError(f"result store {self.describe()}: {rule} (Params s3_bucket, aws_conn_id)") from exc
        except BotoCoreError as exc:
            raise StoreError(
                f"result store {self.describe()}: endpoint unreachable: {exc} (Param aws_conn_id)") from exc

    def put(self, key: str, data: bytes, sha256_b64: str, content_type: str) -> None:
        extra: dict[str, Any] = {"ServerSideEncryption": self.sse}
        if self.sse == "aws:kms" and self.kms_key_id:
            extra["SSEKMSKeyId"] = self.kms_key_id
        self.request(f"PUT {key}", lambda: self.client.put_object(
            Bucket=self.bucket, Key=key, Body=data, ContentType=content_type, ChecksumSHA256=sha256_b64, **extra))

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        """Upload with its SHA-256 checksum (S3 verifies it on arrival); return the hex digest."""
        import base64
        import hashlib

        digest = hashlib.sha256(data).digest()
        self.put(key, data, base64.b64encode(digest).decode(), content_type)
        return digest.hex()

    def get(self, key: str) -> bytes:
        return self.request(f"GET {key}", lambda: self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def download(self, key: str, dest: Path) -> None:
        """The object `key` into the file `dest`."""
        self.request(f"GET {key}", lambda: self.client.download_file(self.bucket, key, str(dest)))

    def get_json(self, key: str) -> Any:
        return json.loads(self.get(key))

    def exists(self, key: str) -> bool:
        """Whether S3 answers that `key` is there; a store that did not answer is an error, never "not there"."""
        from botocore.exceptions import ClientError

        def head() -> bool:
            try:
                self.client.head_object(Bucket=self.bucket, Key=key)
                return True
            except ClientError as exc:
                if is_away(exc):
                    raise
                return False  # 404, or a 403 where the key is missing and listing is not allowed

        return self.request(f"HEAD {key}", head)

    def list_keys(self, prefix: str) -> list[str]:
        def listing() -> list[str]:
            keys = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                keys += [obj["Key"] for obj in page.get("Contents", [])]
            return keys

        return self.request(f"LIST {prefix}", listing)

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            objects = {"Objects": [{"Key": k} for k in chunk]}
            if chunk:
                self.request(f"DELETE {len(chunk)} keys from {chunk[0]}",
                             lambda objects=objects: self.client.delete_objects(Bucket=self.bucket, Delete=objects))
