"""Recordings (tasks/loadgen/recording.py): the stability rule over windows, payload bytes through save, load
and merge."""

from __future__ import annotations

import numpy as np

from tasks.loadgen.recording import Recording, window_stable


def test_stability_rule():
    assert window_stable(np.array([50.0, 100, 101, 99]), 5)
    assert not window_stable(np.array([100.0, 100, 120]), 5)
    assert not window_stable(np.array([100.0, 100]), 50)


def test_payload_bytes_survive_save_load_and_merge(tmp_path):
    def part(response_bytes: int) -> Recording:
        empty = np.zeros(0, np.int64)
        return Recording(0, 0, 10, empty, empty, empty, np.zeros(0, np.int8), request_bytes=397,
                         response_bytes=response_bytes)

    path = str(tmp_path / "r.npz")
    part(1000).save(path)
    loaded = Recording.load(path)
    assert (loaded.request_bytes, loaded.response_bytes) == (397, 1000)
    merged = Recording.merge([part(1000), part(500)])
    assert (merged.request_bytes, merged.response_bytes) == (397, 1500)
