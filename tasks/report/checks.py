"""The report's account of every cell and check: the planned cells with their rows, the contended, failed and
skipped cells with their reasons, parity of the converted artifacts and the served outputs, and validation."""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.metrics import number
from tasks.plan.cells import Cell, rows_of
from tasks.report.formatting import REASON_CHARS, format_value, load_text
from tasks.report.templating import render
from tasks.report.wires import row_wire


def planned_cells_section(plan: dict | None, rows: list[dict]) -> Markup:
    """Every planned cell with its protocol, its rows and their statuses (none without plan.json)."""
    cells = []
    for session in (plan or {}).get("sessions", []):
        for cell in session["cells"]:
            found = rows_of(Cell.from_dict(cell), rows)
            statuses = ", ".join(f"{s} {sum(r['status'] == s for r in found)}"
                                 for s in sorted({r["status"] for r in found}))
            cells.append({"cell_id": cell["cell_id"], "protocol": cell.get("protocol") or "", "rows": len(found),
                          "statuses": statuses or "no row"})
    return render("cells.html", plan=bool(plan), cells=cells)


def failures_section(rows: list[dict]) -> Markup:
    """The rows that are not ok, with their reasons."""
    bad = sorted((r for r in rows if r.get("status") != "ok"),
                 key=lambda r: (str(r["status"]), str(r["model"]), str(r["server"]), str(r["format"]),
                                number(r.get("load")) or 0.0))
    return render("failures.html", failures=[
        {"cell": f"{r['model']}/{r['format']}/{r['server']} {row_wire(r)} b{r.get('batch_size')} "
                 f"{load_text(r['mode'], r['load'])}", "status": r["status"],
         "reason": str(r.get("reason") or "")[:REASON_CHARS]} for r in bad])


def _parity(record: dict) -> dict:
    if record.get("max_err_ratio") is not None:
        err, rule = format_value(float(record["max_err_ratio"])), "|a-b| / (atol + rtol·|b|), pass ≤ 1"
    else:
        err = f"{float(record['max_abs_err']):.3g}"
        rule = f"max |a-b| ≤ atol {float(record['atol']):g} (rtol {record.get('rtol', '–')})"
    return {"model": record["model"], "format": record["format"], "reference": record.get("reference") or "–",
            "err": err, "rule": rule, "passed": bool(record.get("passed"))}


def _served(rows: list[dict]) -> list[dict]:
    """Per server session (model, format, server): the worst served-output error ratio of its rows."""
    sessions: dict[tuple, list[float]] = {}
    for r in rows:
        ratios = sessions.setdefault((str(r["model"]), str(r["format"]), str(r["server"])), [])
        if number(r.get("served_err_ratio")) is not None:
            ratios.append(number(r["served_err_ratio"]))
    if not any(sessions.values()):
        return []
    return [{"model": model, "format": fmt, "server": server, "worst": None if not ratios else max(ratios)}
            for (model, fmt, server), ratios in sorted(sessions.items())]


def checks_section(parity: list[dict], rows: list[dict]) -> Markup:
    """Parity of the converted artifacts, then the served outputs checked before load."""
    served = _served(rows)
    for session in served:
        worst = session["worst"]
        session.update(worst_text="–" if worst is None else format_value(worst),
                       passed=None if worst is None else worst <= 1)
    return render("checks.html", parity=[_parity(p) for p in sorted(parity, key=lambda p: (str(p["model"]),
                                                                                            str(p["format"])))],
                  served=served)


def validation_section(validation: dict) -> Markup:
    return render("validation.html", success=bool(validation.get("success")),
                  failed=validation.get("failed_expectations") or [])
