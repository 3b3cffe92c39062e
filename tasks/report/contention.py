"""The report's first words on the host: how many rows were contended and by how much, or how quiet it was; and a
row's host state in one line (the hover text of the table of rows)."""

from __future__ import annotations

from markupsafe import Markup

from tasks.core.metrics import number
from tasks.report.formatting import format_value
from tasks.report.templating import render

HOST_STATE_FIGURES = (("neighbour_cpu_pct", "other work on the host"), ("steal_pct", "of it steal"),
                      ("server_cpus_neighbour_pct", "other work on the server's CPUs"),
                      ("server_cpu_share_pct", "server CPU share of its budget"),
                      ("server_cpu_wait_pct", "server run-queue wait"), ("host_cpu_pressure_pct", "host CPU pressure"))


def host_state_text(row: dict) -> str:
    """The host's state during a row's point in one line (the cells' hover text): what other work took, the
    server's share and wait, steal, pressure, load."""
    parts = []
    for name, text in HOST_STATE_FIGURES:
        value = number(row.get(name))
        parts.append(f"{text} {'unknown' if value is None else format_value(value) + ' %'}")
    load = number(row.get("load_avg_1m"))
    parts.append(f"load average {'unknown' if load is None else format_value(load)}")
    return "; ".join(parts)


def _sorted_values(group: list[dict], name: str) -> list[float]:
    return sorted(v for v in (number(r.get(name)) for r in group) if v is not None)


def contention_summary(rows: list[dict]) -> Markup:
    """How many rows were contended (with what other work took, and the least CPU their servers got), or how much
    other work there was when none was; a line saying so for rows without a host state."""
    measured = [r for r in rows if number(r.get("neighbour_cpu_pct")) is not None]
    contended = [r for r in rows if r.get("status") == "contended"]
    group = contended or measured
    other = _sorted_values(group, "neighbour_cpu_pct")
    share = _sorted_values(contended, "server_cpu_share_pct")
    steal = _sorted_values(measured, "steal_pct")
    return render("contention.html", measured=bool(measured), contended=len(contended), rows=len(rows),
                  other_median=f"{other[len(other) // 2]:.0f}" if other else None,
                  other_max=f"{other[-1]:.0f}" if other else None, share_min=f"{share[0]:.0f}" if share else None,
                  steal_max=f"{steal[-1]:.0f}" if steal else None,
                  remeasured=sum(bool(r.get("remeasured")) for r in rows))
