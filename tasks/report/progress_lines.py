"""What each pipeline step's progress line says when it ends (tasks/core/progress.py `stage`): its key figure, read
from the step's own output. The server sessions, load points, looks, pairs and rounds inside the steps have lines of
their own (tasks/measure)."""

from __future__ import annotations


def plan_figure(planned: dict) -> str:
    sessions = planned.get("sessions") or []
    cells = sum(len(s.get("cells") or []) for s in sessions)
    deferred = len((planned.get("night") or {}).get("deferred") or [])
    return f"{len(sessions)} server sessions, {cells} cells" + (f", {deferred} deferred" if deferred else "")


def conversion_figure(out: dict) -> str:
    what = f"{out.get('model')}/{out.get('format')}"
    if out.get("skipped"):
        return f"{what} skipped"
    if out.get("error"):
        return f"{what} failed"
    return f"{what} {'from the artifact cache' if out.get('cache_hit') else 'converted'}"


def collected_figure(collected: dict) -> str:
    rows = collected.get("rows") or []
    return f"{sum(r.get('status') == 'ok' for r in rows)} of {len(rows)} rows ok"


def validation_figure(validation: dict) -> str:
    return "passed" if validation.get("success") else "failed"


def check_figure(regressions: dict) -> str:
    return f"{len(regressions.get('duets') or [])} changed cells to measure beside their reference"


def regress_figure(regressions: dict) -> str:
    counts = [f"{regressions.get(k) or 0} {k.replace('_', ' ')}" for k in ("regressions", "not_settled", "left")]
    return ", ".join(counts)


def publish_figure(summary: dict) -> str:
    return f"status {summary.get('status')}, {summary.get('manifest') or 'kept for tasks.cli publish'}"
