"""The watchdog of missing nights (docs/notifications.md#missing-nights): is `latest.json` older than the schedule
allows? The nightly's own notify step cannot say so: a night that never publishes runs no step after publishing.

    stale = check_latest(store, now, max_age_h=30, period_h=24)   # None: a run published recently enough

A night is due every `period_h` after the newest published run's logical date and may publish up to
`max_age_h - period_h` late; the newest night overdue names the alarm, so each missing night is announced once.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from tasks.core.errors import ConfigError
from tasks.store.history import parse_logical_date
from tasks.store.publish import LATEST
from tasks.store.s3 import S3Store

MAX_WATCH_H = 24 * 14


def check_watch(max_age_h: float, period_h: float) -> None:
    """The watchdog's Params: a period of at most two weeks, an allowed age no shorter than it."""
    if isinstance(period_h, bool) or not (isinstance(period_h, (int, float)) and 0 < period_h <= MAX_WATCH_H):
        raise ConfigError("period_h", period_h, f"must be > 0 and <= {MAX_WATCH_H} h (how often a night is due)")
    if isinstance(max_age_h, bool) or not (isinstance(max_age_h, (int, float))
                                           and period_h <= max_age_h <= MAX_WATCH_H):
        raise ConfigError("max_age_h", max_age_h, f"must be from period_h ({period_h:g}) to {MAX_WATCH_H} h (the "
                                                  "oldest latest.json may be before a missing night is reported)")


def check_latest(store: S3Store, now: datetime, max_age_h: float, period_h: float) -> dict | None:
    """None while latest.json is at most `max_age_h` old; else what is missing: the night due, the age, latest."""
    check_watch(max_age_h, period_h)
    key = store.key(LATEST)
    latest = store.get_json(key) if store.exists(key) else None
    if latest is None:
        return {"night": now.date().isoformat(), "age_h": math.inf, "max_age_h": max_age_h, "latest": None,
                "where": store.describe()}
    logical = parse_logical_date(latest["logical_date"])
    age_h = (now - logical).total_seconds() / 3600
    if age_h <= max_age_h:
        return None
    overdue = math.floor((age_h - (max_age_h - period_h)) / period_h)  # nights due and past their allowance
    night = logical + timedelta(hours=period_h * max(overdue, 1))
    return {"night": night.isoformat(), "age_h": age_h, "max_age_h": max_age_h, "latest": latest,
            "where": store.describe()}
