"""What a night found, first: the report's first paragraph and the first lines `make demo` and `tasks.cli run`
print, before the budget line and the recommendation.

    lead = night_lead(rows, regressions, validation)    # from the run's published objects
    lead.headline    # "2 regressions, 1 change not settled, 1 failed cell; 40 cells judged, 7 on their first night."
    lead.items       # one line per finding, regressions first, each with its size, interval and cause
    lines = published_lines(store, manifest)            # the lead and the budget line of a published night

The findings are the message's (tasks/report/findings.py): regressions and improvements with their size and
interval, changes not settled, failed, contended, missing and overdue cells, failed validation. A cell the night's
budget deferred within its coverage K is not a finding: the budget line that follows counts it. Without a finding
of a change the headline says "no change found" with how many cells the regression check judged, so a quiet night
reads as judged, not as unexamined.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tasks.core.results import frame_records
from tasks.report.coverage import budget_line
from tasks.report.findings import night_findings, record_where
from tasks.store.history import read_results
from tasks.store.s3 import S3Store

LEAD_ITEMS = 12  # findings listed in the lead; the rest are counted, and listed in their sections
LEAD_ORDER = ("regression", "not_settled", "improvement", "validation", "failed", "contended", "missing", "overdue",
              "removed")
NAMES = {"regression": ("regression", "regressions"), "not_settled": ("change not settled", "changes not settled"),
         "improvement": ("improvement", "improvements"), "validation": ("failed validation", "failed validations"),
         "failed": ("failed cell", "failed cells"), "contended": ("contended cell", "contended cells"),
         "missing": ("missing cell", "missing cells"), "overdue": ("overdue cell", "overdue cells"),
         "removed": ("cell removed from the plan", "cells removed from the plan")}
CHANGE_KINDS = ("regression", "not_settled", "improvement")


@dataclass(frozen=True)
class Lead:
    """The night's findings in a sentence and a list: `items` the first LEAD_ITEMS findings, `more` how many else."""

    headline: str
    items: tuple[str, ...]
    more: int

    def lines(self) -> list[str]:
        """For a terminal: the headline, then each item indented."""
        out = [self.headline, *(f"  {item}" for item in self.items)]
        if self.more:
            out.append(f"  ... and {self.more} more (the report's sections list them all)")
        return out


def judged_cells(regressions: dict) -> tuple[int, int]:
    """(cells the regression check judged against a reference night, cells on their first night): an unchanged
    cell's `inputs` record, a changed cell's duet records (one cell, several metrics)."""
    records = regressions.get("records") or []
    unchanged = sum(r.get("kind") == "inputs" and r.get("verdict") == "no_change" for r in records)
    changed = {record_where(r) for r in records if r.get("kind") == "duet"}
    first = sum(r.get("kind") == "inputs" and r.get("verdict") == "no_history" for r in records)
    return unchanged + len(changed), first


def _count(kind: str, n: int) -> str:
    one, many = NAMES.get(kind, (kind, kind))
    return f"{n} {one if n == 1 else many}"


def night_lead(rows: list[dict], regressions: dict, validation: dict) -> Lead:
    """The lead of a night from its rows, regressions.json and validation.json."""
    findings = sorted(night_findings(rows, regressions or {}, validation or {}),
                      key=lambda f: LEAD_ORDER.index(f.kind) if f.kind in LEAD_ORDER else len(LEAD_ORDER))
    counts = Counter(f.kind for f in findings)
    judged, first = judged_cells(regressions or {})
    scope = f"{judged} cell{'s' if judged != 1 else ''} judged against {'its' if judged == 1 else 'their'} " \
            "reference night"
    if first:
        scope += f", {first} on {'its' if first == 1 else 'their'} first night"
    parts = [_count(k, counts[k]) for k in LEAD_ORDER if counts[k]]
    if not any(counts[k] for k in CHANGE_KINDS):
        headline = f"No change found: {scope}" + (f"; {', '.join(parts)}" if parts else "") + "."
    else:
        headline = f"{', '.join(parts)}; {scope}."
    headline = headline[0].upper() + headline[1:]
    items = tuple(f.text() for f in findings[:LEAD_ITEMS])
    return Lead(headline, items, max(0, len(findings) - LEAD_ITEMS))


def published_lines(store: S3Store, manifest: dict) -> list[str]:
    """What a command prints first about a published night: its lead, then its budget line (a budgeted night)."""
    names = {o["name"]: o["key"] for o in manifest.get("objects", [])}

    def obj(name: str) -> dict:
        return store.get_json(names[name]) if name in names else {}

    lead = night_lead(frame_records(read_results(store, manifest)), obj("regressions.json"), obj("validation.json"))
    budget = budget_line(obj("night.json"))
    return lead.lines() + ([budget] if budget else [])
