"""Where a run's folder is in the store, and reading a folder's name back: the one spelling of the layout.

    runs/dt=<YYYY-MM-DD>/run=<safe id>/         schema 1.4 on: `run` is no column (`run_id` holds the real id)
    runs/dt=<YYYY-MM-DD>/run_id=<safe id>/      before 1.4: its key repeated the `run_id` column, so hive-partitioned
                                                readers replaced the real id with the folder's (DuckDB) or refused it

Readers of the project read both layouts through the 1.x contract (the 2.0 contract drops the old one); publishing moves
runs of the old layout to the new one (tasks/store/migrate.py), so readers of the files see one layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tasks.core.names import safe_component
from tasks.core.results import OLD_RUN_KEY, PARTITIONS
from tasks.store.s3 import S3Store

DATE_KEY, RUN_KEY = PARTITIONS  # "dt", "run"
RUNS = "runs"
# Beside the runs, never in a run's folder (its manifest is the last object written there and is not rewritten):
# each run's notifications.json, and the watchdog's per missing night (docs/notifications.md#where-it-is-recorded).
NOTIFICATIONS = "notifications"
NOTIFICATIONS_FILE = "notifications.json"
WATCHDOG = "watchdog"
# dt=<date>/run=<id> or dt=<date>/run_id=<id> (the old form), alone or at the end of a key prefix
FOLDER = re.compile(rf"(?:^|/){DATE_KEY}=(\d{{4}}-\d{{2}}-\d{{2}})/({RUN_KEY}|{OLD_RUN_KEY})=([A-Za-z0-9._-]+)/?$")


def safe_run_id(run_id: str) -> str:
    """The run id as a folder name and key part (see `tasks.core.names.safe_component`)."""
    return safe_component(run_id)


def run_folder(logical_date: str, run_id: str, key: str = RUN_KEY) -> str:
    """`dt=<date>/run=<safe id>` (with `key=OLD_RUN_KEY`, the folder the old layout used)."""
    return f"{DATE_KEY}={logical_date[:10]}/{key}={safe_run_id(run_id)}"


def run_prefix(store: S3Store, logical_date: str, run_id: str, key: str = RUN_KEY) -> str:
    """The key prefix of a run's folder in `store`, new layout unless `key=OLD_RUN_KEY`."""
    return store.key(RUNS, run_folder(logical_date, run_id, key))


def notifications_key(store: S3Store, logical_date: str, run_id: str) -> str:
    """`notifications/dt=<date>/run=<safe id>/notifications.json`: what the run's notify step decided and sent."""
    return store.key(NOTIFICATIONS, run_folder(logical_date, run_id), NOTIFICATIONS_FILE)


def watchdog_key(store: S3Store, night: str) -> str:
    """`notifications/watchdog/dt=<date>/notifications.json`: the watchdog's alarm for the night due then."""
    return store.key(NOTIFICATIONS, WATCHDOG, f"{DATE_KEY}={night[:10]}", NOTIFICATIONS_FILE)


@dataclass(frozen=True)
class Folder:
    """A run folder's name read back: its date, its key (`run`, or `run_id` in the old layout) and safe id."""

    dt: str
    key: str
    safe_id: str

    @property
    def old_layout(self) -> bool:
        return self.key == OLD_RUN_KEY

    def name(self, key: str | None = None) -> str:
        """`dt=.../run=...` as it is, or under another key (the same run in the other layout)."""
        return f"{DATE_KEY}={self.dt}/{key or self.key}={self.safe_id}"


def parse_folder(text: str) -> Folder | None:
    """The run folder `text` names (`dt=<date>/run=<id>`, `dt=<date>/run_id=<id>`, or a key prefix ending in one),
    or None when it names none."""
    found = FOLDER.search(text.strip())
    return Folder(found.group(1), found.group(2), found.group(3)) if found else None
