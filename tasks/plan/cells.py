"""The plan: a run config expanded into conversions and server sessions, each session holding its cells.

A cell is one (model, format, server, launcher, device, batch size, mode, load) point, measured over the
protocol the run chose (`protocol`: the server's REST codec, or its KServe v2 gRPC one). A session is one
server life: start, every load point of that server on that artifact, stop.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.convert import check_conversion
from tasks.convert.graph import reachable_formats
from tasks.core.errors import ConfigError
from tasks.core.spec import load_spec
from tasks.plan.config import RunConfig
from tasks.serve.servers import get_server, server_names

# A sweep cell (Params concurrency_sweep=doubling, rate_search) is one planned cell whose rows are the points
# it measured, each with the point's mode and load; its own `load` is the sweep's bound (the largest
# concurrency) or start (the smallest rate). How many points it runs is only known after it ran.
SWEEP_MODES = {"concurrency-sweep": "concurrency", "rate-search": "rate"}
SWEEP_GROUP = ("model", "format", "server", "launcher", "device", "batch_size")


def rows_of(cell: dict, rows: list[dict]) -> list[dict]:
    """The rows a planned cell produced: its own row, or a sweep's rows (same model, format, server, launcher,
    device and batch size, with the sweep's mode or its points' mode)."""
    if cell["mode"] not in SWEEP_MODES:
        return [r for r in rows if all(r[k] == cell[k] for k in ("model", "format", "server", "batch_size", "mode",
                                                                  "load"))]
    modes = (cell["mode"], SWEEP_MODES[cell["mode"]])
    return [r for r in rows if r["mode"] in modes and all(r[k] == cell[k] for k in SWEEP_GROUP)]


def expected_rows(sessions: list[dict], rows: list[dict]) -> int:
    """Rows the plan accounts for: per listed cell, one per serving configuration measured (one untuned); per
    sweep cell, the rows of the points it measured in every configuration (at least one: a cell that produced
    none still owes its failed row). Validation compares this with the table's row count, and the cell key's
    uniqueness (configuration included) catches a point recorded twice."""
    return sum(max(1, len(rows_of(c, rows))) for s in sessions for c in s["cells"])


def cell_id(cell: dict) -> str:
    load = cell["load"]
    load_txt = str(int(load)) if float(load).is_integer() else f"{load:g}"
    return (f"{cell['model']}.{cell['format']}.{cell['server']}.{cell['launcher']}.{cell['device']}"
            f".b{cell['batch_size']}.{cell['mode']}{load_txt}")


@dataclass(frozen=True)
class Plan:
    config: RunConfig
    conversions: list[dict]
    sessions: list[dict]

    @property
    def cells(self) -> list[dict]:
        return [cell for session in self.sessions for cell in session["cells"]]

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict(), "conversions": self.conversions, "sessions": self.sessions}


def check_tune_budget(config: RunConfig, model: str, fmt: str, server: str, cells: list[dict]) -> None:
    """A search must fit at least one configuration (the defaults) in its time budget."""
    from tasks.plan.tune import estimate_config_s

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


def make_plan(config: RunConfig) -> Plan:
    conversions: list[dict] = []
    sessions: list[dict] = []
    per_model = {model: model_formats(model, config.formats) for model in config.models}
    groups = config.load_groups()
    for server_name in config.servers:
        server = get_server(server_name)
        if config.protocol == "grpc" and not getattr(server, "grpc_protocol", None):
            grpc_servers = [n for n in server_names() if getattr(get_server(n), "grpc_protocol", None)]
            raise ConfigError("protocol", config.protocol,
                              f"server {server_name!r} has no KServe v2 gRPC endpoint; 'grpc' needs every server to "
                              f"be one of {grpc_servers} (or use protocol 'default')")
        if not any(f in server.formats for fmts in per_model.values() for f in fmts):
            raise ConfigError("servers", server_name,
                              f"serves formats {list(server.formats)}, none of the requested formats "
                              f"{list(config.formats)} that models {list(config.models)} can be converted to")
    for model in config.models:
        for server_name in config.servers:
            server = get_server(server_name)
            served = [f for f in per_model[model] if f in server.formats]
            protocol = server.grpc_protocol if config.protocol == "grpc" else server.protocol
            for fmt in served:
                if {"model": model, "format": fmt} not in conversions:
                    conversions.append({"model": model, "format": fmt})
                cells = [
                    {"model": model, "format": fmt, "server": server_name, "launcher": config.launcher,
                     "device": config.device, "batch_size": batch, "mode": mode, "load": load,
                     "protocol": protocol}
                    for batch in config.batch_sizes for mode, loads in groups for load in loads
                ]
                for cell in cells:
                    cell["cell_id"] = cell_id(cell)
                if config.tune != "off":
                    check_tune_budget(config, model, fmt, server_name, cells)
                sessions.append({
                    "session_id": f"{model}.{fmt}.{server_name}.{config.launcher}.{config.device}",
                    "model": model, "format": fmt, "server": server_name, "cells": cells,
                })
    add_control(config, conversions, sessions)
    spread_over_hosts(config, sessions)
    return Plan(config, conversions, sessions)


def spread_over_hosts(config: RunConfig, sessions: list[dict]) -> None:
    """Give every session its measuring host (tasks/plan/hosts.py): longest planned session first, to the least loaded
    of the run's target hosts."""
    from tasks.plan.hosts import assign_hosts
    from tasks.plan.tune import estimate_config_s

    def cost_s(session: dict) -> float:
        return estimate_config_s(session["cells"], config.warmup_s, config.duration_s, config.workers)

    assign_hosts(sessions, config.target_hosts(), cost_s)


def add_control(config: RunConfig, conversions: list[dict], sessions: list[dict]) -> None:
    """Plan the control cell (tasks/plan/control.py) as its own session when the run's cells do not measure it."""
    from tasks.plan.control import CONTROL_SESSION_PREFIX, control_cell, covered

    control = control_cell(config)
    if control is None or covered([c for s in sessions for c in s["cells"]], control):
        return
    spec, server = load_spec(control["model"]), get_server(control["server"])
    if control["format"] not in reachable_formats(spec.source_kind) or control["format"] not in server.formats:
        raise ConfigError("control_cell", config.control_cell,
                          f"server {server.name!r} must serve format {control['format']!r} and model "
                          f"{control['model']!r} must convert to it")
    check_conversion(spec, control["format"])
    if {"model": control["model"], "format": control["format"]} not in conversions:
        conversions.append({"model": control["model"], "format": control["format"]})
    cell = {**control, "protocol": server.protocol}
    cell["cell_id"] = cell_id(cell)
    sessions.append({"session_id": CONTROL_SESSION_PREFIX + cell["cell_id"], "model": control["model"],
                     "format": control["format"], "server": control["server"], "cells": [cell], "role": "control"})
