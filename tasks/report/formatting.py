"""How the report writes a value: a figure for people, a table's cell, a size, a metric's label and unit, a load
point, the p99 bounds of an answer.

Every module of `tasks.report` formats through here, so one value reads the same in every section, and the
templates call `label` and `unit` from here (`tasks.report.templating`). The values are plain text: the templates
escape what they write (Jinja's autoescaping, markupsafe's `escape`), so nothing is escaped here.
"""

from __future__ import annotations

import math

from tasks.core.metrics import METRICS, number

DASH = "–"  # a value the run did not record
REASON_CHARS = 2000  # of a reason in the failures and regressions tables
REASON_IN_TABLE_CHARS = 300  # of a reason under a status in a table of rows


def format_value(value: float) -> str:
    """A figure for people: 3 significant digits below 1,000, whole numbers with separators above."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def figure(value: float | None) -> str:
    """`format_value`, or a dash for a value not recorded."""
    return DASH if value is None else format_value(float(value))


def cell_value(value: object) -> str:
    """A value in a table of rows: yes/no, a dash when missing (None, NaN), floats with two decimals."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or (isinstance(value, float) and value != value):
        return DASH
    return f"{value:,.2f}" if isinstance(value, float) else str(value)


def latency_text(row: dict, name: str) -> str:
    """A percentile of a row as a table cell: its figure, or "≥ X" where its requests were too few for it and only
    a lower bound was published (`<name>_at_least`, schema 1.8)."""
    at_least = number(row.get(f"{name}_at_least"))
    if number(row.get(name)) is None and at_least is not None:
        return f"≥ {cell_value(at_least)}"
    return cell_value(number(row.get(name)))


def count_or_figure(value: object) -> str:
    """A count (an int) or a figure of 100 or more as a whole number with separators, else `format_value`."""
    found = number(value)
    if found is None:
        return DASH
    if isinstance(value, int) or abs(found) >= 100:
        return f"{found:,.0f}"
    return format_value(found)


def size_text(value: float | None) -> str:
    """A payload size in bytes: B, kB or MB (decimal)."""
    if value is None:
        return DASH
    for unit_name, size in (("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.2f} {unit_name}"
    return f"{value:.0f} B"


def unit(metric: str) -> str:
    return METRICS[metric].unit


def label(metric: str) -> str:
    return METRICS[metric].label


def load_text(mode: object, load: object) -> str:
    """A load point: "concurrency 4", "rate 500"."""
    value, mode = number(load), mode or "load"  # records older than their mode say only the load
    return f"{mode} {value:g}" if value is not None else str(mode)


def bounds_text(bounds: list[float | None]) -> str:
    """"≤ 10 ms, ≤ 50 ms and no bound": the p99 bounds one answer holds for."""
    texts = ["no bound" if b is None else f"≤ {b:,g} ms" for b in bounds]
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]
