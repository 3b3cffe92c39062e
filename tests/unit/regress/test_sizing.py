"""Settling a duet group's records on the size alone (tasks/regress/sizing.py), from synthetic rounds: only the
points whose duet found a change are sized, and each record gets its size, interval and verdict."""

from tasks.regress.sizing import apply_sizes, detected_points
from tests.unit.regress.test_size import rounds_of

POINTS = [{"batch_size": 1, "mode": "concurrency", "load": 1.0, "protocol": None},
          {"batch_size": 1, "mode": "concurrency", "load": 4.0, "protocol": None}]


def record(metric: str, load: float, duet_verdict: str) -> dict:
    return {"metric": metric, "batch_size": 1, "mode": "concurrency", "load": load, "protocol": None,
            "duet_verdict": duet_verdict, "duet_reason": "the duet (the detector) of 4 pairs", "verdict": "pending"}


def test_only_points_whose_duet_found_a_change_are_sized_and_their_records_settled():
    group = {"points": POINTS}
    records = [record("server_cpu_us_per_request", 1.0, "no_change"), record("throughput_rps", 1.0, "no_change"),
               record("server_cpu_us_per_request", 4.0, "regression"), record("latency_ms_p99", 4.0, "no_change")]
    assert detected_points(records, group) == [1]
    measured = {"rounds": rounds_of(1.25, 0.01, 8), "error": None, "seconds": 80.0, "round_s": 10.0,
                "stop_reason": "8 rounds (size_rounds)"}
    apply_sizes(records[2:], POINTS[1], measured, 25.0)
    cpu, p99 = records[2], records[3]
    assert cpu["verdict"] == "regression" and cpu["change_ci"][0] > 20.0 and cpu["size"]["rounds"] == 8
    assert cpu["reason"].startswith("the duet (the detector) of 4 pairs; +2") and "alone" in cpu["reason"]
    assert p99["verdict"] == "no_change" and p99["change_pct"] is not None  # published beside, not a finding


def test_rounds_that_stopped_leave_the_change_uncertain_and_say_why():
    records = [record("server_cpu_us_per_request", 4.0, "regression")]
    measured = {"rounds": rounds_of(1.25, 0.01, 1), "error": "round 1, candidate side: the server died",
                "seconds": 12.0}
    apply_sizes(records, POINTS[1], measured, 25.0)
    assert records[0]["verdict"] == "regression_uncertain" and records[0]["change_ci"] is None
    assert "the server died" in records[0]["reason"]
