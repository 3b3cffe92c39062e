"""The regression work's clock (tasks/regress/clock.py): the next pair or round starts only if it is expected to
end before the night's deadline, on the mean so far or the first guess."""

from __future__ import annotations

import pytest

from tasks.regress.clock import FIRST_START_S, WorkClock, first_pair_s, first_round_s


class Now:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_the_first_guesses_are_two_server_starts_and_the_points():
    assert first_pair_s(8.0, 2.0) == 2 * FIRST_START_S + 10.0  # one simultaneous point
    assert first_round_s(8.0, 2.0) == 2 * (FIRST_START_S + 10.0)  # each side alone, one after the other
    assert first_pair_s(1.0, 0.3) == 2 * FIRST_START_S + 2.0  # a pair warms its fresh servers 1 s at least


def test_the_next_one_fits_on_this_points_mean_else_the_nights_else_the_guess():
    now = Now(1000.0)
    clock = WorkClock(deadline_s=1100.0, now=now)
    assert clock.left_s() == 100.0
    assert clock.expected_s("pair", [], 30.0) == 30.0 and clock.fits("pair", [], 30.0)
    assert not clock.fits("pair", [], 130.0)
    own: list[float] = []
    with clock.timed("pair", own):
        now.t += 60.0
    assert own == [60.0] and clock.spent == {"pair": [60.0]}
    assert clock.expected_s("pair", [], 30.0) == 60.0  # another point: the night's mean so far
    assert clock.expected_s("pair", [20.0], 30.0) == 20.0  # its own mean first
    assert not clock.fits("pair", own, 30.0)  # 60 s expected, 40 s left
    assert clock.fits("round", [], 30.0) and not clock.fits("round", [], 30.0, budget_left_s=29.0)


def test_without_a_deadline_only_the_budget_bounds_it():
    clock = WorkClock()
    assert clock.left_s() == pytest.approx(float("inf"))
    assert clock.fits("round", [], 1e9) and not clock.fits("round", [50.0], 1.0, budget_left_s=49.0)
