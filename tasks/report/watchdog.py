"""The watchdog of missing nights (docs/notifications.md#missing-nights): is `latest.json` older than the schedule
allows? The nightly's own notify step cannot say so: a night that never publishes runs no step after publishing.

    stale = check_latest(store, now, max_age_h=30, period_h=24)   # None: a run published recently enough

A night is due every `period_h` after the newest published run's logical date and may publish up to
`max_age_h - period_h` late; the newest night overdue names the alarm, so each missing night is announced once.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from tasks.core.errors import ConfigError
from tasks.report.message import watchdog_message
from tasks.report.notify import deliver, write_notifications
from tasks.store.history import parse_logical_date
from tasks.store.layout import watchdog_key
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


def watch_latest(store: S3Store, senders: list, watch: dict, now: datetime | None = None, log=print) -> dict:
    """The watchdog: when latest.json is older than `watch["max_age_h"]` (a night due every `watch["period_h"]`), the
    missing night's message to every notifier, once per missing night (notifications/watchdog/dt=<night>/)."""
    stale = check_latest(store, now or datetime.now(UTC), watch["max_age_h"], watch["period_h"])
    if stale is None:
        log(f"watchdog: latest.json of {store.describe()} is recent enough")
        return {"stale": False}
    key = watchdog_key(store, stale["night"])
    if store.exists(key) and store.get_json(key).get("delivered"):
        log(f"watchdog: the night due {stale['night']} is missing, already announced")
        return {"stale": True, "night": stale["night"], "decision": "already announced"}
    ui = watch.get("ui_base_url")
    message = watchdog_message({**stale, "link": f"{ui.rstrip('/')}/serving-eval/" if ui else None})
    log(f"watchdog: {message.subject}")
    deliveries = deliver(message, senders, log)
    record = {"schema_version": "1", "kind": "watchdog", "night": stale["night"], "age_h": stale["age_h"],
              "max_age_h": stale["max_age_h"], "latest": stale["latest"], "subject": message.subject,
              "text": message.text, "deliveries": deliveries, "delivered": any(d["delivered"] for d in deliveries),
              "decision": "sent" if senders else "not sent: Param notify names no notifier"}
    write_notifications(store, key, record)
    return {"stale": True, "night": stale["night"], "decision": record["decision"], "deliveries": deliveries}
