"""The suite's runtimes and images built in the background while the tests that need neither run.

On a new machine `make test` spends a third of its time building: the runtime venvs the servers and converters run in,
the Docker base, the five serving images and the deployment's three. Tests build what they need on first use, one
after the other, and wait on each build with the machine's second core idle. With `SERVING_EVAL_PREBUILD=1` (the
Makefile's `test` target sets it) this plugin starts one background process at the start of the session,
`python -m tests.prebuild`, that builds every runtime venv and, when an engine answers, every image the suite uses,
at the lowest CPU and I/O priority. The builds take the same file locks as a test's own, so a test that needs a venv
or an image before the background reaches it builds it itself and the background then finds it built.

The suite's order is set here too: tests that use images (`DOCKER_PREFIX`, `COMPOSE_FILE`) run after the others,
an image the background is still building waited for through its lock; tests that judge the host's quiet
(`QUIET_FILES`: other work on the host is what they measure) run last, and only once the background process has
ended, so no build is running beside them. The process is ended by its PID at the
session's end if it is still running (a test run stopped early); its log is printed when it failed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ENV = "SERVING_EVAL_PREBUILD"
RUNTIMES = ("kserve", "bentoml", "torchserve", "triton", "convert-tf", "custom", "convert-torch")  # last used first
IMAGES = ("custom", "triton", "torchserve", "bentoml", "kserve", "airflow", "postgres", "redis")
DOCKER_PREFIX, COMPOSE_FILE = "test_docker_", "test_compose.py"  # tests/integration/<name>: they use the images
QUIET_FILES = ("test_contention.py", "test_loadgen_servers.py", "test_regress_pipeline.py",  # they judge the host
               "test_confidence_servers.py", "test_notifications.py")
STOP_WAIT_S = 30.0
WAIT_LIMIT_S = 2400.0  # a build that hangs: the tests go on without it (and build what they need themselves)


class Prebuild:
    """The background build process this session started: its PID and log."""

    def __init__(self) -> None:
        # A private temp dir: the builds' scratch folders (serving-eval-image-*, -base-*) must not look like a server
        # session's to the tests that check none is left (tests/dagrun.py), nor its TMPDIR like a server's.
        self.tmp = Path(tempfile.mkdtemp(prefix="prebuild-"))
        self.log_path = self.tmp / "prebuild.log"
        lowest = [*(["nice", "-n", "19"] if shutil.which("nice") else []),
                  *(["ionice", "-c", "3"] if shutil.which("ionice") else [])]
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [*lowest, sys.executable, "-m", "tests.prebuild"], env={**os.environ, "TMPDIR": str(self.tmp)},
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        print(f"\nprebuild: building runtimes and images in the background (pid {self.proc.pid}, log {self.log_path})")

    def wait(self) -> None:
        """Wait for the background builds to end (before a test that needs a quiet host)."""
        if self.proc.poll() is None:
            print(f"\nprebuild: waiting for the background builds (pid {self.proc.pid}) before the host-judging tests")
            try:
                self.proc.wait(timeout=WAIT_LIMIT_S)
            except subprocess.TimeoutExpired:
                self.stop()

    def stop(self) -> None:
        """End the process (and its children: its own session) if it still runs; say how it ended."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own child's session, started above
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if not self.tmp.exists():
            return  # stopped already
        text = self.log_path.read_text(errors="replace")
        if self.proc.returncode not in (0, -signal.SIGTERM):
            print(f"\nprebuild: the background builds failed (rc {self.proc.returncode}); the tests built what they "
                  f"needed themselves. Its log's end:\n{text[-3000:]}")
        shutil.rmtree(self.tmp, ignore_errors=True)


def _file_name(item: pytest.Item) -> str:
    return Path(str(item.fspath)).name


def _is_docker(item: pytest.Item) -> bool:
    name = _file_name(item)
    return name.startswith(DOCKER_PREFIX) or name == COMPOSE_FILE


def _is_quiet(item: pytest.Item) -> bool:
    return _file_name(item) in QUIET_FILES


def order_items(items: list[pytest.Item]) -> list[pytest.Item]:
    """Everything else first, then the tests that use images (the deployment's last), then the host-judging tests
    (stable within each): the images the background builds last are used last, and the host is quiet when judged."""
    others = [i for i in items if not _is_quiet(i) and not _is_docker(i)]
    images = [i for i in items if _is_docker(i) and not _is_quiet(i)]
    compose_last = sorted(images, key=lambda i: _file_name(i) == COMPOSE_FILE)  # its images are the last built
    return others + compose_last + [i for i in items if _is_quiet(i)]


def pytest_configure(config: pytest.Config) -> None:
    config._serving_eval_prebuild = None  # set at the session's start when asked for


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(ENV) == "1":
        items[:] = order_items(items)


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get(ENV) == "1" and not hasattr(session.config, "workerinput"):
        session.config._serving_eval_prebuild = Prebuild()


def pytest_runtest_setup(item: pytest.Item) -> None:
    prebuild = item.config._serving_eval_prebuild
    if prebuild is not None and _is_quiet(item):
        prebuild.wait()


def pytest_unconfigure(config: pytest.Config) -> None:
    prebuild = getattr(config, "_serving_eval_prebuild", None)
    if prebuild is not None:
        prebuild.stop()
        config._serving_eval_prebuild = None


def main() -> int:
    """Build (or find built) every runtime venv, then every image when an engine answers; one line per build."""
    from tasks.runtimes.venvs import ensure_runtime

    for name in RUNTIMES:
        env = ensure_runtime(name, log=print)
        print(f"runtime {name}: {'built' if env.built_now else 'reused'}", flush=True)
    try:
        from tasks.runtimes.images import docker_client, ensure_image

        client = docker_client()
        client.ping()
    except Exception as exc:  # no engine: the Docker tests skip or fail on their own, nothing to build here
        print(f"no engine answers ({exc}); no images built", flush=True)
        return 0
    for name in IMAGES:
        image = ensure_image(name, client, log=print)
        print(f"image {name}: {'built' if image.built_now else 'reused'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
