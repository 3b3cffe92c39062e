"""The progress lines of a run whose output goes to a log file (`make demo`: `airflow dags test` writes its log),
echoed to the terminal as they come: plain lines, and where a terminal is attached a bar of the plan's server
sessions under them (tasks/core/progress.py writes the lines).

    with following(log_path):
        run_child([... "airflow", "dags", "test", ...], env, stdout=log)
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from tasks.core.progress import KINDS, PREFIX

LINE = re.compile(rf"({PREFIX} (?:{'|'.join(KINDS)}): .*)$")
SESSION_PLACE = re.compile(r"session \d+ of (\d+) in the plan")
POLL_S = 0.5
BAR_WIDTH = 30


class Follower:
    """Reads a growing log file from its start; `echo` writes each progress line in it to `out`."""

    def __init__(self, path: Path, out: TextIO, bar: bool) -> None:
        self.path, self.out, self.bar = path, out, bar
        self.sessions_done, self.sessions = 0, None
        self.stop = threading.Event()

    def echo(self, text: str) -> None:
        match = LINE.search(text.rstrip("\n"))
        if not match:
            return
        line = match.group(1)
        if line.startswith(f"{PREFIX} session: "):
            self.sessions_done += 1
            place = SESSION_PLACE.search(line)
            self.sessions = int(place.group(1)) if place else self.sessions
        if self.bar:
            self.out.write("\r\033[K")  # the bar's line, cleared
        self.out.write(line + "\n")
        if self.bar and self.sessions:
            done = min(self.sessions_done, self.sessions)
            filled = BAR_WIDTH * done // self.sessions
            self.out.write(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done} of {self.sessions} sessions")
        self.out.flush()

    def follow(self) -> None:
        while not self.path.exists() and not self.stop.wait(POLL_S):
            pass
        if not self.path.exists():
            return
        with self.path.open(errors="replace") as log:
            pending = ""
            while True:
                chunk = log.readline()
                if chunk:
                    pending += chunk
                    if pending.endswith("\n"):
                        self.echo(pending)
                        pending = ""
                    continue
                if self.stop.is_set():
                    break
                self.stop.wait(POLL_S)
            if pending:
                self.echo(pending)
        if self.bar and self.sessions:
            self.out.write("\n")
            self.out.flush()


@contextmanager
def following(path: Path, out: TextIO | None = None) -> Iterator[Follower]:
    """Echo the progress lines written to `path` while the block runs (all of them, up to its end, after)."""
    out = out or sys.stdout
    follower = Follower(path, out, bar=out.isatty())
    thread = threading.Thread(target=follower.follow, name="progress-follower", daemon=True)
    thread.start()
    try:
        yield follower
    finally:
        follower.stop.set()
        thread.join(timeout=10)
