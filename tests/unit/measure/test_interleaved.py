"""The order of interleaved solo rounds (tasks/measure/interleaved.py): drawn at random a round, the same on a
re-run, and neither side first in every round. The rounds with real servers:
tests/integration/test_regress_pipeline.py."""

from tasks.measure.interleaved import round_order


def test_each_round_draws_its_order_and_a_rerun_draws_the_same():
    orders = [round_order("run:duet0:0", i, ("reference", "candidate")) for i in range(40)]
    assert orders == [round_order("run:duet0:0", i, ("reference", "candidate")) for i in range(40)]
    firsts = [order[0] for order in orders]
    assert 10 <= firsts.count("reference") <= 30  # a fair coin over 40 rounds, not an alternation
    assert firsts != ["reference", "candidate"] * 20 and all(sorted(o) == ["candidate", "reference"] for o in orders)
    assert [round_order("other", i, ("reference", "candidate")) for i in range(40)] != orders
