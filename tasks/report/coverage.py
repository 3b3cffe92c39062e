"""What a night with a budget (tasks/plan/night.py) shows of itself: the budget's use in its first paragraph, every
planned cell's coverage (measured tonight, or when it was last, or never; past its K), and the last figures of the
cells it deferred, carried from the night that measured them.

    carried = carried_rows(store, night["deferred"])  # at publish time: `carried.parquet` of tonight's run folder
    line = budget_line(night)                          # "The night took 58.0 min of its 60.0 min budget; ..."
    section = coverage_section(night, carried)         # the report's coverage section

A carried row is the row its own night published, with its own `run_id` and `logical_date`: the report says of each
figure which night it is from, and an answer that compares figures of different nights says so
(tasks/report/recommend.py).
"""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.results import frame_records
from tasks.plan.cells import Cell, rows_of
from tasks.report.formatting import REASON_CHARS
from tasks.report.templating import render
from tasks.store.history import find_run, read_results
from tasks.store.s3 import S3Store


def carried_rows(store: S3Store, deferred: list[dict]) -> list[dict]:
    """The rows each deferred cell's last measured night published for it (none for a cell never measured, or
    whose night is gone from the store)."""
    by_run: dict[str, list[dict]] = {}
    for item in deferred:
        if item.get("last_run_id") and item.get("cell"):
            by_run.setdefault(item["last_run_id"], []).append(item)
    carried = []
    for run_id, items in sorted(by_run.items()):
        try:
            rows = frame_records(read_results(store, find_run(store, run_id)))
        except Exception:  # noqa: BLE001 - a night deleted from the store: its cells carry no figure, and say so
            continue
        for item in items:
            carried += rows_of(Cell.from_dict(item["cell"]), rows)
    return carried


def aged(carried: list[dict], night: dict | None) -> list[dict]:
    """The carried rows, each with the nights since it was measured (`nights_ago`, from its cell's deferral): what
    the recommendation ranks a deferred cell on, and says of."""
    out = []
    for item in (night or {}).get("deferred") or []:
        if item.get("cell") and item.get("last_run_id"):
            out += [{**row, "nights_ago": item.get("age")} for row in rows_of(Cell.from_dict(item["cell"]), carried)
                    if row.get("run_id") == item["last_run_id"]]
    return out


def minutes(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds / 60:.1f} min"


def budget_line(night: dict | None) -> str:
    """The report's first paragraph on the budget: how long the night took of it, what was deferred, and K."""
    if not night:
        return ""
    coverage = night.get("coverage") or {}
    elapsed, budget = night.get("elapsed_s"), night.get("budget_s")
    over = ""
    if elapsed is not None and budget:
        share = 100.0 * elapsed / budget
        over = f" ({share:.0f} %{', over its budget' if elapsed > budget else ''})"
    return f"The night took {minutes(elapsed)} of its {minutes(budget)} budget{over}; {coverage.get('note', '')}."


def ago(item: dict) -> str:
    """"measured 2 nights ago", or "never measured" (a deferred cell of night.json)."""
    age = item.get("age")
    if age is None or not item.get("last_run_id"):
        return "never measured"
    return f"measured {age} night{'s' if age != 1 else ''} ago"


def coverage_view(night: dict, carried: list[dict]) -> dict:
    """The coverage section's numbers: each stage planned against actual, the deferred cells by class with their
    last night and reason, and how many carried rows stand for them."""
    rows = carried
    stages = [{"stage": name, "planned": minutes(s.get("planned_s")), "actual": minutes(s.get("actual_s")),
               "source": s.get("source") or ""} for name, s in (night.get("stages") or {}).items()]
    deferred = sorted(night.get("deferred") or [], key=lambda d: (not d.get("overdue"), str(d.get("class")),
                                                                  str(d.get("cell_id"))))
    listed = [{"cell_id": d["cell_id"], "class": d.get("class") or "–", "ago": ago(d),
               "date": str(d.get("last_logical_date") or "")[:10], "overdue": bool(d.get("overdue")),
               "reason": str(d.get("reason") or "")[:REASON_CHARS]} for d in deferred]
    classes = night.get("classes") or {}
    later = {d["cell_id"] for d in deferred}
    by_class = []
    for klass in dict.fromkeys(classes.values()):
        mine = [c for c, k in classes.items() if k == klass]
        by_class.append({"class": klass, "planned": len(mine), "deferred": sum(c in later for c in mine)})
    return {"stages": stages, "deferred": listed, "by_class": by_class, "line": budget_line(night),
            "k": (night.get("coverage") or {}).get("K"), "changed": len(night.get("changed_cells") or {}),
            "answers": len(night.get("answer_cells") or []), "carried": len(rows)}


def coverage_section(night: dict | None, carried: list[dict]) -> Markup:
    """The report's section on the night's budget and coverage (empty for a night without a budget)."""
    if not night:
        return Markup("")
    return render("coverage.html", **coverage_view(night, carried))
