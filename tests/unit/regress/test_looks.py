"""Look schedules (tasks/regress/looks.py): the counts at which sizes and duets are judged, and the alpha each look
gets when it is spent over them."""

from __future__ import annotations

import pytest

from tasks.regress.looks import Schedule, duet_schedule, size_schedule


@pytest.mark.parametrize(("size_rounds", "looks"), [
    (12, (4, 6, 8, 12)),  # the default: L = 4
    (16, (4, 6, 8, 12, 16)),
    (8, (4, 6, 8)),  # a smaller size_rounds, fewer looks
    (6, (4, 6)),
    (5, (5,)),  # a look at 4 would spend alpha on one round less than the last
    (4, (4,)),
    (2, (2,)),
    (40, (4, 6, 8, 12, 16, 24, 40)),
])
def test_a_sizes_looks_come_from_size_rounds(size_rounds, looks):
    assert size_schedule(size_rounds).looks == looks


@pytest.mark.parametrize(("pairs", "looks"), [
    ((3, 6), (3, 6)),  # the defaults: L = 2
    ((3, 24), (3, 6, 12, 24)),
    ((2, 6), (2, 4, 6)),
    ((3, 3), (3,)),
    ((5, 6), (6,)),  # the first look is dropped when it is too close to the last
])
def test_a_duets_looks_are_its_first_pairs_their_doublings_and_its_last(pairs, looks):
    assert duet_schedule(*pairs).looks == looks


def test_a_schedule_counts_the_looks_reached_and_splits_alpha_over_them():
    schedule = size_schedule(12)
    assert schedule.count == 4 and schedule.last == 12
    assert [schedule.taken(n) for n in (0, 3, 4, 5, 8, 12, 13)] == [0, 0, 1, 1, 3, 4, 4]
    assert [schedule.latest(n) for n in (3, 4, 7, 12)] == [None, 4, 6, 12]
    assert schedule.is_look(8) and not schedule.is_look(9)
    assert schedule.alpha(0.05) == pytest.approx(0.0125)  # each look's interval at 98.75 %
    assert Schedule.from_dict(schedule.to_dict()) == schedule and schedule.to_dict() == {"looks": [4, 6, 8, 12],
                                                                                         "of": 4}
    with pytest.raises(ValueError, match="increasing"):
        Schedule((6, 4))
