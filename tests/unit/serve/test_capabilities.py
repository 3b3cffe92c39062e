"""Capability declarations (tasks/serve/capabilities.py): every server declares every one, in agreement with its
wires; a wrong declaration names its field; the docs hold the matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.errors import ConfigError
from tasks.serve.capabilities import CAPABILITIES, Capability, Probe, capability_matrix_markdown, check_declaration
from tasks.serve.servers import SERVERS
from tasks.serve.servers.custom import CustomServer

REPO = Path(__file__).resolve().parents[3]


def test_every_server_declares_every_capability_in_agreement_with_its_wires():
    for name, cls in SERVERS.items():
        check_declaration(name, cls.capabilities, cls.wires)
        assert list(cls.capabilities) == list(CAPABILITIES), name
        metrics = cls.capabilities["metrics"]
        assert metrics.declared and metrics.probe and metrics.probe.kind == "prometheus", name
    with pytest.raises(ConfigError, match="must equal whether it has a grpc wire"):
        check_declaration("custom", {**CustomServer.capabilities, "grpc": Capability(True, "says so")},
                          CustomServer.wires)
    with pytest.raises(ConfigError, match="must declare exactly"):
        check_declaration("custom", {"metrics": CustomServer.capabilities["metrics"]}, CustomServer.wires)


def test_a_declaration_names_its_field_when_it_is_wrong():
    with pytest.raises(ConfigError, match=r"Probe.kind.*must be one of"):
        Probe("ping")
    with pytest.raises(ConfigError, match=r"Probe\(http\).path"):
        Probe("http", path="metrics")
    with pytest.raises(ConfigError, match=r"Capability.probe.*only a declared capability"):
        Capability(False, "not offered", Probe("ready"))


def test_the_docs_hold_the_capability_matrix_of_the_declarations():
    assert capability_matrix_markdown(SERVERS) in (REPO / "docs" / "servers.md").read_text()
