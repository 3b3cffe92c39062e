"""Project images against a real engine (tasks/runtimes/images.py): reused, with the CPU torch; the builder's CAs;
the base script shell-clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.runtimes import images
from tasks.runtimes.build_context import CA_ENV, ca_files
from tasks.runtimes.images import BUILDER, ensure_image


@pytest.mark.integration
def test_images_are_reused_and_carry_the_cpu_torch(project_images, docker_engine):
    """A second ensure builds nothing (same tag, same id); the runtime image has the CPU torch and neither the
    wheels nor the CA files of its build stage (the builder's)."""
    for runtime, image in project_images.items():
        again = ensure_image(runtime, docker_engine)
        assert (again.ref, again.image_id, again.built_now) == (image.ref, image.image_id, False)
        assert image.ref.startswith(f"serving-eval/{runtime}:")
        labels = docker_engine.images.get(image.ref).labels
        assert labels[images.LABEL_RUNTIME] == runtime and labels[images.LABEL_INPUTS] == image.ref.split(":")[1]
    check = ("import torch, os; print(torch.__version__, os.path.exists('/tmp/wheels'), "
             "os.path.exists('/usr/local/share/ca-certificates/serving-eval'))")
    out = docker_engine.containers.run(project_images["custom"].ref, ["-c", check], entrypoint="python", remove=True)
    assert out.decode().split() == ["2.13.0+cpu", "False", "False"]


DOWNLOAD = "pip download --no-deps --retries 0 -q -d /tmp six==1.17.0 && ls /tmp"


# Without -q: pip logs why it could not fetch the index at INFO level, to stdout (sent to stderr here, which is what
# a ContainerError carries); with -q only "No matching distribution found" is left, whatever the cause.
DOWNLOAD_SAYING_WHY = "pip download --no-deps --retries 0 -d /tmp six==1.17.0 1>&2"


@pytest.mark.integration
def test_the_builder_takes_its_cas_from_the_option(monkeypatch, docker_engine):
    """pip inside the builder reaches the index through this host's TLS-inspecting proxy with the option's CAs; a
    builder without them (where the host has any) fails on the certificate, the reason the option exists (its
    own build passes: pip's self-upgrade only warns when it cannot reach the index)."""
    from docker.errors import ContainerError

    monkeypatch.setenv(CA_ENV, "host")
    builder = ensure_image(BUILDER, docker_engine)
    out = docker_engine.containers.run(builder.ref, ["-c", DOWNLOAD], entrypoint="sh", remove=True)
    assert "six-1.17.0" in out.decode()
    if not ca_files("host"):
        return  # no extra CAs on this host: nothing to leave out
    monkeypatch.setenv(CA_ENV, "none")
    bare = ensure_image(BUILDER, docker_engine)
    try:
        assert bare.ref != builder.ref  # the CA files are part of the builder's tag
        with pytest.raises(ContainerError) as failed:
            docker_engine.containers.run(bare.ref, ["-c", DOWNLOAD_SAYING_WHY], entrypoint="sh", remove=True,
                                         stderr=True)
        assert "CERTIFICATE_VERIFY_FAILED" in str(failed.value.stderr)
    finally:
        docker_engine.images.remove(bare.ref, force=True)


@pytest.mark.integration
def test_base_script_is_shell_clean():
    """docker/base/build-base.sh parses (bash -n); it needs root, debootstrap and docker to run."""
    script = Path(images.BASE_SCRIPT)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert script.stat().st_mode & 0o111
