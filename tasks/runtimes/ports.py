"""Free TCP ports on this host's loopback, for the servers and helper processes a run starts."""

from __future__ import annotations

import socket
from contextlib import closing


def free_port(host: str = "127.0.0.1") -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_ports(names: tuple[str, ...]) -> dict[str, int]:
    ports: dict[str, int] = {}
    while len(ports) < len(names):
        port = free_port()
        if port not in ports.values():
            ports[names[len(ports)]] = port
    return ports
