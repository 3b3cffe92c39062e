"""Running duets (tasks/regress/sides.py): a pair whose sides saw different host states is set aside."""

from __future__ import annotations

from tests.unit.regress.test_duet_verdict import pairs_of


def test_a_pair_whose_sides_saw_different_host_states_is_set_aside():
    from tasks.regress.sides import trusted_pairs

    pairs = pairs_of(0.90, 0.005, 5)
    for pair in pairs:
        for side in pair["sides"].values():
            side["host"] = {"neighbour_cpu_pct": 40.0, "server_cpus_neighbour_pct": 2.0}  # busy, for both: kept
    pairs[2]["sides"]["candidate"]["host"] = {"neighbour_cpu_pct": 40.0, "server_cpus_neighbour_pct": 30.0}
    trusted, flags = trusted_pairs(pairs)
    assert [p["index"] for p in trusted] == [0, 1, 3, 4]
    assert len(flags) == 1 and flags[0].startswith("pair 2:") and "servers' CPUs" in flags[0]
