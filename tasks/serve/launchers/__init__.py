"""Launchers: where a server runs. Both behind `Launcher`; pick one by name."""

from __future__ import annotations

from tasks.errors import ConfigError
from tasks.serve.launchers.base import LaunchHandle, Launcher
from tasks.serve.launchers.process import ProcessLauncher

LAUNCHERS: dict[str, type[Launcher]] = {cls.name: cls for cls in (ProcessLauncher,)}


def get_launcher(name: str) -> Launcher:
    if name not in LAUNCHERS:
        raise ConfigError("launcher", name, f"must be one of {sorted(LAUNCHERS)}")
    return LAUNCHERS[name]()


__all__ = ["LAUNCHERS", "LaunchHandle", "Launcher", "get_launcher"]
