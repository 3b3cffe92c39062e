"""The engine module (tasks/runtimes/docker_engine.py) without an engine: why one cannot be started, and the PID
file that makes a stop safe."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tasks.runtimes import docker_engine
from tasks.runtimes.docker_engine import (
    EngineHandle,
    EngineUnavailable,
    pid_file,
    recorded_engine,
    start_blocker,
    start_engine,
    stop_engine,
)
from tasks.runtimes.proctree import create_time_of


@pytest.fixture()
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path))
    return tmp_path


def test_blockers_say_why(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    assert "DOCKER_HOST=tcp://127.0.0.1:1" in start_blocker()
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "dockerd is not installed" in start_blocker() and "apt-get install docker.io" in start_blocker()
    monkeypatch.setattr(docker_engine.shutil, "which", lambda name: "/usr/sbin/dockerd")
    monkeypatch.setattr(docker_engine.os, "geteuid", lambda: 1000)
    assert "must run as root" in start_blocker()


def test_no_engine_and_none_startable_is_one_clear_error(monkeypatch, tmp_path, private_cache):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'none.sock'}")
    with pytest.raises(EngineUnavailable, match="no Docker engine answers at unix://.*none.sock and none can be"):
        start_engine()


def test_stop_signals_only_the_process_it_started(private_cache):
    """A recorded PID whose process start time differs (the PID was reused) is never signalled."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid_file().write_text(json.dumps({"host": "unix:///x", "pid": sleeper.pid, "create_time": 1.0,
                                          "log_path": ""}))
        assert recorded_engine() is None and not pid_file().exists()  # not ours: forgotten, not killed
        assert stop_engine() is False and sleeper.poll() is None

        mine = EngineHandle(host="unix:///x", pid=sleeper.pid, create_time=create_time_of(sleeper.pid))
        pid_file().write_text(json.dumps(mine.__dict__))
        assert recorded_engine() == mine
        assert stop_engine(grace_s=5) is True  # ours: SIGTERM, reaped
        assert sleeper.wait(timeout=5) == -15 and not pid_file().exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_engine_elsewhere_not_answering_never_stops_ours(monkeypatch, tmp_path, private_cache):
    """DOCKER_HOST pointing at a dead engine is an error; the dockerd this module started is left running."""

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ours = EngineHandle(host="unix:///var/run/docker.sock", pid=sleeper.pid,
                            create_time=create_time_of(sleeper.pid))
        pid_file().write_text(json.dumps(ours.__dict__))
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'none.sock'}")
        with pytest.raises(EngineUnavailable):
            start_engine()
        assert sleeper.poll() is None and recorded_engine() == ours
    finally:
        sleeper.kill()
        sleeper.wait()
