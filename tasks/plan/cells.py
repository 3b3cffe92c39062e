"""The plan: a run config expanded into conversions and server sessions, each session holding its cells.

A `Cell` is one (model, format, server, launcher, device, batch size, mode, load) point over one wire (`wire`:
json, binary or grpc, Param `protocols`; `protocol`: the server's codec for it). `best` plans every wire the
server speaks (the report picks the fastest from the figures); a wire asked for by name that the server lacks is
planned as a cell with `skip`, its reason, and becomes a `skipped` row, never another wire. A `Session` is one
server life: start, every load point of that server on that artifact over all its wires, stop. Both are frozen:
the plan step makes them once, `plan.json` (and XCom) carries them as dicts, and every later step reads them back
with `from_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tasks.convert import check_conversion
from tasks.convert.graph import reachable_formats
from tasks.core.errors import ConfigError
from tasks.core.results import DEFAULT_CONFIG_ID, OVERLOAD_MODE, SESSION_KEY, WIRES, cell_key, row_protocol
from tasks.core.spec import load_spec
from tasks.core.workloads import FIXED_WORKLOAD, TRACE_MODE, row_workload, workload_tag
from tasks.loadgen.overload import OVERLOAD_FACTORS
from tasks.plan.config import BEST, RunConfig
from tasks.plan.control import CONTROL_SESSION_PREFIX, control_cell, covered
from tasks.plan.hosts import assign_hosts
from tasks.plan.tune import estimate_config_s
from tasks.serve.servers import get_server

# An overload cell (Param overload) is one burst at `load` times the capacity the session's earlier points measured
# (tasks/loadgen/overload.py); one row, mode `overload`.
# A sweep cell (Params concurrency_sweep=doubling, rate_search, trace_search) is one planned cell whose rows are the
# points it measured, each with the point's mode and load; its own `load` is the sweep's bound (the largest
# concurrency) or start (the smallest rate, the slowest speed). How many points it runs is only known after it ran.
# A trace cell (Param traces) replays one trace at `load` times its recorded speed, its `workload` the trace's label.
SWEEP_MODES = {"concurrency-sweep": "concurrency", "rate-search": "rate", "trace-search": TRACE_MODE}
SWEEP_GROUP = (*SESSION_KEY, "batch_size")


def cell_id(cell: Any) -> str:
    """A cell's name in logs, timelines and exclusions: model.format.server.launcher.device.b<batch>.<mode><load>,
    then .<wire> for a wire other than json (`cell` a Cell or a row; rows before 1.5 have no wire: no suffix), then
    .<trace name> for a workload other than the fixed request (tasks/core/results.py `workload_tag`)."""
    get = cell.get if isinstance(cell, dict) else lambda k: getattr(cell, k, None)
    load = get("load")
    load_txt = str(int(load)) if float(load).is_integer() else f"{load:g}"
    wire, tag = get("wire"), workload_tag(get("workload"))
    return (f"{get('model')}.{get('format')}.{get('server')}.{get('launcher')}.{get('device')}"
            f".b{get('batch_size')}.{get('mode')}{load_txt}{f'.{wire}' if wire and wire != 'json' else ''}"
            f"{f'.{tag}' if tag else ''}")


@dataclass(frozen=True)
class Cell:
    """One planned load point (or one sweep, `mode` in SWEEP_MODES) of one stack."""

    model: str
    format: str
    server: str
    launcher: str
    device: str
    batch_size: int
    mode: str
    load: float
    protocol: str | None = None  # the codec; a cell skipped for want of its wire carries the wire's name
    wire: str | None = None  # json | binary | grpc (None: a plan written before wires, its server's REST JSON)
    skip: str | None = None  # why the cell is not measured (its server lacks the wire): a `skipped` row
    workload: str = FIXED_WORKLOAD  # what is sent (results `workload`): the fixed request, or a trace's label
    cell_id: str = ""  # cell_id(self) unless given (a sweep's point: the sweep's id and "@<load>")

    def __post_init__(self) -> None:
        object.__setattr__(self, "load", float(self.load))
        if not self.cell_id:
            object.__setattr__(self, "cell_id", cell_id(self))

    @property
    def is_sweep(self) -> bool:
        return self.mode in SWEEP_MODES

    @property
    def key(self) -> tuple:
        """The results contract's cell key of this cell's (untuned) rows."""
        return cell_key({**asdict(self), "config_id": DEFAULT_CONFIG_ID})

    def point(self, mode: str, load: float) -> Cell:
        """One point a sweep measured: the sweep's cell at that mode and load."""
        return replace(self, mode=mode, load=float(load), cell_id=f"{self.cell_id}@{float(load):g}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Cell:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Session:
    """One server life on one artifact: its cells in the order they are measured, the host it is planned on."""

    session_id: str
    model: str
    format: str
    server: str
    cells: tuple[Cell, ...]
    role: str | None = None  # "control": the control cell the plan added
    host: str | None = None
    extra: dict = field(default_factory=dict)  # what another step attached to the planned session

    @property
    def launcher(self) -> str:
        return self.cells[0].launcher

    @property
    def device(self) -> str:
        return self.cells[0].device

    def to_dict(self) -> dict:
        data = {"session_id": self.session_id, "model": self.model, "format": self.format, "server": self.server,
                "cells": [c.to_dict() for c in self.cells], **self.extra}
        data.update({k: v for k, v in (("role", self.role), ("host", self.host)) if v is not None})
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Session:
        known = {"session_id", "model", "format", "server", "cells", "role", "host"}
        cells = tuple(Cell.from_dict(c) for c in data["cells"])
        first = cells[0] if cells else None  # what a session serves is its cells' model, format and server
        return cls(data["session_id"], data.get("model") or first.model, data.get("format") or first.format,
                   data.get("server") or first.server, cells, data.get("role"), data.get("host"),
                   {k: v for k, v in data.items() if k not in known})


def rows_of(cell: Cell, rows: list[dict]) -> list[dict]:
    """The rows a planned cell produced: its own row, or a sweep's rows (same model, format, server, launcher,
    device, batch size and protocol, with the sweep's mode or its points' mode)."""
    protocol = row_protocol(asdict(cell))
    if not cell.is_sweep:
        return [r for r in rows if all(r[k] == getattr(cell, k) for k in ("model", "format", "server", "batch_size",
                                                                          "mode", "load"))
                and row_protocol(r) == protocol and row_workload(r) == cell.workload]
    modes = (cell.mode, SWEEP_MODES[cell.mode])
    return [r for r in rows if r["mode"] in modes and all(r[k] == getattr(cell, k) for k in SWEEP_GROUP)
            and row_protocol(r) == protocol and row_workload(r) == cell.workload]


def expected_rows(sessions: list[Session], rows: list[dict]) -> int:
    """Rows the plan accounts for: per listed cell, one per serving configuration measured (one untuned); per
    sweep cell, the rows of the points it measured in every configuration (at least one: a cell that produced
    none still owes its failed row). Validation compares this with the table's row count, and the cell key's
    uniqueness (configuration included) catches a point recorded twice."""
    return sum(max(1, len(rows_of(c, rows))) for s in sessions for c in s.cells)


@dataclass(frozen=True)
class Plan:
    """What a run measures: its resolved configuration, the conversions, the server sessions, and the night's budget
    (`night`, tasks/plan/night.py: what each stage is planned to cost, which cells were deferred and why; empty
    without Param night_budget_s)."""

    config: RunConfig
    conversions: list[dict]
    sessions: list[Session]
    night: dict = field(default_factory=dict)

    @property
    def cells(self) -> list[Cell]:
        return [cell for session in self.sessions for cell in session.cells]

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict(), "conversions": self.conversions,
                "sessions": [s.to_dict() for s in self.sessions], "night": self.night}

    @classmethod
    def from_dict(cls, data: dict) -> Plan:
        """The plan as the plan step wrote it (plan.json, or the plan task's XCom): nothing is resolved again."""
        return cls(RunConfig.from_dict(data["config"]), list(data["conversions"]),
                   [Session.from_dict(s) for s in data["sessions"]], dict(data.get("night") or {}))


