"""When a host's state makes a point contended (tasks/validate/outcome.py): other work beyond the bound, a
server starved on its own CPUs, the quiet wait's reason, a duet pair whose sides saw different states."""

from __future__ import annotations

import pytest

from tasks.validate.outcome import (
    STARVED_NEIGHBOUR_PCT,
    Contention,
    contended_reason,
    host_quiet,
    judge_host,
    pair_host_flag,
)

STARVED = {"neighbour_cpu_pct": 20.0, "steal_pct": 0.0, "server_cpu_share_pct": 24.0, "server_cpu_wait_pct": 19.0,
           "server_cpus_neighbour_pct": 73.0, "server_cores": 1}


def test_other_work_beyond_max_neighbour_pct_makes_a_point_contended():
    busy = {**STARVED, "neighbour_cpu_pct": 62.0, "steal_pct": 4.0, "server_cpus_neighbour_pct": 0.0}
    found = judge_host(busy, 25.0)
    assert found and "other work used 62 % of the host's CPU" in found.reason
    assert "max_neighbour_pct 25" in found.reason and "steal 4 %" in found.reason and found.summary == "other work 62 %"
    assert judge_host({**busy, "neighbour_cpu_pct": 25.0}, 25.0) is None  # "more than"
    assert judge_host(busy, 100.0) is None  # 100: never judged


def test_a_server_starved_on_its_own_cpus_is_contended_whatever_the_hosts_total():
    found = judge_host(STARVED, 25.0)
    assert found and "starved" in found.reason and "73 %" in found.reason
    assert found.summary.startswith("the server got 24 %")  # the host-wide rule did not fire (20 % <= 25 %)
    assert judge_host(STARVED, 100.0) is None


@pytest.mark.parametrize("change", [
    {"server_cpus_neighbour_pct": STARVED_NEIGHBOUR_PCT - 1},  # its CPUs ran only it: it waited for its own threads
    {"server_cpu_wait_pct": 3.0},  # hardly waited
    {"server_cpu_share_pct": 90.0, "server_cpu_wait_pct": 20.0},  # waited little against what it ran
    {"server_cpu_wait_pct": None},  # no schedstat here: unknown breaks no rule
])
def test_not_starved(change):
    assert judge_host({**STARVED, **change}, 25.0) is None


def test_a_server_whose_threads_only_wait_for_each_other_is_not_contended():
    """Eight threads on one CPU: the run queue is long, the CPU is the server's, no other work there."""
    assert judge_host({**STARVED, "server_cpu_share_pct": 97.0, "server_cpu_wait_pct": 400.0,
                       "server_cpus_neighbour_pct": 2.0}, 25.0) is None


def test_quiet_and_the_reason_of_a_point_contended_twice():
    assert host_quiet({"neighbour_cpu_pct": 10.0, "server_cpus_neighbour_pct": 5.0}, 25.0)
    assert not host_quiet({"neighbour_cpu_pct": 30.0, "server_cpus_neighbour_pct": 5.0}, 25.0)
    assert not host_quiet({"neighbour_cpu_pct": 10.0, "server_cpus_neighbour_pct": 60.0}, 25.0)
    assert host_quiet({"neighbour_cpu_pct": None, "server_cpus_neighbour_pct": None}, 25.0)
    first = Contention("other work used 62 % of the host's CPU during the point (more than max_neighbour_pct 25)",
                       "other work 62 %")
    again = Contention("other work used 58 % ...", "other work 58 %")
    assert contended_reason(first, 20.2, True, again) == (
        "other work used 62 % of the host's CPU during the point (more than max_neighbour_pct 25); re-measured "
        "after waiting 20 s: still other work 58 %")
    assert "did not quiet" in contended_reason(first, 30, False, again)


def test_a_duet_pair_is_flagged_only_when_its_two_sides_saw_different_host_states():
    def sides(a: dict, b: dict) -> dict:
        return {"reference": {"throughput_rps": 100.0, "host": a}, "candidate": {"throughput_rps": 90.0, "host": b}}

    busy = {"neighbour_cpu_pct": 70.0, "server_cpus_neighbour_pct": 60.0}
    assert pair_host_flag(sides(busy, {**busy, "neighbour_cpu_pct": 66.0})) is None  # a busy host hits both: cancels
    flag = pair_host_flag(sides(busy, {**busy, "server_cpus_neighbour_pct": 20.0}))
    assert flag and "other work on the servers' CPUs 60 % (reference) against 20 % (candidate)" in flag
    assert pair_host_flag(sides({}, {})) is None  # no host state recorded: nothing to tell apart
