"""A team's access log made a trace: each kept line's timestamp, as seconds from the first (docs/measuring.md#traces).

Formats of the timestamp, one per log:

    clf     the common and combined log formats of nginx and Apache: `[10/Oct/2026:13:55:36 +0000]`; whole
            seconds, so the n requests of one second are spread evenly over it (i/n s after it), and the trace's
            bursts shorter than a second are the spread's, not the log's
    iso     the first ISO 8601 time in the line (JSON logs: `"time": "2026-12-07T13:55:36.123Z"`), to its fraction
    epoch   the first number of seconds since 1970 in the line (10 digits, its fraction kept): `1796651736.123`

`match`, a regular expression, keeps only the lines it finds (the inference requests: `POST /v2/models/.+/infer`);
lines without a timestamp are counted and left out. Out-of-order lines (a log written by several workers) are
sorted. Nothing is sent anywhere: the log stays on the machine that reads it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from tasks.core.errors import ConfigError
from tasks.loadgen.trace import NS, Trace

CLF_TIME = re.compile(r"\[(\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\]")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
EPOCH_TIME = re.compile(r"(?<![\d.])\d{10}(?:\.\d+)?(?![\d])")
FORMATS = ("clf", "iso", "epoch")


@dataclass(frozen=True)
class LogTrace:
    """The trace and what reading the log left out."""

    trace: Trace
    lines: int
    kept: int
    unmatched: int  # lines `match` did not find
    untimed: int  # matched lines without a timestamp of the format
    reordered: bool  # some line's time was before the line above it


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ns(line: str, fmt: str) -> int | None:
    """The line's time in integer ns since 1970 (a float of seconds would lose the sub-microsecond digits)."""
    if fmt == "clf":
        found = CLF_TIME.search(line)
        return _since_epoch_ns(datetime.strptime(found.group(1), "%d/%b/%Y:%H:%M:%S %z")) if found else None
    if fmt == "iso":
        found = ISO_TIME.search(line)
        if not found:
            return None
        moment = datetime.fromisoformat(found.group(0).replace(" ", "T", 1).replace("Z", "+00:00"))
        return _since_epoch_ns(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    found = EPOCH_TIME.search(line)
    if not found:
        return None
    whole, _, fraction = found.group(0).partition(".")
    return int(whole) * NS + int((fraction + "0" * 9)[:9])


def _since_epoch_ns(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000


def spread_within_seconds(times_ns: np.ndarray) -> np.ndarray:
    """Whole-second times (sorted) with the n requests of each second placed i/n s after it."""
    counts = Counter(times_ns.tolist())
    index = np.concatenate([np.arange(counts[t]) * NS // counts[t] for t in sorted(counts)])
    return times_ns + index


def trace_from_log(path: Path, fmt: str, match: str | None = None, name: str | None = None) -> LogTrace:
    """The trace of `path`'s kept lines (module docstring); refused when no line is kept."""
    if fmt not in FORMATS:
        raise ConfigError("log format", fmt, f"must be one of {list(FORMATS)}")
    try:
        pattern = re.compile(match) if match else None
    except re.error as exc:
        raise ConfigError("match", match, f"must be a regular expression ({exc})") from exc
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise ConfigError("log", str(path), f"must be a readable file ({exc.strerror})") from exc
    times, unmatched, untimed = [], 0, 0
    for line in lines:
        if pattern is not None and not pattern.search(line):
            unmatched += 1
            continue
        ns = _ns(line, fmt)
        if ns is None:
            untimed += 1
        else:
            times.append(ns)
    if not times:
        raise ConfigError("log", str(path), f"has no line with a {fmt} timestamp"
                          + (f" that {match!r} finds" if match else "") + f" ({len(lines)} lines read)")
    raw = np.asarray(times, dtype=np.int64)
    reordered = bool(np.any(np.diff(raw) < 0))
    ordered = np.sort(raw)
    if fmt == "clf":
        ordered = spread_within_seconds(ordered)
    offsets = ordered - ordered[0]
    shape = {"kind": "access-log", "format": fmt, "match": match}
    return LogTrace(Trace(name or path.stem, offsets, source=str(path), shape=shape), len(lines), len(times),
                    unmatched, untimed, reordered)
