"""benchmarks/night_claims.py: a night's decisions as published and from its first looks alone (one look each),
and the time its longer looks took, read from the run's own timeline."""

from __future__ import annotations

import json

from benchmarks.night_claims import decisions, first_looks, point_key, shares

A = "m.onnx.triton.process.cpu.b1.rate-search2.binary@4"


def test_a_lengthened_point_counts_as_its_first_look_in_the_night_without_longer_looks():
    # the first look: 30 requests, none slower than 1,000 ms (undecided); published: 450, none slower (holds)
    first = {"1000": {"verdict": "undecided", "exceed": 0, "effective": 30.0}}
    counted = {"begin": 100.0, "end": 220.0, "first_requests": 30, "first_bounds": json.dumps(first)}
    contended = {"begin": 300.0, "end": 330.0, "not_counted": "contended"}
    sessions = [{"cells": {A: {"lengthen": [counted]},
                           "m.onnx.triton.process.cpu.b1.concurrency-sweep8@2": {"lengthen": [contended]}}}]
    looks, seconds = first_looks(sessions)
    assert set(looks) == {A} and seconds == 150.0  # a look that did not count still took its time
    # published rows carry no cell id: a look is found by model, format, server, wire, mode and load
    point = {"model": "m", "format": "onnx", "server": "triton", "status": "ok"}
    rows = [{**point, "wire": "binary", "mode": "rate", "load": 4.0, "lengthened": True, "latency_samples": 450,
             "p99_bounds": json.dumps({"1000": {"verdict": "holds", "exceed": 0, "effective": 450.0}})},
            # 320 requests, none slow: undecided at half the alpha (368 needed), holds at one look (299)
            {**point, "wire": "binary", "mode": "rate", "load": 2.0, "lengthened": False, "latency_samples": 320,
             "p99_bounds": json.dumps({"1000": {"verdict": "undecided", "exceed": 0, "effective": 320.0}})},
            {**point, "wire": "grpc", "mode": "rate", "load": 4.0, "status": "failed", "p99_bounds": None}]
    published, one_look = decisions(rows, looks, 95.0)
    assert published == {(1000.0, "holds"): 1, (1000.0, "undecided"): 1}
    assert one_look == {(1000.0, "undecided"): 1, (1000.0, "holds"): 1}  # 30 cannot hold; 320 do at one look
    assert shares(published) == {1000.0: "1/2 undecided (50 %)"}


def test_a_point_key_reads_a_cell_id_as_a_row_names_the_point():
    assert point_key(A) == ("m.onnx.triton", "binary", "rate", 4.0)
    assert point_key("bert-base.onnx.custom.process.cpu.b1.concurrency-sweep8@2") == \
        ("bert-base.onnx.custom", "json", "concurrency", 2.0)
