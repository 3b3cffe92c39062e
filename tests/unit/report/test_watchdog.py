"""The watchdog (tasks/report/watchdog.py): latest.json older than the schedule allows names the night that is
missing, the newest overdue one; its Params are checked naming them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks.core.errors import ConfigError
from tasks.report.watchdog import check_latest


class PointerStore:
    """Just latest.json, in process: the three calls the check makes of a store."""

    def __init__(self, latest: dict | None) -> None:
        self.latest = latest

    def key(self, *parts: str) -> str:
        return "/".join(("eval", *parts))

    def exists(self, key: str) -> bool:
        return self.latest is not None

    def get_json(self, key: str) -> dict:
        return self.latest

    def describe(self) -> str:
        return "s3://b/eval"


LATEST = {"run_id": "night1", "logical_date": "2026-02-01T02:00:00+00:00"}


def test_a_recent_latest_is_quiet_an_old_one_names_the_newest_missing_night():
    assert check_latest(PointerStore(LATEST), datetime(2026, 2, 2, 7, 0, tzinfo=UTC), 30, 24) is None
    stale = check_latest(PointerStore(LATEST), datetime(2026, 2, 2, 9, 0, tzinfo=UTC), 30, 24)
    assert stale["night"].startswith("2026-02-02T02:00") and stale["age_h"] == 31.0
    later = check_latest(PointerStore(LATEST), datetime(2026, 2, 4, 9, 0, tzinfo=UTC), 30, 24)
    assert later["night"].startswith("2026-02-04T02:00")  # three nights missed: the alarm names the newest
    never = check_latest(PointerStore(None), datetime(2026, 2, 4, 9, 0, tzinfo=UTC), 30, 24)
    assert never["latest"] is None and never["night"] == "2026-02-04"


def test_the_watchdogs_params_are_checked_naming_them():
    with pytest.raises(ConfigError, match="max_age_h"):
        check_latest(PointerStore(LATEST), datetime(2026, 2, 2, tzinfo=UTC), 12, 24)
    with pytest.raises(ConfigError, match="period_h"):
        check_latest(PointerStore(LATEST), datetime(2026, 2, 2, tzinfo=UTC), 30, 0)
