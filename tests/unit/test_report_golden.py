"""The report of a recorded run, byte for byte: the page rendered from `tests/data/report_run/` (a run's published
objects: its rows, parity, validation, regressions, trend, plan and tuning, and its manifest's identity) must equal
the committed `report.html`; the runs page listing made here must equal `runs.html`.

The recorded run touches every section: two models, several stacks, wires and batch sizes, a tuned configuration,
prices, overload bursts (one whose server died), a contended, a failed and a skipped cell, the control cell,
regressions measured side by side, the trend, a failed validation and the host check. A change that alters the page
on purpose re-records it: `UPDATE_GOLDEN=1 pytest tests/test_report_golden.py`, and the diff goes in the commit.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path

import pytest

from tasks.core.results import to_frame, to_parquet_bytes
from tasks.report.page import REPORT_INPUTS, PublishedRun, render_report
from tasks.report.run_index import RunSummary, render_run_list

RECORDED = Path(__file__).parents[1] / "data" / "report_run"
DIFF_LINES = 80


def recorded_run() -> PublishedRun:
    """The recorded run as the report reads it: its rows through results.parquet, like a published run's."""
    files = {"results.parquet": to_parquet_bytes(to_frame(json.loads((RECORDED / "rows.json").read_text())))}
    files.update({name: (RECORDED / name).read_bytes() for name in REPORT_INPUTS if (RECORDED / name).exists()})
    return PublishedRun.from_files(files, json.loads((RECORDED / "run.json").read_text()))


def _lines(page: str) -> list[str]:
    """The page cut after each tag, so a diff shows the elements that differ, not whole sections."""
    return re.sub(r">", ">\n", page).splitlines(keepends=True)


def assert_golden(page: str, name: str) -> None:
    path = RECORDED / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(page, encoding="utf-8", newline="")
    with path.open(encoding="utf-8", newline="") as file:
        expected = file.read()
    if page != expected:
        diff = list(difflib.unified_diff(_lines(expected), _lines(page), f"{name} (golden)", f"{name} (rendered)"))
        pytest.fail(f"{name} differs from the golden page ({len(diff)} diff lines; UPDATE_GOLDEN=1 re-records it):\n"
                    + "".join(diff[:DIFF_LINES]), pytrace=False)


def test_the_recorded_runs_report_is_the_golden_page():
    page = render_report(recorded_run())
    assert_golden(page, "report.html")
    for section in ("recommendation", "overload", "configurations", "engines", "wires", "lifecycle", "features",
                    "changes", "cells", "failures", "checks", "validation", "provenance"):
        assert f"<h2 id={section}>" in page  # the recorded run reaches every section


def test_the_runs_page_is_the_golden_page():
    runs = [RunSummary("scheduled__2026-11-29T02:00:00+00:00", "2026-11-29T02:00:00+00:00", "partial",
                       "2026-11-29T03:41:07.123456+00:00", "nightly", 1,
                       "runs/dt=2026-11-29/run=scheduled__2026-11-29T02_00_00_00_00/report.html"),
            RunSummary("manual__2026-11-28T09:12:00 <'try'>", "2026-11-28T09:12:00+00:00", "failed",
                       "2026-11-28T09:30:00+00:00", None, None, None),
            RunSummary("scheduled__2026-11-28T02:00:00+00:00", "2026-11-28T02:00:00+00:00", "complete",
                       "2026-11-28T03:40:00+00:00", "smoke, \"nightly\"", 0,
                       "runs/dt=2026-11-28/run=scheduled__2026-11-28T02_00_00_00_00/report.html")]
    assert_golden(render_run_list(runs, "s3://serving-eval/prod & test"), "runs.html")
    assert_golden(render_run_list([], "s3://serving-eval/empty"), "runs-empty.html")
