"""The suite's Docker engine answers (tasks/runtimes/docker_engine.py against a real engine)."""

from __future__ import annotations

import pytest

from tasks.runtimes.docker_engine import (
    engine_answers,
    start_engine,
)


@pytest.mark.integration
def test_the_session_has_an_engine(docker_engine):
    """The session fixture found an engine or started dockerd itself (and stops that one by its PID at the end)."""
    assert engine_answers()
    info = docker_engine.info()
    assert info["Driver"] == "overlay2" and info["ServerVersion"]
    assert start_engine().started_here is False  # one answers: nothing more is started, and nothing to stop
