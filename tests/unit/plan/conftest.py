"""The plan's estimates read the host's artifact and runtime cache (a cached conversion costs 2 s, a built runtime
none). A fit judged against this machine's warm cache would differ from the same fit on a fresh CI machine, so every
plan test sees an empty cache of its own: the first night's costs, the same everywhere."""

from __future__ import annotations

import pytest

from tasks.core.paths import CACHE_ENV


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
