"""Look schedules: when a duet's pairs or a size's rounds are judged, and at what confidence.

A duet that adds pairs while undecided, or a size that adds rounds while undecided, looks at its data more than
once; judging every look at the full alpha and stopping at the first that decides is optional stopping, whose error
rate grows with each look. So each has its looks written down before its first pair or round, and spends its alpha
over them (Bonferroni: each of the L looks at alpha / L), which keeps the error rate at most alpha however early it
stops at one of them, as a bound's longer look does (tasks/core/confidence.py).

    size_schedule(12)      Schedule((4, 6, 8, 12))   rounds; every flagged metric's interval at 1 - alpha / 4
    duet_schedule(3, 6)    Schedule((3, 6))          pairs; each metric's test at alpha / (tests * 2)
    duet_schedule(3, 24)   Schedule((3, 6, 12, 24))

The rules: a size looks at the counts of SIZE_LOOKS that are at most 3/4 of Param size_rounds, then at size_rounds
(12: 4, 6, 8, 12; 8: 4, 6, 8; 4: 4 alone); a duet at duet_min_pairs, then at each doubling of it that is at most
3/4 of duet_max_pairs, then at duet_max_pairs (3..6: 3, 6). A look closer to the last than that would spend alpha
on a few rounds or pairs more. Work carried over to the next night keeps its schedule (tasks/regress/carry.py): its
looks go on where they stopped, never at a fresh alpha.
"""

from __future__ import annotations

from dataclasses import dataclass

SIZE_LOOKS = (4, 6, 8, 12, 16, 24, 32)  # a size's looks (rounds) below Param size_rounds
LAST_LOOK_SHARE = 0.75  # a look before the last is at most this share of it


@dataclass(frozen=True)
class Schedule:
    """The counts (pairs or rounds) at which the work is judged, in order; the last is where it ends."""

    looks: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.looks or list(self.looks) != sorted(set(self.looks)) or self.looks[0] < 1:
            raise ValueError(f"looks {self.looks!r}: must be increasing counts of at least 1")

    @property
    def count(self) -> int:
        """L: the number of looks alpha is spent over."""
        return len(self.looks)

    @property
    def last(self) -> int:
        return self.looks[-1]

    def taken(self, n: int) -> int:
        """How many looks `n` pairs or rounds have reached."""
        return sum(look <= n for look in self.looks)

    def latest(self, n: int) -> int | None:
        """The latest look `n` pairs or rounds have reached (None: not the first yet)."""
        reached = [look for look in self.looks if look <= n]
        return reached[-1] if reached else None

    def is_look(self, n: int) -> bool:
        return n in self.looks

    def alpha(self, alpha: float) -> float:
        """The alpha of one look when `alpha` is spent over the schedule."""
        return alpha / self.count

    def to_dict(self) -> dict:
        return {"looks": list(self.looks), "of": self.count}

    @classmethod
    def from_dict(cls, data: dict) -> Schedule:
        return cls(tuple(int(n) for n in data["looks"]))


def _before_last(candidates: list[int], last: int) -> tuple[int, ...]:
    return (*sorted({n for n in candidates if n <= LAST_LOOK_SHARE * last}), last)


def size_schedule(size_rounds: int) -> Schedule:
    """A size's looks for Param size_rounds (at least 2: a t interval needs two rounds)."""
    return Schedule(_before_last([n for n in SIZE_LOOKS if n < size_rounds], size_rounds))


def duet_schedule(min_pairs: int, max_pairs: int) -> Schedule:
    """A duet's looks from Params duet_min_pairs to duet_max_pairs: the first, its doublings, the last."""
    counts, n = [], min_pairs
    while n < max_pairs:
        counts.append(n)
        n *= 2
    return Schedule(_before_last(counts, max_pairs))
