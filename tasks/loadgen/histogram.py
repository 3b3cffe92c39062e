"""HDR histograms of latency, only to persist and merge: bulk-loaded from numpy, never one value at a time.

Percentiles of a load point are computed exactly with numpy on the raw latencies; the histogram is the
compact, mergeable form written next to them (HdrHistogram's base64 encoding, the same as Java/C/wrk2),
so load points, workers and nights can be added without keeping every request. `record_value` costs about
0.9 us per call; here the bucket index of every value is computed with numpy (the same integer formula
as `HdrHistogram._counts_index_for`) and the counts array is filled with one `np.bincount`.
"""

from __future__ import annotations

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour, in microseconds
SIGNIFICANT_FIGURES = 3
_POW2 = np.array([1 << i for i in range(63)], dtype=np.int64)


def new_histogram() -> HdrHistogram:
    """An empty latency histogram in microseconds, 1 us to 1 h, 3 significant figures (values in us)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


def counts_indexes(hist: HdrHistogram, values: np.ndarray) -> np.ndarray:
    """Bucket index of each value (int64 >= 0), vectorised from HdrHistogram's own integer formula."""
    values = np.asarray(values, dtype=np.int64)
    masked = values | np.int64(hist.sub_bucket_mask)
    bit_length = np.searchsorted(_POW2, masked, side="right")  # == int(v).bit_length(), exactly
    bucket = bit_length - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = values >> (bucket + hist.unit_magnitude)
    return ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + (sub_bucket - hist.sub_bucket_half_count)


def add_values(hist: HdrHistogram, values_us: np.ndarray, weights: np.ndarray | None = None) -> HdrHistogram:
    """Add many values (microseconds) at once, each counted `weights[i]` times (rounded; default once);
    values outside the histogram's range are clipped to it."""
    values = np.clip(np.asarray(values_us, dtype=np.int64), 0, HIGHEST_US)
    if values.size == 0:
        return hist
    counts_each = None if weights is None else np.rint(np.asarray(weights, dtype=float)).astype(np.int64)
    index = counts_indexes(hist, values)
    counts = np.ctypeslib.as_array(hist.counts)  # a view of the histogram's own counters
    added = np.bincount(index, weights=counts_each, minlength=hist.counts_len)[:hist.counts_len]
    counts += np.rint(added).astype(counts.dtype)
    hist.total_count += int(values.size if counts_each is None else counts_each.sum())
    hist.min_value = min(hist.min_value, int(values.min()))
    hist.max_value = max(hist.max_value, int(values.max()))
    return hist


def histogram_from_ns(latencies_ns: np.ndarray, weights: np.ndarray | None = None) -> HdrHistogram:
    """A histogram of latencies given in nanoseconds (rounded to whole microseconds), optionally weighted."""
    values_us = (np.asarray(latencies_ns, dtype=np.int64) + 500) // 1000
    return add_values(new_histogram(), values_us, weights)


def encode(hist: HdrHistogram) -> str:
    """The standard compressed, base64 form (what wrk2, HdrHistogram_c and the Java library read)."""
    return hist.encode().decode()


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode())


def merge(encoded: list[str]) -> HdrHistogram:
    """The exact sum of several encoded histograms (every worker, load point or night of one figure)."""
    total = new_histogram()
    for text in encoded:
        total.add(decode(text))
    return total


def same_counts(a: HdrHistogram, b: HdrHistogram) -> bool:
    """Bucket-for-bucket equality of two histograms (and of their totals)."""
    return (a.total_count == b.total_count and a.counts_len == b.counts_len
            and bool(np.array_equal(np.ctypeslib.as_array(a.counts), np.ctypeslib.as_array(b.counts))))