def check_tune_budget(config: RunConfig, model: str, fmt: str, server: str, cells: list[Cell]) -> None:
    """A search must fit at least one configuration (the defaults) in its time budget."""
    one = estimate_config_s(cells, config.warmup_s, config.duration_s, config.workers)
    if one > config.tune_budget_s:
        raise ConfigError("tune_budget_s", config.tune_budget_s,
                          f"must fit at least one configuration: one costs about {one:.0f} s for {model}/{fmt} on "
                          f"{server} (a start-up and {len(cells)} planned cells of {config.warmup_s:g} + "
                          f"{config.duration_s:g} s each, sweeps counted at their bound)")


def model_formats(model: str, formats: tuple[str, ...]) -> list[str]:
    """The requested formats this model's source can be converted to (each checked: path, dtypes, options).

    Several models share one formats list, so a format a model cannot reach is left out for that model; a
    model that reaches none of them is an error that names what it can reach.
    """
    spec = load_spec(model)  # a broken spec fails here, naming the model and field
    reachable = [f for f in formats if f in reachable_formats(spec.source_kind)]
    for fmt in reachable or formats[:1]:
        check_conversion(spec, fmt)
    return reachable


def planned_wires(protocols: tuple[str, ...], server) -> list[tuple[str, str | None]]:
    """(wire, skip reason or None) of every wire a run measures `server` over, in WIRES order: `best` is every wire
    the server speaks; a wire asked for by name that it lacks is planned skipped, with the server's reason."""
    asked = set(protocols)
    planned = []
    for wire in WIRES:
        if wire in server.wires and (wire in asked or BEST in asked):
            planned.append((wire, None))
        elif wire in asked:
            planned.append((wire, server.wire_reason(wire)))
    return planned


