"""The S3 store (tasks/store/s3.py) without a server: an unreachable endpoint is one clear error."""

from __future__ import annotations

import time

import pytest

from tasks.core.errors import StoreError
from tasks.runtimes.ports import free_port
from tasks.store.s3 import ConnectionFields, S3Store


def test_unreachable_endpoint_is_one_clear_error():
    conn = ConnectionFields("serving_eval_s3", "k", "s", {"endpoint_url": f"http://127.0.0.1:{free_port()}"})
    started = time.monotonic()
    with pytest.raises(StoreError, match="serving_eval_s3.*unreachable"):
        S3Store("results", "eval", conn).check()
    assert time.monotonic() - started < 30
