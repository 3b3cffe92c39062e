"""The regression work's clock: whether the next pair or round fits before the night's deadline, or its point's size
budget.

    clock = WorkClock(regress_deadline(plan.night))       # epoch seconds, or None: no night budget
    if clock.fits("pair", own_pair_s, first_guess_s): ...
    with clock.timed("pair", own_pair_s): ...              # measures one, and remembers how long it took

No pair or round starts that the deadline would cut: the next one is expected to take the mean of this point's so
far, else the mean of the night's so far (of that kind), else a stated first guess (`first_pair_s`,
`first_round_s`: FIRST_START_S per server start, plus the point's warm-up and measured window). The deadline is
the night's, for all its regression work (tasks/plan/night.py `regress_deadline`); a point's size also stops at
Param size_budget_s.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

FIRST_START_S = 10.0  # a first guess of one fresh server's start and served-output check (custom here: 2-5 s)
MIN_PAIR_WARMUP_S = 1.0  # a pair warms its fresh servers at least this long (tasks/measure/duet.py)


def first_pair_s(duration_s: float, warmup_s: float) -> float:
    """A first guess of one duet pair: two server starts and one load point."""
    return 2 * FIRST_START_S + max(warmup_s, MIN_PAIR_WARMUP_S) + duration_s


def first_round_s(duration_s: float, warmup_s: float) -> float:
    """A first guess of one size round: each side alone, a server start and a load point each."""
    return 2 * (FIRST_START_S + max(warmup_s, MIN_PAIR_WARMUP_S) + duration_s)


@dataclass
class WorkClock:
    """The night's deadline (epoch seconds; None: none) and how long pairs and rounds took so far tonight."""

    deadline_s: float | None = None
    now: Callable[[], float] = time.time
    spent: dict[str, list[float]] = field(default_factory=dict)  # kind ("pair", "round") -> each one's seconds

    def expected_s(self, kind: str, own: list[float], first_guess_s: float) -> float:
        """How long the next one of `kind` is expected to take: the mean of `own` (this point's), else of the
        night's, else the first guess."""
        for seen in (own, self.spent.get(kind) or []):
            if seen:
                return statistics.fmean(seen)
        return first_guess_s

    def left_s(self) -> float:
        return float("inf") if self.deadline_s is None else self.deadline_s - self.now()

    def fits(self, kind: str, own: list[float], first_guess_s: float, budget_left_s: float = float("inf")) -> bool:
        """Whether the next one of `kind` is expected to end before the deadline and within `budget_left_s`."""
        expected = self.expected_s(kind, own, first_guess_s)
        return expected <= min(self.left_s(), budget_left_s)

    @contextmanager
    def timed(self, kind: str, own: list[float]) -> Iterator[None]:
        """Time one pair or round: its seconds go to `own` and to the night's of that kind."""
        start = self.now()
        try:
            yield
        finally:
            seconds = self.now() - start
            own.append(seconds)
            self.spent.setdefault(kind, []).append(seconds)
