"""Load-test settings: a plain, validated value. Every stop rule is written down here."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tasks.core.errors import ConfigError

MODES = ("concurrency", "rate")
ARRIVALS = ("constant", "poisson")
MAX_DURATION_S = 3600.0
MAX_CONCURRENCY = 4096
MAX_CONNECTIONS = 4096
MAX_WORKERS = 64
STABLE_WINDOWS = 3  # perf_analyzer's rule: the last three windows agree


def check_timing(duration_s: float, warmup_s: float, window_s: float) -> None:
    """The time rules of a load point, shared by the run config and the load settings."""
    if not 0 < duration_s <= MAX_DURATION_S:
        raise ConfigError("duration_s", duration_s, f"must be > 0 and <= {MAX_DURATION_S:.0f}")
    if not 0 <= warmup_s <= MAX_DURATION_S:
        raise ConfigError("warmup_s", warmup_s, f"must be >= 0 and <= {MAX_DURATION_S:.0f}")
    if not 0 < window_s <= duration_s:
        raise ConfigError("window_s", window_s, f"must be > 0 and <= duration_s ({duration_s})")


@dataclass(frozen=True)
class LoadSettings:
    """One load point. `load` is the concurrency (closed loop) or the target rate in requests/s (open loop)."""

    mode: str = "concurrency"
    load: float = 1
    batch_size: int = 1
    duration_s: float = 10.0  # measured time, after warm-up
    warmup_s: float = 2.0  # discarded (kept apart) before the measured time starts
    window_s: float = 2.0  # the measured time is cut into windows of this length for the stability rule
    stability_pct: float = 10.0  # stable when the last three windows' throughputs lie within this of their mean
    request_timeout_s: float = 10.0  # an in-flight request older than this counts as a timeout error
    seed: int = 0  # seed of the open-loop arrival schedule (worker i of N uses seed + i)
    arrival: str = "constant"  # open loop: constant or Poisson gaps
    max_connections: int = 1024  # open loop: connection pool bound; a due request waits for a free one
    stop_when_stable: bool = False  # end the measured time at the first window boundary where the rule holds
    min_windows: int = STABLE_WINDOWS  # ... but not before this many windows; duration_s stays the upper bound
    workers: int = 1  # generator processes for this load point; their recordings merge exactly
    # latency bounds (ms) the point's requests are counted against, for "p99 within the bound" decisions
    # (tasks/core/confidence.py): the run's bound and the report's
    bounds_ms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError("mode", self.mode, f"must be one of {list(MODES)}")
        if self.mode == "concurrency" and not (1 <= self.load <= MAX_CONCURRENCY and float(self.load).is_integer()):
            raise ConfigError("concurrency", self.load, f"must be an integer from 1 to {MAX_CONCURRENCY}")
        if self.mode == "rate" and not self.load > 0:
            raise ConfigError("rate", self.load, "must be > 0 requests/s")
        if self.batch_size < 1:
            raise ConfigError("batch_size", self.batch_size, "must be >= 1")
        check_timing(self.duration_s, self.warmup_s, self.window_s)
        if not 0 < self.stability_pct <= 100:
            raise ConfigError("stability_pct", self.stability_pct, "must be > 0 and <= 100")
        if self.arrival not in ARRIVALS:
            raise ConfigError("arrival", self.arrival, f"must be one of {list(ARRIVALS)}")
        if not 1 <= self.max_connections <= MAX_CONNECTIONS:
            raise ConfigError("max_connections", self.max_connections, f"must be from 1 to {MAX_CONNECTIONS}")
        max_windows = int(self.duration_s / self.window_s + 1e-9)
        if self.min_windows < STABLE_WINDOWS or (self.stop_when_stable and self.min_windows > max_windows):
            raise ConfigError("min_windows", self.min_windows,
                              f"must be >= {STABLE_WINDOWS} and, with stop_when_stable, <= duration_s / window_s "
                              f"({max_windows})")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ConfigError("workers", self.workers, f"must be an integer from 1 to {MAX_WORKERS}")
        if self.mode == "concurrency" and self.workers > self.load:
            raise ConfigError("workers", self.workers, f"must be <= the concurrency ({self.load:g}): "
                                                       "each worker drives at least one connection")
        if not self.request_timeout_s > 0:
            raise ConfigError("request_timeout_s", self.request_timeout_s, "must be > 0")
        if any(not b > 0 for b in self.bounds_ms):
            raise ConfigError("bounds_ms", list(self.bounds_ms), "each must be > 0 ms")

    @property
    def concurrency(self) -> int:
        return int(self.load)

    @property
    def max_windows(self) -> int:
        """Whole windows that fit in the measured time (the stability rule's upper bound)."""
        return int(self.duration_s / self.window_s + 1e-9)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> LoadSettings:
        """The settings `to_dict` wrote, through JSON (its lists made the tuples they were)."""
        return cls(**{**values, "bounds_ms": tuple(values.get("bounds_ms") or ())})
