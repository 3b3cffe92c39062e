"""benchmarks/night_claims.py: a night's decisions as published and from its first looks alone (one look each),
and the time its longer looks took, read from the run's own timeline."""

from __future__ import annotations

import json

from benchmarks.night_claims import decisions, first_looks, shares


def test_a_lengthened_point_counts_as_its_first_look_in_the_night_without_longer_looks():
    # the first look: 30 requests, none slower than 1,000 ms (undecided); published: 450, none slower (holds)
    first = {"1000": {"verdict": "undecided", "exceed": 0, "effective": 30.0}}
    sessions = [{"cells": {"a@4": {"lengthen": [{"begin": 100.0, "end": 220.0, "first_requests": 30,
                                                 "first_bounds": json.dumps(first)}]},
                           "b@2": {"lengthen": [{"begin": 300.0, "end": 330.0, "not_counted": "contended"}]}}}]
    looks, seconds = first_looks(sessions)
    assert set(looks) == {"a@4"} and seconds == 150.0  # a look that did not count still took its time
    rows = [{"cell_id": "a@4", "status": "ok", "lengthened": True, "latency_samples": 450,
             "p99_bounds": json.dumps({"1000": {"verdict": "holds", "exceed": 0, "effective": 450.0}})},
            # 320 requests, none slow: undecided at half the alpha (368 needed), holds at one look (299)
            {"cell_id": "c@2", "status": "ok", "lengthened": False, "latency_samples": 320,
             "p99_bounds": json.dumps({"1000": {"verdict": "undecided", "exceed": 0, "effective": 320.0}})},
            {"cell_id": "d@2", "status": "failed", "p99_bounds": None}]
    published, one_look = decisions(rows, looks, 95.0)
    assert published == {(1000.0, "holds"): 1, (1000.0, "undecided"): 1}
    assert one_look == {(1000.0, "undecided"): 1, (1000.0, "holds"): 1}  # 30 cannot hold; 320 do at one look
    assert shares(published) == {1000.0: "1/2 undecided (50 %)"}
