"""Fixtures of the tests that run containers on a real Docker engine (a pytest plugin, see conftest.py).

`docker_engine` finds an engine or starts dockerd (tasks.runtimes.docker_engine) for the session and stops the one it
started, by its PID, when the session ends. Where no engine can be started (no dockerd, not root) the Docker
tests skip with the reason; with SERVING_EVAL_REQUIRE_DOCKER=1 (set by .ci/run) they fail instead, so CI must
prove the container path. `project_images` builds the serving runtimes' images, or reuses them (a second run
builds nothing). `no_docker_leftovers` asserts through the engine that a test left no container of the
project, and no new network or volume.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ENV = "SERVING_EVAL_REQUIRE_DOCKER"
SERVING_IMAGES = ("triton", "torchserve", "bentoml", "kserve", "custom")


def _no_engine(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 and no Docker engine: {reason}", pytrace=False)
    pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture(scope="session")
def docker_engine():
    """A client of an answering engine; a dockerd started for the session is stopped by its PID at the end."""
    from tasks.runtimes.docker_engine import EngineUnavailable, docker_client, start_engine, stop_engine

    try:
        handle = start_engine()
    except EngineUnavailable as exc:
        _no_engine(str(exc))
    client = docker_client()
    try:
        yield client
    finally:
        client.close()
        if handle.started_here:
            stop_engine(handle)


@pytest.fixture(scope="session")
def project_images(docker_engine) -> dict:
    """runtime -> ImageRef of the serving runtimes' project images, built now or reused."""
    from tasks.runtimes.images import ensure_image

    images = {}
    for runtime in SERVING_IMAGES:
        image = ensure_image(runtime, log=lambda line: print(f"  {line}"))
        how = f"built in {image.build_s:.0f} s" if image.built_now else "reused, nothing built"
        print(f"image {runtime}: {image.ref}: {how}")
        images[runtime] = image
    return images


def project_state(client) -> dict[str, set[str]]:
    """The engine's containers of this project (by label), and all its networks and volumes."""
    from tasks.serve.launchers.docker import LABEL_RUN_ID

    return {
        "containers": {c.id for c in client.containers.list(all=True, filters={"label": LABEL_RUN_ID})},
        "networks": {n.id for n in client.networks.list()},
        "volumes": {v.id for v in client.volumes.list()},
    }


@pytest.fixture()
def no_docker_leftovers(docker_engine):
    """After the test, no container of the project that the test made, and no new network or volume, exists
    (asked of the engine)."""
    before = project_state(docker_engine)
    yield docker_engine
    after = project_state(docker_engine)
    left = after["containers"] - before["containers"]
    assert left == set(), f"containers of the project left: {sorted(left)}"
    assert after["networks"] <= before["networks"], f"networks left: {sorted(after['networks'] - before['networks'])}"
    assert after["volumes"] <= before["volumes"], f"volumes left: {sorted(after['volumes'] - before['volumes'])}"
