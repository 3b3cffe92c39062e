"""A trace: the arrival times of a recorded or generated stream of requests, and the schedule it replays as.

The file format (docs/measuring.md#traces), one arrival per line, in seconds from the trace's start:

    # serving-eval trace 1
    # made by: python -m tasks.cli trace shape day --mean-rps 4 --peak-ratio 1.8 --length-s 60 --seed 1
    # shape: {"kind": "day", ...}
    offset_s
    0.000000
    0.250113
    ...

Lines starting with `#` are comments: the first names the format and its version, the others say where the trace
came from (kept with it, never read as data, except `# shape:` whose JSON records a generated trace's parameters).
`offset_s` is the only column: arrivals only, no sessions and no per-request input (a request mix's size class is
the traffic issue's next column). Offsets are >= 0 and non-decreasing; two equal offsets are two requests due at
once. A trace's identity is its name and the SHA-256 of its offsets as nanoseconds (`digest`), so a file reworded
in its comments is the same trace, and one offset moved is another.

Replay is open loop at the recorded times, or `speed` times faster (`Trace.schedule_ns`): latency is from each
request's scheduled send, as for every open-loop point, so a stack that falls behind the trace cannot hide it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from tasks.core.errors import ConfigError
from tasks.core.workloads import trace_label_parts
from tasks.loadgen.settings import MAX_DURATION_S, LoadSettings

FORMAT_LINE = "# serving-eval trace 1"
COLUMN = "offset_s"
SHAPE_PREFIX = "# shape: "
NS = 1_000_000_000
MAX_ARRIVALS = 2_000_000  # a trace longer than this is a night's traffic for a fleet, not one load point
MIN_SPEED, MAX_SPEED = 0.01, 1000.0
DIGEST_CHARS = 12
LAST_ARRIVAL_S = 0.001
TRACES_DIR = Path(__file__).resolve().parents[2] / "workloads" / "traces"
TRACES_ENV = "SERVING_EVAL_TRACES"  # more folders of traces (os.pathsep-separated), as $SERVING_EVAL_MODELS for specs


@dataclass(frozen=True, eq=False)
class Trace:
    """Arrival offsets (ns from the trace's start, sorted), the trace's name and where it came from."""

    name: str
    offsets_ns: np.ndarray
    source: str = ""  # the file it was read from, or the command that made it
    shape: dict = field(default_factory=dict)  # a generated trace's parameters (tasks/loadgen/load_shapes.py)

    def __post_init__(self) -> None:
        offsets = np.asarray(self.offsets_ns, dtype=np.int64)
        if offsets.size == 0:
            raise ConfigError("trace", self.name, "must hold at least one arrival")
        if offsets.size > MAX_ARRIVALS:
            raise ConfigError("trace", self.name, f"holds {offsets.size:,} arrivals: at most {MAX_ARRIVALS:,}")
        if offsets[0] < 0 or np.any(np.diff(offsets) < 0):
            raise ConfigError("trace", self.name, f"{COLUMN} must be >= 0 and non-decreasing")
        object.__setattr__(self, "offsets_ns", offsets)

    @property
    def arrivals(self) -> int:
        return int(self.offsets_ns.size)

    @property
    def length_s(self) -> float:
        """From the trace's start to its last arrival."""
        return float(self.offsets_ns[-1]) / NS

    @property
    def digest(self) -> str:
        """The first DIGEST_CHARS hex digits of the SHA-256 of the offsets (int64, little-endian)."""
        return hashlib.sha256(self.offsets_ns.astype("<i8").tobytes()).hexdigest()[:DIGEST_CHARS]

    @property
    def label(self) -> str:
        """The trace as a workload names it: `trace:<name>@<digest>`."""
        return f"trace:{self.name}@{self.digest}"

    def peak_rps(self, window_s: float = 1.0) -> float:
        """The most arrivals in one `window_s` of the trace (windows from its start), per second."""
        counts = np.bincount((self.offsets_ns // int(window_s * NS)).astype(np.int64))
        return float(counts.max()) / window_s

    def schedule_ns(self, speed: float = 1.0, stride: int = 1, offset: int = 0) -> np.ndarray:
        """Send times (ns from the replay's start) at `speed` times the recorded pace; worker `offset` of `stride`
        takes every stride-th arrival, so the workers together send exactly the one trace."""
        check_speed(speed)
        times = self.offsets_ns if speed == 1.0 else np.round(self.offsets_ns / speed).astype(np.int64)
        return times[offset::stride]

    def replay_s(self, speed: float = 1.0) -> float:
        return self.length_s / speed


@dataclass(frozen=True, eq=False)
class TraceReplay:
    """A trace replayed at `speed` times its recorded pace: the `Schedule` of one open-loop point."""

    trace: Trace
    speed: float = 1.0

    def __post_init__(self) -> None:
        check_speed(self.speed)

    def schedule_ns(self, stride: int = 1, offset: int = 0) -> np.ndarray:
        return self.trace.schedule_ns(self.speed, stride, offset)

    @property
    def length_s(self) -> float:
        return self.trace.replay_s(self.speed)

    def settings(self, base: LoadSettings) -> LoadSettings:
        """`base` made this replay's: open loop at the trace's mean rate (the row's `load`), the trace's first
        `base.warmup_s` its warm-up (at most half of it), the rest up to its last arrival the measured time, in
        windows of at most `base.window_s`; no early stop (the trace is the point)."""
        if self.length_s > MAX_DURATION_S:
            raise ConfigError("trace", self.trace.name, f"replays in {self.length_s:.0f} s at speed {self.speed:g}: "
                                                        f"at most {MAX_DURATION_S:.0f} s (raise the speed or cut it)")
        total_s = self.length_s + LAST_ARRIVAL_S  # the last arrival is due inside the measured time, not at its end
        warmup_s = min(base.warmup_s, total_s / 2)
        duration_s = total_s - warmup_s
        return replace(base, mode="rate", load=self.trace.arrivals / max(self.length_s, LAST_ARRIVAL_S),
                       warmup_s=warmup_s, duration_s=duration_s, window_s=min(base.window_s, duration_s),
                       stop_when_stable=False)


def check_speed(speed: float) -> None:
    if not (MIN_SPEED <= speed <= MAX_SPEED and math.isfinite(speed)):
        raise ConfigError("trace speed", speed, f"must be from {MIN_SPEED:g} to {MAX_SPEED:g} (1: as recorded)")


def read_trace(path: Path, name: str | None = None) -> Trace:
    """The trace in `path` (the format above); its name defaults to the file's stem. Errors name the line."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError("trace", str(path), f"must be a readable file ({exc.strerror})") from exc
    if not lines or lines[0].strip() != FORMAT_LINE:
        raise ConfigError("trace", str(path), f"must start with the line {FORMAT_LINE!r}")
    shape, header_seen, values = {}, False, []
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(SHAPE_PREFIX.strip()):
            shape = _shape_json(path, number, line)
            continue
        if line.startswith("#"):
            continue
        if not header_seen:
            if line != COLUMN:
                raise ConfigError(f"trace {path.name} line {number}", line,
                                  f"must be the header {COLUMN!r} (the only column: arrivals in seconds)")
            header_seen = True
            continue
        values.append(_offset(path, number, line, values[-1] if values else 0))
    if not values:
        raise ConfigError("trace", str(path), f"must hold at least one {COLUMN} line after its header")
    return Trace(name or path.stem, np.asarray(values, dtype=np.int64), source=str(path), shape=shape)


def _shape_json(path: Path, number: int, line: str) -> dict:
    try:
        shape = json.loads(line[len(SHAPE_PREFIX):])
    except json.JSONDecodeError as exc:
        raise ConfigError(f"trace {path.name} line {number}", line, f"must hold the shape as JSON ({exc.msg})") from exc
    if not isinstance(shape, dict):
        raise ConfigError(f"trace {path.name} line {number}", line, "must hold the shape as a JSON object")
    return shape


def _offset(path: Path, number: int, text: str, previous_ns: int) -> int:
    """One line's offset in integer ns, read exactly (a float of seconds would round a long trace's offsets)."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0:
        raise ConfigError(f"trace {path.name} line {number}", text, f"{COLUMN} must be a number of seconds >= 0")
    ns = int((value * NS).to_integral_value())
    if ns < previous_ns:
        raise ConfigError(f"trace {path.name} line {number}", text,
                          f"{COLUMN} must not decrease (the line before says {previous_ns / NS:g})")
    return ns


def write_trace(path: Path, trace: Trace, made_by: str = "") -> Path:
    """Write `trace` in the format above: offsets to the nanosecond, the command and shape in comments."""
    head = [FORMAT_LINE]
    if made_by:
        head.append(f"# made by: {made_by}")
    if trace.shape:
        head.append(SHAPE_PREFIX + json.dumps(trace.shape, sort_keys=True))
    head.append(f"# {trace.arrivals} arrivals over {trace.length_s:.3f} s, digest {trace.digest}")
    body = "\n".join(f"{ns // NS}.{ns % NS:09d}" for ns in trace.offsets_ns.tolist())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*head, COLUMN, body]) + "\n")
    return path


