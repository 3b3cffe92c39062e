"""The control cell: one stable cell measured every night, so "the host got slower" can be told apart from
"this stack got slower".

The control is named by the Param `control_cell` as `model/format/server` (default the MLP in ONNX on the
custom FastAPI service, the cheapest stack to start) at concurrency CONTROL_CONCURRENCY per generator process.
When the run's own cells include that model, format and server on the run's launcher, their closed-loop point
nearest that concurrency is the control and nothing is added; otherwise the plan gets one more session with
that single closed-loop cell. The control is a CPU cell: a run on `device=gpu` has none.

Why concurrency 4: the control must move when the host moves and not otherwise. At concurrency 1 the MLP's
throughput is one round trip after another, at the mercy of the scheduler's wake-ups: on the 2-core VM it
moved 15-24 % from night to night with nothing changed. At 4 the server's core is kept busy and the
throughput is its capacity, which is what a slower host changes: 3-5 % night to night.

Its row is an ordinary result row. The regression check judges the environment on its history (its drift against
its own baseline), and the night's duets start with its A/A duet, the duet's own noise on the host
(tasks/regress/night_duets.py).
"""

from __future__ import annotations

from typing import Any

from tasks.core.errors import ConfigError
from tasks.core.metrics import metrics_where
from tasks.core.results import POINT_KEY, SESSION_KEY
from tasks.core.workloads import row_workload

CONTROL_CONCURRENCY = 4  # requests in flight per generator process (see above)
CONTROL_SESSION_PREFIX = "control."
# What must match between a row and the control's name for the row to be the control: its server session's key.
CONTROL_MATCH = SESSION_KEY


def parse_control(value: str) -> tuple[str, str, str]:
    """`model/format/server` -> its three parts (names are checked by `RunConfig.check`)."""
    parts = value.split("/") if isinstance(value, str) else []
    if len(parts) != 3 or not all(parts):
        raise ConfigError("control_cell", value, "must be 'model/format/server' (e.g. 'mlp/onnx/custom') or null")
    return parts[0], parts[1], parts[2]


def control_cell(config: Any) -> dict | None:
    """The control's cell (without `cell_id` and protocol) for this run config, or None when it has none."""
    if not config.control_cell or config.device != "cpu":
        return None
    model, fmt, server = parse_control(config.control_cell)
    return {"model": model, "format": fmt, "server": server, "launcher": config.launcher, "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": float(CONTROL_CONCURRENCY * config.workers)}


def is_control_match(row: dict, control: dict) -> bool:
    return all(row.get(k) == control[k] for k in CONTROL_MATCH)


def control_row(rows: list[dict], control: dict | None) -> dict | None:
    """Tonight's control row: the ok closed-loop row of the control's model/format/server with the lowest
    batch size and the load nearest the control's (the lower of two as near; None when there is none)."""
    if control is None:
        return None
    candidates = [r for r in rows if is_control_match(r, control) and r.get("status") == "ok"
                  and r.get("mode") == "concurrency" and r.get("wire") in (None, "json")]
    return (min(candidates, key=lambda r: (r["batch_size"], abs(r["load"] - control["load"]), r["load"]))
            if candidates else None)


def covered(cells: list, control: dict) -> bool:
    """The run's own closed-loop cells (Cells) already measure the control's model, format and server on its
    launcher, over its REST JSON wire (the control's, every night)."""
    closed_loop = ("concurrency", "concurrency-sweep")
    return any(all(getattr(c, k) == control[k] for k in CONTROL_MATCH) and c.mode in closed_loop
               and getattr(c, "wire", None) in (None, "json") and not getattr(c, "skip", None) for c in cells)


DRIFT_METRICS = metrics_where("drift")  # the control's drift, as reported


def control_summary(control_name: str | None, control: dict | None, row: dict | None, records: list[dict]) -> dict:
    """The control's part of regressions.json: which cell it is and how far it moved tonight from its baseline."""
    if control is None:
        return {"name": control_name, "measured": False, "reason": "no control cell (Param control_cell is null, "
                                                                      "or the run is not on device cpu)"}
    if row is None:
        return {"name": control_name, "measured": False, "reason": "the control cell has no ok row tonight"}
    cell = {k: row_workload(row) if k == "workload" else row.get(k) for k in POINT_KEY}
    mine = [r for r in records if all(r.get(k) == cell[k] for k in cell if k != "protocol")]
    drift = {r["metric"]: {k: r.get(k) for k in ("current", "baseline", "change_pct", "change_ci_pct", "verdict",
                                                  "history_n")}
             for r in mine if r["metric"] in DRIFT_METRICS}
    return {"name": control_name, "measured": True, "cell": cell, "drift": drift}
