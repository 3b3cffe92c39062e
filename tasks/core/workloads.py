"""What a row was sent (the results contract's `workload`, schema 1.9): the one fixed request, or a replayed trace.

The fixed request is the one seeded request at a constant concurrency or rate (every row before 1.9). A trace's
workload is its label, `trace:<name>@<digest>` (tasks/loadgen/trace.py), and its rows have mode `trace`, `load`
the replay's speed. A trace's rows answer their own question: the answers, the cost table and the regression duets
compare the fixed request's rows (tasks/report/traces.py reads the rest).
"""

from __future__ import annotations

from typing import Any

FIXED_WORKLOAD = "fixed"
TRACE_MODE = "trace"  # the `mode` of a trace replay's row: its `load` the speed factor, 1 as recorded
TRACE_MODES = (TRACE_MODE, "trace-search")  # a planned trace cell's modes: one replay, or the search over speeds


def row_workload(row: dict[str, Any]) -> str:
    """The workload a row (or a planned cell's fields) was measured under; rows before 1.9 read `fixed`."""
    return str(row.get("workload") or FIXED_WORKLOAD)


def trace_label_parts(workload: str | None) -> tuple[str, str] | None:
    """(name, digest) of a trace's label `trace:<name>@<digest>` (digest "" where it has none); None otherwise."""
    kind, _, rest = str(workload or "").partition(":")
    name, _, digest = rest.partition("@")
    return (name, digest) if kind == "trace" and name else None


def workload_tag(workload: str | None) -> str:
    """A workload's short name in cell ids: "" for the fixed request, a trace's name (`trace:<name>@<digest>`)."""
    if not workload or workload == FIXED_WORKLOAD:
        return ""
    parts = trace_label_parts(workload)
    return parts[0] if parts else workload


def is_fixed_workload(row: dict[str, Any]) -> bool:
    """Measured with the one fixed request: what the answers, the cost table and the regression duets compare."""
    return row_workload(row) == FIXED_WORKLOAD