def efficient_wires(config: RunConfig, server_name: str) -> tuple[str, ...]:
    """The wires a stack is ranked on, and its traces replayed over: every wire it speaks in this run but REST JSON,
    or JSON where it speaks no other."""
    spoken = [wire for wire, skip in planned_wires(config.protocols, get_server(server_name)) if skip is None]
    fast = tuple(w for w in spoken if w != "json")
    return fast or tuple(spoken)


def lengthens(cell: Cell, config: RunConfig) -> bool:
    """Whether the run gives `cell`'s undecided hinge points a longer look: it lengthens (`max_point_s`), and the cell
    is on one of its stack's efficient wires (any wire but REST JSON, or JSON where the run measures no other). A
    trace's points are never lengthened: the trace is the point, its length its own."""
    if config.max_point_s is None or cell.workload != FIXED_WORKLOAD:
        return False
    return (cell.wire or "json") != "json" or efficient_wires(config, cell.server) == ("json",)


def make_plan(config: RunConfig) -> Plan:
    conversions: list[dict] = []
    sessions: list[Session] = []
    per_model = {model: model_formats(model, config.formats) for model in config.models}
    groups = config.load_groups()
    traces = list(zip(config.trace_labels(), config.trace_groups() * len(config.traces), strict=True))
    for server_name in config.servers:
        server = get_server(server_name)
        if not any(f in server.formats for fmts in per_model.values() for f in fmts):
            raise ConfigError("servers", server_name,
                              f"serves formats {list(server.formats)}, none of the requested formats "
                              f"{list(config.formats)} that models {list(config.models)} can be converted to")
    for model in config.models:
        for server_name in config.servers:
            server = get_server(server_name)
            served = [f for f in per_model[model] if f in server.formats]
            wires = planned_wires(config.protocols, server)
            for fmt in served:
                if {"model": model, "format": fmt} not in conversions:
                    conversions.append({"model": model, "format": fmt})
                cells = [Cell(model, fmt, server_name, config.launcher, config.device, batch, mode, load,
                              server.wires[wire].codec if skip is None else wire, wire, skip)
                         for batch in config.batch_sizes for mode, loads in groups for load in loads
                         for wire, skip in wires]
                if not config.trace_models or model in config.trace_models:
                    cells += [Cell(model, fmt, server_name, config.launcher, config.device, batch, mode, speed,
                                   server.wires[wire].codec, wire, workload=label)
                              for label, (mode, speeds) in traces for batch in config.batch_sizes
                              for speed in speeds for wire in efficient_wires(config, server_name)]
                if config.overload:  # last in the session: the bursts need the capacity its points measured
                    cells += [Cell(model, fmt, server_name, config.launcher, config.device, batch, OVERLOAD_MODE,
                                   factor, server.wires[wire].codec if skip is None else wire, wire, skip)
                              for batch in config.batch_sizes for factor in OVERLOAD_FACTORS for wire, skip in wires]
                if config.tune != "off":
                    check_tune_budget(config, model, fmt, server_name, cells)
                sessions.append(Session(f"{model}.{fmt}.{server_name}.{config.launcher}.{config.device}",
                                        model, fmt, server_name, tuple(cells)))
    add_control(config, conversions, sessions)
    return Plan(config, conversions, spread_over_hosts(config, sessions))


def spread_over_hosts(config: RunConfig, sessions: list[Session]) -> list[Session]:
    """Every session with its measuring host (tasks/plan/hosts.py): longest planned session first, to the least
    loaded of the run's target hosts."""
    def cost_s(session: Session) -> float:
        return estimate_config_s(session.cells, config.warmup_s, config.duration_s, config.workers)

    hosts = assign_hosts([cost_s(s) for s in sessions], config.target_hosts())
    return [replace(s, host=h) for s, h in zip(sessions, hosts, strict=True)]


def add_control(config: RunConfig, conversions: list[dict], sessions: list[Session]) -> None:
    """Plan the control cell (tasks/plan/control.py) as its own session when the run's cells do not measure it."""
    control = control_cell(config)
    if control is None or covered([c for s in sessions for c in s.cells], control):
        return
    spec, server = load_spec(control["model"]), get_server(control["server"])
    if control["format"] not in reachable_formats(spec.source_kind) or control["format"] not in server.formats:
        raise ConfigError("control_cell", config.control_cell,
                          f"server {server.name!r} must serve format {control['format']!r} and model "
                          f"{control['model']!r} must convert to it")
    check_conversion(spec, control["format"])
    if {"model": control["model"], "format": control["format"]} not in conversions:
        conversions.append({"model": control["model"], "format": control["format"]})
    cell = Cell(**control, protocol=server.protocol, wire="json")
    sessions.append(Session(CONTROL_SESSION_PREFIX + cell.cell_id, cell.model, cell.format, cell.server, (cell,),
                            role="control"))
