"""Launchers: where a server runs. Both behind `Launcher`; pick one by name."""

from __future__ import annotations

from tasks.core.errors import ConfigError
from tasks.serve.launchers.base import Launcher, LaunchHandle
from tasks.serve.launchers.docker import DockerLauncher
from tasks.serve.launchers.process import ProcessLauncher

LAUNCHERS: dict[str, type[Launcher]] = {cls.name: cls for cls in (ProcessLauncher, DockerLauncher)}


def get_launcher(name: str) -> Launcher:
    if name not in LAUNCHERS:
        raise ConfigError("launcher", name, f"must be one of {sorted(LAUNCHERS)}")
    return LAUNCHERS[name]()


__all__ = ["LAUNCHERS", "LaunchHandle", "Launcher", "get_launcher"]
