"""HDR histograms (tasks/loadgen/histogram.py): bulk loading equals recording value by value, and merging
workers' histograms equals one process's."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from tasks.loadgen import histogram
from tasks.loadgen.measurement import summarize
from tasks.loadgen.recording import Recording
from tasks.loadgen.settings import LoadSettings
from tests.unit.loadgen.test_measurement import _synthetic_recording


def test_hdr_bulk_load_equals_record_value_and_merges_exactly():
    values = (np.random.default_rng(7).lognormal(7, 1.5, 20_000)).astype(np.int64) + 1
    bulk = histogram.add_values(histogram.new_histogram(), values)
    one_by_one = histogram.new_histogram()
    for v in values[:20_000].tolist():
        one_by_one.record_value(v)
    assert histogram.same_counts(bulk, one_by_one)
    assert (bulk.min_value, bulk.max_value) == (one_by_one.min_value, one_by_one.max_value)


_WORKER_SCRIPT = """
import sys, numpy as np
from tasks.loadgen import histogram
from tasks.loadgen.recording import Recording
from tasks.loadgen.measurement import latencies_ns
rec = Recording.load(sys.argv[1])
print(histogram.encode(histogram.histogram_from_ns(latencies_ns(rec, "scheduled"))))
"""


def test_multi_process_merge_equals_single_process(tmp_path):
    """N recordings histogrammed in N separate processes merge into exactly the single-process result."""
    whole = _synthetic_recording(30_000, seed=1)
    settings = LoadSettings(mode="rate", load=10_000, duration_s=3, warmup_s=1, window_s=1)
    single = summarize(whole, settings, latency_from="scheduled")
    parts = []
    for i, index in enumerate(np.array_split(np.random.default_rng(2).permutation(30_000), 3)):
        index = np.sort(index)
        part = Recording(0, whole.warmup_end_ns, whole.end_ns, whole.scheduled_ns[index], whole.sent_ns[index],
                         whole.done_ns[index], whole.codes[index], 1 / 3, 4.0, 1, (25.0,), generator_late=i)
        part.save(str(tmp_path / f"part{i}.npz"))
        assert Recording.load(str(tmp_path / f"part{i}.npz")).generator_late == i
        parts.append(part)
    encoded = [subprocess.run([sys.executable, "-c", _WORKER_SCRIPT, str(tmp_path / f"part{i}.npz")],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
               for i in range(3)]
    merged_hist = histogram.merge(encoded)
    assert histogram.same_counts(merged_hist, histogram.decode(single.latency_hdr))
    for q in (50, 90, 99, 99.9):
        assert merged_hist.get_value_at_percentile(q) == histogram.decode(single.latency_hdr).get_value_at_percentile(q)
    merged = summarize(Recording.merge(parts), settings, latency_from="scheduled")
    for key in ("requests", "errors", "latency_ms_p50", "latency_ms_p99", "latency_ms_p999", "window_throughput_rps"):
        assert getattr(merged, key) == getattr(single, key), key
    assert merged.workers == 3 and merged.errors_by_kind == {"http_status": single.errors}
    assert merged.generator_late_starts == 0 + 1 + 2
