"""Load-test settings: a plain, validated value. Every stop rule is written down here."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tasks.errors import ConfigError

MODES = ("concurrency", "rate")
MAX_DURATION_S = 3600.0
MAX_CONCURRENCY = 4096


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
    seed: int = 0  # seed of the open-loop arrival schedule

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError("mode", self.mode, f"must be one of {list(MODES)}")
        if self.mode == "concurrency" and not (1 <= self.load <= MAX_CONCURRENCY and float(self.load).is_integer()):
            raise ConfigError("concurrency", self.load, f"must be an integer from 1 to {MAX_CONCURRENCY}")
        if self.mode == "rate" and not self.load > 0:
            raise ConfigError("rate", self.load, "must be > 0 requests/s")
        if self.batch_size < 1:
            raise ConfigError("batch_size", self.batch_size, "must be >= 1")
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ConfigError("duration_s", self.duration_s, f"must be > 0 and <= {MAX_DURATION_S:.0f}")
        if not 0 <= self.warmup_s <= MAX_DURATION_S:
            raise ConfigError("warmup_s", self.warmup_s, f"must be >= 0 and <= {MAX_DURATION_S:.0f}")
        if not 0 < self.window_s <= self.duration_s:
            raise ConfigError("window_s", self.window_s, f"must be > 0 and <= duration_s ({self.duration_s})")
        if not 0 < self.stability_pct <= 100:
            raise ConfigError("stability_pct", self.stability_pct, "must be > 0 and <= 100")
        if not self.request_timeout_s > 0:
            raise ConfigError("request_timeout_s", self.request_timeout_s, "must be > 0")

    @property
    def concurrency(self) -> int:
        return int(self.load)

    def to_dict(self) -> dict:
        return asdict(self)
