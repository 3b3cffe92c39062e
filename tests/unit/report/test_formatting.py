"""How the report writes a value: one formatter for every section."""

from __future__ import annotations

import math

from tasks.report.formatting import DASH, bounds_text, cell_value, count_or_figure, figure, load_text, size_text


def test_a_figure_keeps_three_significant_digits_below_a_thousand_and_separators_above() -> None:
    assert [figure(v) for v in (0, 0.012345, 1.2345, 123.45, 1234.5, -56.789)] == [
        "0", "0.0123", "1.23", "123", "1,234", "-56.8"]
    assert figure(None) == DASH


def test_a_table_cell_says_yes_no_a_dash_or_two_decimals() -> None:
    assert [cell_value(v) for v in (True, False, None, math.nan, 1234.5, 7, "ok")] == [
        "yes", "no", DASH, DASH, "1,234.50", "7", "ok"]


def test_counts_are_whole_numbers_and_small_figures_keep_their_digits() -> None:
    assert [count_or_figure(v) for v in (1200, 250.4, 3.14159, None, "n/a")] == ["1,200", "250", "3.14", DASH, DASH]


def test_sizes_loads_and_bounds_read_as_words() -> None:
    assert [size_text(v) for v in (512, 2_500, 3_400_000, None)] == ["512 B", "2.50 kB", "3.40 MB", DASH]
    assert load_text("concurrency", 4.0) == "concurrency 4" and load_text("rate", None) == "rate"
    assert bounds_text([10.0]) == "≤ 10 ms"
    assert bounds_text([10.0, 50.0, None]) == "≤ 10 ms, ≤ 50 ms and no bound"
