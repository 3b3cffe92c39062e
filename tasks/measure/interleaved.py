"""A change's size as each side shows it alone: randomized multiple interleaved trials (Abedi & Brecht, "Conducting
Repeatable Experiments in Highly Variable Cloud Computing Environments", ICPE 2017; Laaber et al. found them to
detect slowdowns of 10 % and less on cloud instances).

    result = measure_interleaved(reference, candidate, settings, load_index=0, rounds=12, budget_s=600, seed="...")
    result.rounds[i]["sides"]["candidate"]["server_cpu_us_per_request"]

A duet (tasks/measure/duet.py) finds *whether* a stack changed with a tenth of a solo session's noise, but two
servers time-sharing one core interfere, by an amount that depends on the stack and the model, so its ratio is not
the size the stack shows alone. A round here measures each side once, alone on the servers' CPUs, in an order
drawn at random for the round (seeded: a re-run draws the same): a fresh server, its served-output check, one load
point at the cell's load, the server stopped; then the other side. The host's drift within the hour hits both sides
of a round alike, so the round's ratio cancels most of it, and the random order keeps "first in a round" from
being shared by every round of one side. Rounds are added up to `rounds`, or until the next would pass `budget_s`
(at least MIN_ROUNDS, so that an interval exists). Each side's figures are a duet side's (`_figures`) with the
host's state over its own point (`host`). Nothing here judges: tasks/regress/size_verdict.py reads the rounds.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tasks.core import progress
from tasks.measure.duet import DuetResult, DuetSettings, DuetSide, run_pair, start_lives
from tasks.serve.hostlock import host_lock

MIN_ROUNDS = 2  # an interval of the rounds' mean needs two


@dataclass
class InterleavedResult:
    rounds: list[dict] = field(default_factory=list)  # {"index", "order": [labels], "sides": {label: figures}}
    error: str | None = None  # why the rounds stopped short (a side failed to start, its outputs, a load point)
    stop_reason: str = ""
    seconds: float = 0.0  # measuring time spent, start-ups included
    round_s: float | None = None  # the mean time one round took

    def to_dict(self) -> dict:
        return {"rounds": self.rounds, "error": self.error, "stop_reason": self.stop_reason,
                "seconds": round(self.seconds, 1), "round_s": None if self.round_s is None else round(self.round_s, 1)}


def round_order(seed: str, index: int, labels: tuple[str, str]) -> list[str]:
    """The round's order of the two sides, drawn from `seed` and the round's number (the same on every re-run)."""
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    order = list(labels)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def _alone(side: DuetSide, load_index: int, index: int, settings: DuetSettings, lives_of: DuetResult,
           scratch: Path) -> tuple[dict | None, str | None]:
    """One side alone: a fresh server, its served-output check, one load point, the server stopped."""
    with ExitStack() as stack:
        lives = start_lives([side], settings, lives_of, stack)
        if not lives:
            return None, lives_of.error
        pair, error = run_pair(load_index, index, [side], lives, settings, scratch)
    return (None, error) if error else (pair.sides[side.label], None)


def measure_interleaved(reference: DuetSide, candidate: DuetSide, settings: DuetSettings, *, load_index: int = 0,
                        rounds: int, budget_s: float, seed: str, first_index: int = 0) -> InterleavedResult:
    """Up to `rounds` rounds at `settings.loads[load_index]`, each side alone once a round in a random order, within
    `budget_s` of measuring time (start-ups included); the first round is number `first_index` (its order drawn for
    that number: rounds measured one call at a time draw what one call would)."""
    result = InterleavedResult()
    sides = {reference.label: reference, candidate.label: candidate}
    lives_of = DuetResult()  # the server lives' timelines and served checks, as a duet keeps them
    scratch = Path(tempfile.mkdtemp(prefix="interleaved-", dir=settings.log_dir.parent))
    started = time.monotonic()
    try:
        with host_lock(settings.run_id, f"{settings.duet_id}.size"):
            for index in range(first_index, first_index + rounds):
                spent = time.monotonic() - started
                done = len(result.rounds)
                if done >= MIN_ROUNDS and result.round_s is not None and spent + result.round_s > budget_s:
                    result.stop_reason = (f"the budget of {budget_s:g} s: {done} rounds of "
                                          f"{result.round_s:.0f} s each")
                    break
                order = round_order(seed, index, (reference.label, candidate.label))
                figures, round_begin = {}, time.monotonic()
                for label in order:
                    figures[label], error = _alone(sides[label], load_index, index, settings, lives_of, scratch)
                    if error:
                        result.error = f"round {index}, {label} side: {error}"[:4000]
                        return result
                result.rounds.append({"index": index, "order": order, "sides": figures})
                result.round_s = (time.monotonic() - started) / len(result.rounds)
                progress.emit("round", f"{settings.duet_id} size round {index}", "",
                              time.monotonic() - round_begin,
                              settings.progress_left or f"round {len(result.rounds)} of at most {rounds}, "
                                                        f"{max(0.0, budget_s - (time.monotonic() - started)):.0f} s "
                                                        "of its budget left")
            else:
                result.stop_reason = f"{rounds} rounds (size_rounds)"
    except Exception as exc:  # noqa: BLE001 - a side that does not start: the record says why, the run goes on
        result.error = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        result.seconds = time.monotonic() - started
        shutil.rmtree(scratch, ignore_errors=True)
    return result
