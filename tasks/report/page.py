"""The run's HTML report: one self-contained page published next to the results as `report.html`.

It is rendered only from the run's published files (REPORT_INPUTS and the manifest's run id, date, status
and provenance), at publish time and by `rebuild_report` from the store, through the same function: the
rebuilt page is byte-identical. No timestamp of the rendering, no unordered iteration, plots as inline SVG
(`tasks.report.plots`), no script, font or stylesheet from anywhere.

The page is `templates/report.html`: first what the night found (`lead.py`: regressions with their size and cause,
what is not settled, failed, contended, missing cells; or "no change found"), its budget line, its status; then its
sections, each a module that decides and computes
(numbers, classes, which words) and a template that writes it: the recommendation (`recommendation.py`), per model
the plots, costs and table of rows over each stack's best wire (`models.py`, `wires.py`), overload
(`overload.py`), the serving configurations and engines (`configs.py`), the wires, how each stack lives
(`lifecycle.py`), its features (`features.py`), the changes since the previous comparable run (`changes.py`), every
planned cell, the failures, the output checks and validation (`checks.py`), provenance (`provenance.py`). Units and
good directions come from `tasks.core.metrics.METRICS`; nothing here decides what is better.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from markupsafe import Markup

from tasks.core.results import frame_records, is_overload
from tasks.core.workloads import is_fixed_workload
from tasks.report.changes import changes_section
from tasks.report.checks import checks_section, failures_section, planned_cells_section, validation_section
from tasks.report.configs import configurations_section, engine_section, headline_rows
from tasks.report.contention import contention_summary
from tasks.report.coverage import aged, budget_line, coverage_section
from tasks.report.features import features_section
from tasks.report.lead import night_lead
from tasks.report.lifecycle import lifecycle_section
from tasks.report.models import model_section
from tasks.report.overload import overload_section
from tasks.report.provenance import provenance_section
from tasks.report.recommendation import recommendation_section
from tasks.report.record import record_section
from tasks.report.templating import render, stylesheet
from tasks.report.traces import trace_rows, traces_section
from tasks.report.trend import run_suite
from tasks.report.wires import best_wire_rows, wires_section

REPORT_INPUTS = ("results.parquet", "parity.json", "validation.json", "regressions.json", "trend.json", "plan.json",
                 "tuning.json", "record.json", "night.json", "carried.parquet")
STATUSES = ("ok", "contended", "failed", "skipped")


@dataclass(frozen=True)
class PublishedRun:
    """What the report is made of: the run's published objects, parsed, and its manifest's identity."""

    run: dict  # run_id, logical_date, status, provenance (as in the manifest)
    rows: list[dict]
    parity: list[dict]
    validation: dict
    regressions: dict
    trend: dict | None
    plan: dict | None
    tuning: dict | None = None
    record: dict | None = None  # each stack's record over the nights (record.json; runs before it have none)
    night: dict | None = None  # the night's budget (night.json; a run without a budget has none)
    carried: list[dict] = field(default_factory=list)  # deferred cells' rows from their last night (carried.parquet)

    @classmethod
    def from_files(cls, files: Mapping[str, bytes], run: dict) -> PublishedRun:
        """From the published bytes (name -> bytes); objects a run did not publish are None/empty."""
        import pandas as pd

        def obj(name: str, default):
            return json.loads(files[name]) if name in files else default

        rows = frame_records(pd.read_parquet(io.BytesIO(files["results.parquet"])))
        carried = frame_records(pd.read_parquet(io.BytesIO(files["carried.parquet"]))) \
            if "carried.parquet" in files else []
        return cls({k: run.get(k) for k in ("run_id", "logical_date", "status", "provenance")}, rows,
                   obj("parity.json", []), obj("validation.json", {}), obj("regressions.json", {}),
                   obj("trend.json", None), obj("plan.json", None), obj("tuning.json", None),
                   obj("record.json", None), obj("night.json", None), carried)


def rebuild_report(store, manifest: dict) -> str:
    """The report of a published run, rendered again from its objects in the store (through its manifest)."""
    files = {o["name"]: store.get(o["key"]) for o in manifest["objects"] if o["name"] in REPORT_INPUTS}
    return render_report(PublishedRun.from_files(files, manifest))



def _contents(models: list[str], overload: bool, record: bool = False, night: bool = False,
              traces: bool = False) -> list[tuple[str, str]]:
    """The page's contents: (anchor, title) of each section the navigation links."""
    return [("recommendation", "Recommendation"), *((("coverage", "Budget"),) if night else ()),
            *((f"model-{m}", m) for m in models), *((("traces", "Traces"),) if traces else ()),
            *((("overload", "Overload"),) if overload else ()), ("wires", "Wires"), ("lifecycle", "Lifecycle"),
            ("features", "Features"), ("changes", "Changes"), *((("record", "Record"),) if record else ()),
            ("cells", "Cells"), ("failures", "Failures"), ("checks", "Output checks"), ("provenance", "Provenance")]


def render_report(published: PublishedRun) -> str:
    """The page, from `published` alone (same input, same bytes)."""
    run, every_row = published.run, published.rows
    rows = [r for r in every_row if is_fixed_workload(r)]  # what the answers compare: a trace's rows answer apart
    # per stack: its best configuration when a search ran (else its default), over its best wire
    headline = best_wire_rows(headline_rows(rows))
    suite = run_suite(run.get("provenance") or {}, rows)
    config = (run.get("provenance") or {}).get("config") or (published.plan or {}).get("config") or {}
    bound = config.get("p99_bound_ms")
    host = (run.get("provenance") or {}).get("host") or (rows[0] if rows else {})
    models = sorted({str(r["model"]) for r in headline})
    aa_noise = ((published.regressions or {}).get("aa") or {}).get("noise") or {}
    carried = [r for r in aged(published.carried, published.night) if is_fixed_workload(r)]
    answers = best_wire_rows(headline_rows(rows + carried))
    sections: list[Markup] = [recommendation_section(answers, bound, aa_noise.get("throughput_rps")),
                              *([coverage_section(published.night, published.carried)] if published.night else [])]
    sections += [model_section(m, [r for r in headline if str(r["model"]) == m], bound) for m in models]
    sections += [*([traces_section(every_row, bound)] if trace_rows(every_row) else []), overload_section(headline),
                 configurations_section(rows, published.tuning), engine_section(rows), wires_section(rows),
                 lifecycle_section(every_row), features_section(every_row),
                 changes_section(published.trend, published.regressions),
                 *([record_section(published.record)] if published.record else []),
                 planned_cells_section(published.plan, every_row), failures_section(every_row),
                 checks_section(published.parity, every_row), validation_section(published.validation),
                 provenance_section(run, every_row, suite)]
    return str(render(
        "report.html", run_id=run["run_id"], date=str(run["logical_date"])[:10], status=run["status"],
        suite=suite or "–", planned=sum(len(s["cells"]) for s in (published.plan or {}).get("sessions", [])),
        rows=len(every_row), counts={s: sum(r.get("status") == s for r in every_row) for s in STATUSES},
        validated=bool(published.validation.get("success")), cpu_model=host.get("cpu_model"),
        cpu_count=host.get("cpu_count"), gpu_name=host.get("gpu_name"), contention=contention_summary(every_row),
        lead=night_lead(every_row, published.regressions, published.validation), budget=budget_line(published.night),
        contents=_contents(models, any(is_overload(r) for r in headline), bool(published.record),
                           bool(published.night), bool(trace_rows(every_row))), sections=sections,
        style=stylesheet("report.css")))