def trace_catalogue() -> dict[str, Path]:
    """Trace name -> file, for every `*.csv` in `workloads/traces/` and in the folders of `$SERVING_EVAL_TRACES`
    (a team's own traces kept outside the repository; `workloads/traces/` wins a name clash)."""
    import os

    folders = [TRACES_DIR, *(Path(p) for p in os.environ.get(TRACES_ENV, "").split(os.pathsep) if p)]
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.csv")):
            found.setdefault(path.stem, path)
    return dict(sorted(found.items()))


def load_trace(name: str, field_name: str = "traces") -> Trace:
    """The catalogue's trace `name`; an unknown name is an error naming `field_name` and the traces there are."""
    known = trace_catalogue()
    if name not in known:
        raise ConfigError(field_name, name, f"must be one of the traces {sorted(known)} (workloads/traces/*.csv, "
                                            f"or a folder in ${TRACES_ENV})")
    return read_trace(known[name], name)


def replay_of(workload: str, speed: float) -> TraceReplay:
    """The replay of a planned trace cell: its workload label's trace, read from the catalogue again and checked
    against the label's digest (a trace file changed since the plan is another trace: the cell fails, naming it)."""
    parts = trace_label_parts(workload)
    if parts is None:
        raise ConfigError("workload", workload, "must be a trace's label, trace:<name>@<digest>")
    name, digest = parts
    trace = load_trace(name, "workload")
    if digest and trace.digest != digest:
        raise ConfigError("workload", workload, f"trace {name} changed since the run was planned: its offsets' digest "
                                                f"is {trace.digest} now ({trace_catalogue()[name]})")
    return TraceReplay(trace, speed)


TRACE_SEARCH_REPLAYS = 3  # a speed search's planned time, in replays at its start speed: doubling halves each point's


def planned_replay_s(workload: str, speed: float, search: bool = False) -> float:
    """The replay time a trace cell is planned at before a night has measured it: one replay at `speed`, or a speed
    search from `speed` (TRACE_SEARCH_REPLAYS replays' time: its doubling points sum to under two, the bisection's
    faster ones to about one more)."""
    one = replay_of(workload, speed).length_s + LAST_ARRIVAL_S
    return one * (TRACE_SEARCH_REPLAYS if search else 1)
