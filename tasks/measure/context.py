"""What every server life of one planned session is measured with (`SessionContext`), the server life being
measured (`ServerLife`), and the start of each row: the results contract's columns with the run's identity, the
cell's key and its wire (`base_row`), or a row not measured with its reason (`not_measured`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.convert import Artifact
from tasks.core.errors import ConfigError
from tasks.core.results import CELL_KEY, DEFAULT_CONFIG_ID, empty_row
from tasks.core.spec import ModelSpec
from tasks.core.workloads import TRACE_MODE, TRACE_MODES
from tasks.loadgen.settings import LoadSettings
from tasks.loadgen.trace import TraceReplay, replay_of
from tasks.measure.bounds import run_bounds
from tasks.measure.lifecycle import ServerLifeProfile
from tasks.plan.cells import Cell, Session
from tasks.plan.config import RunConfig
from tasks.plan.night import NightClock
from tasks.serve.budget import ServerBudget
from tasks.serve.servers import get_server
from tasks.serve.session import LiveServer


def base_row(run: dict, cell: Cell) -> dict:
    """A row of the results contract for `cell`, with the run's identity, provenance and measuring host."""
    row = empty_row()
    row.update({k: run[k] for k in ("run_id", "logical_date", "started_at", "schema_version")})
    row.update(run["code"])
    row.update(run["host"])
    row.update({k: DEFAULT_CONFIG_ID if k == "config_id" else getattr(cell, k) for k in CELL_KEY})
    row["wire"] = cell_wire(cell)
    return row


def cell_wire(cell: Cell) -> str:
    """The cell's wire; a cell of a plan written before wires: its protocol's, on its server (json when unknown)."""
    if cell.wire:
        return cell.wire
    try:
        return get_server(cell.server).wire_of(cell.protocol) or "json"
    except ConfigError:
        return "json"


def deferred_cell(cell: Cell, session_id: str, reason: str) -> dict:
    """A cell the night's clock left for a later night: no row, this record (tasks/plan/night.py `deferred`)."""
    return {"cell_id": cell.cell_id, "session_id": session_id, "model": cell.model, "format": cell.format,
            "server": cell.server, "reason": reason, "when": "measure", "cell": cell.to_dict()}


def not_measured(run: dict, cell: Cell, status: str, reason: str, **extra: object) -> dict:
    row = base_row(run, cell)
    row.update(status=status, reason=reason[:4000], **extra)
    return row


@dataclass(frozen=True)
class SessionContext:
    """What every server life of one planned session is measured with: the session, the run as this measuring host
    sees it (`host_run`), the run's configuration, the server's CPU/memory budget, and what is served."""

    session: Session
    run: dict
    config: RunConfig
    budget: ServerBudget
    artifact: Artifact
    spec: ModelSpec
    clock: NightClock | None = None  # the night's measuring deadline (tasks/plan/night.py); None: no budget
    position: dict = field(default_factory=dict)  # {"cell", "cells"}: where the server life is, for progress lines

    def left(self) -> str:
        """"cell 3 of 12 of the session": what the progress lines say is left."""
        cell, cells = self.position.get("cell"), self.position.get("cells")
        return f"cell {cell} of {cells} of the session" if cell and cells else ""

    def night_end_s(self) -> float | None:
        return self.clock.end_s if self.clock is not None else None

    def load_settings(self, cell: Cell, mode: str | None = None, load: float | None = None) -> LoadSettings:
        """The load point of `cell` (at `mode` and `load` when given: a sweep's first point) under the run's
        timing, stability, timeout and arrival Params; a trace's point (mode `trace`, `load` its speed) is open loop
        for the replay's length (`TraceReplay.settings`)."""
        config = self.config
        mode, load = mode or cell.mode, cell.load if load is None else load
        base = LoadSettings(
            mode="rate" if mode == TRACE_MODE else mode, load=1.0 if mode == TRACE_MODE else load,
            batch_size=cell.batch_size, duration_s=config.duration_s, warmup_s=config.warmup_s,
            window_s=config.window_s, stability_pct=config.stability_pct, request_timeout_s=config.request_timeout_s,
            stop_when_stable=config.stop_when_stable, min_windows=config.min_windows, workers=config.workers,
            arrival=config.arrival, bounds_ms=run_bounds(config),
        )
        return self.trace_replay(cell, load).settings(base) if mode == TRACE_MODE else base

    @staticmethod
    def trace_replay(cell: Cell, speed: float | None = None) -> TraceReplay | None:
        """The replay a trace cell's point sends (at `speed`, default the cell's `load`); None for other cells."""
        if cell.mode not in TRACE_MODES:
            return None
        return replay_of(cell.workload, cell.load if speed is None else speed)


@dataclass
class ServerLife:
    """One server life being measured: the live server, what its rows say was served, its session's timeline."""

    live: LiveServer
    served: dict
    timeline: dict
    inputs: dict = field(default_factory=dict)  # what this life serves with (tasks/measure/inputs.py), per protocol
    profile: ServerLifeProfile | None = None  # how the current server life lives (tasks/measure/lifecycle.py)
    best_holding_rps: float = 0.0  # the fastest ok point of this life where the run's bound holds (lengthening)
