"""The servers this project knows. Adding a server: one file here, one line below, one `docker/` folder."""

from __future__ import annotations

from tasks.core.errors import ConfigError
from tasks.serve.base import Server
from tasks.serve.options import ServingOptions
from tasks.serve.servers.bentoml import BentoMLServer
from tasks.serve.servers.custom import CustomServer
from tasks.serve.servers.kserve import KServeServer
from tasks.serve.servers.tfserving import TFServingServer
from tasks.serve.servers.torchserve import TorchServeServer
from tasks.serve.servers.triton import TritonServer

SERVERS: dict[str, type[Server]] = {cls.name: cls for cls in (
    CustomServer,
    TFServingServer,
    TorchServeServer,
    BentoMLServer,
    KServeServer,
    TritonServer,
)}


def server_names() -> list[str]:
    return sorted(SERVERS)


def get_server(name: str, options: ServingOptions | None = None) -> Server:
    if name not in SERVERS:
        raise ConfigError("servers", name, f"must be one of {server_names()}")
    return SERVERS[name](options)


def register_server(cls: type[Server]) -> type[Server]:
    """Make a server known by name (used by plugins and by tests that need a deliberately broken one)."""
    SERVERS[cls.name] = cls
    return cls
