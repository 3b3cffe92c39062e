"""The plan: a run config expanded into conversions and server sessions, each session holding its cells.

A cell is one (model, format, server, launcher, device, batch size, mode, load) point. A session is one
server life: start, every load point of that server on that artifact, stop.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.config import RunConfig
from tasks.errors import ConfigError
from tasks.serve.servers import get_server
from tasks.spec import load_spec


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


def make_plan(config: RunConfig) -> Plan:
    for model in config.models:
        load_spec(model)  # a broken spec fails here, naming the model and field
    conversions: list[dict] = []
    sessions: list[dict] = []
    for model in config.models:
        for server_name in config.servers:
            server = get_server(server_name)
            served = [f for f in config.formats if f in server.formats]
            if not served:
                raise ConfigError("servers", server_name,
                                  f"serves formats {list(server.formats)}, none of the requested formats {list(config.formats)}")
            for fmt in served:
                if {"model": model, "format": fmt} not in conversions:
                    conversions.append({"model": model, "format": fmt})
                cells = [
                    {"model": model, "format": fmt, "server": server_name, "launcher": config.launcher,
                     "device": config.device, "batch_size": batch, "mode": config.mode, "load": load}
                    for batch in config.batch_sizes for load in config.loads
                ]
                for cell in cells:
                    cell["cell_id"] = cell_id(cell)
                sessions.append({
                    "session_id": f"{model}.{fmt}.{server_name}.{config.launcher}.{config.device}",
                    "model": model, "format": fmt, "server": server_name, "cells": cells,
                })
    return Plan(config, conversions, sessions)
