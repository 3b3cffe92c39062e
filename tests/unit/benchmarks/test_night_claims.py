"""benchmarks/night_claims.py: a night's decisions as published and from its first looks alone (one look each),
and the time its longer looks took, read from the run's own timeline."""

from __future__ import annotations

import json

from benchmarks.night_claims import decisions, first_looks, is_claim_point, point_key, shares

A = "m.onnx.triton.process.cpu.b1.rate-search2.binary@4"
C = "m.onnx.triton.process.cpu.b1.concurrency-sweep8.binary@8"


def test_a_lengthened_point_counts_as_its_first_look_in_the_night_without_longer_looks():
    # first looks: 30 requests, none slower than 1,000 ms (undecided); published: 450, none slower (holds)
    first = {"1000": {"verdict": "undecided", "exceed": 0, "effective": 30.0}}
    swept = {"begin": 100.0, "end": 220.0, "first_requests": 30, "first_bounds": json.dumps(first),
             "first_duration_s": 8.0}
    claimed = {**swept, "begin": 400.0, "end": 500.0}
    contended = {"begin": 300.0, "end": 330.0, "not_counted": "contended"}
    sessions = [{"cells": {C: {"lengthen": [swept]}, A: {"lengthen": [claimed]},
                           "m.onnx.triton.process.cpu.b1.concurrency-sweep8@2": {"lengthen": [contended]}}}]
    looks, seconds = first_looks(sessions, warmup_s=2.0)
    # a look that did not count still took its time; the rate search's look ran a point of its own first (2 + 8 s)
    assert set(looks) == {A, C} and seconds == 120.0 + 100.0 + 10.0 + 30.0
    # published rows carry no cell id: a look is found by model, format, server, wire, mode and load
    point = {"model": "m", "format": "onnx", "server": "triton", "status": "ok", "wire": "binary"}
    holds = json.dumps({"1000": {"verdict": "holds", "exceed": 0, "effective": 450.0}})
    rows = [{**point, "mode": "concurrency", "load": 8.0, "lengthened": True, "latency_samples": 450,
             "p99_bounds": holds},
            # the rate search's claim point: a night without longer looks would not have run it
            {**point, "mode": "rate", "load": 4.0, "lengthened": True, "latency_samples": 450, "p99_bounds": holds},
            # 320 requests, none slow: undecided at half the alpha (368 needed), holds at one look (299)
            {**point, "mode": "rate", "load": 2.0, "lengthened": False, "latency_samples": 320,
             "p99_bounds": json.dumps({"1000": {"verdict": "undecided", "exceed": 0, "effective": 320.0}})},
            {**point, "wire": "grpc", "mode": "rate", "load": 4.0, "status": "failed", "p99_bounds": None}]
    published, one_look = decisions(rows, looks, 95.0)
    assert published == {(1000.0, "holds"): 2, (1000.0, "undecided"): 1}
    assert one_look == {(1000.0, "undecided"): 1, (1000.0, "holds"): 1}  # 30 cannot hold; 320 do at one look
    assert shares(published) == {1000.0: "1/3 undecided (33 %)"}


def test_a_point_key_reads_a_cell_id_as_a_row_names_the_point():
    assert point_key(A) == ("m.onnx.triton", "binary", "rate", 4.0) and is_claim_point(A)
    assert point_key("bert-base.onnx.custom.process.cpu.b1.concurrency-sweep8@2") == \
        ("bert-base.onnx.custom", "json", "concurrency", 2.0)
    assert not is_claim_point(C)
