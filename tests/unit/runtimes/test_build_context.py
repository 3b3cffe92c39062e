"""Images: tagged by the hash of what went into them and reused; one builder image as every venv image's build
stage; the host's CPU torch wheel inside; the CA build option, in the builder only; and a real builder whose pip
passes this host's TLS-inspecting proxy with the option's CAs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.core.errors import ConfigError
from tasks.runtimes import build_context, images
from tasks.runtimes.build_context import CA_ENV, ca_files, context_files, host_wheels, inputs_sha256
from tasks.runtimes.images import BUILDER, ImageRef, ensure_image, is_project_image, project_image


def test_ca_option(tmp_path, monkeypatch):
    monkeypatch.setattr(build_context, "HOST_CA_DIR", tmp_path / "host")
    (tmp_path / "host" / "corp").mkdir(parents=True)
    (tmp_path / "host" / "corp" / "proxy.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    assert ca_files("host") == [tmp_path / "host" / "corp" / "proxy.crt"]
    monkeypatch.delenv(CA_ENV, raising=False)
    assert ca_files() == ca_files("host")  # the default: the host's extra CAs
    assert ca_files("none") == []
    one = tmp_path / "one.crt"
    one.write_text("x")
    assert ca_files(str(one)) == [one]
    assert ca_files(str(tmp_path / "host")) == [tmp_path / "host" / "corp" / "proxy.crt"]
    for bad in (str(tmp_path / "missing.crt"), str(tmp_path / "empty")):
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(ConfigError) as info:
            ca_files(bad)
        assert info.value.field == CA_ENV and "'host', 'none'" in info.value.rule


def test_context_holds_the_runtimes_files_the_cpu_wheel_and_the_builder_the_cas(monkeypatch, tmp_path):
    monkeypatch.setenv(CA_ENV, "none")
    files = context_files("custom")
    assert {"Dockerfile", "requirements.txt", "app.py"} <= set(files)
    assert files["requirements.txt"] == build_context.requirements_path("custom")  # the process launcher's file
    (wheel,) = [name for name in files if name.startswith("wheels/")]
    assert wheel.startswith("wheels/torch-2.13.0+cpu-") and wheel.endswith(".whl")
    cert = tmp_path / "proxy.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv(CA_ENV, str(cert))
    assert not [name for name in context_files("custom") if name.startswith("ca/")]  # the builder trusts them
    assert context_files(BUILDER)["ca/00-proxy.crt"] == cert
    assert set(context_files(BUILDER)) == {"Dockerfile", "ca/00-proxy.crt"}  # no requirements, no wheels
    converter = context_files("convert-torch")  # the code its entry point imports, at its repository paths
    assert {"app/tasks/core/spec.py", "app/models/mlp.yaml", "app/docker/convert-torch/convert.py"} <= set(converter)
    airflow = context_files("airflow")  # carries the runtimes' wheels without installing them
    assert [n for n in airflow if n.startswith("runtime-wheels/")]
    assert not [n for n in airflow if n.startswith("wheels/")]


def test_every_venv_image_starts_from_the_one_builder():
    """The build stage is written once (docker/builder/Dockerfile); an image with a venv starts from it."""
    for dockerfile in sorted(build_context.DOCKER_DIR.glob("*/Dockerfile")):
        image = dockerfile.parent.name
        text = "\n".join(line for line in dockerfile.read_text().splitlines() if not line.startswith("#"))
        if image in build_context.NO_VENV:
            assert "FROM ${BUILDER_IMAGE}" not in text, image
            continue
        assert "FROM ${BUILDER_IMAGE} AS build" in text and "pip install" not in text, image


def test_tag_is_the_hash_of_the_inputs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("one")
    b.write_text("two")
    tag = inputs_sha256({"Dockerfile": a, "requirements.txt": b}, "sha256:base", {"BASE_IMAGE": "x"})
    assert tag == inputs_sha256({"requirements.txt": b, "Dockerfile": a}, "sha256:base", {"BASE_IMAGE": "x"})
    assert tag != inputs_sha256({"Dockerfile": b, "requirements.txt": a}, "sha256:base", {"BASE_IMAGE": "x"})
    assert tag != inputs_sha256({"Dockerfile": a, "requirements.txt": b}, "sha256:other", {"BASE_IMAGE": "x"})
    assert tag != inputs_sha256({"Dockerfile": a, "requirements.txt": b}, "sha256:base", {"BASE_IMAGE": "y"})
    b.write_text("three")
    assert tag != inputs_sha256({"Dockerfile": a, "requirements.txt": b}, "sha256:base", {"BASE_IMAGE": "x"})


def test_a_cuda_torch_wheel_is_refused(tmp_path, monkeypatch):
    """Only the CPU build goes into an image: a wheel without '+cpu' is refused, naming what to change."""
    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path))
    folder = tmp_path / "wheels" / "torch-2.13.0"
    folder.mkdir(parents=True)
    (folder / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"not really")
    with pytest.raises(ConfigError, match=r"\+cpu") as info:
        host_wheels("custom")
    assert "PIP_FIND_LINKS" in info.value.rule


def test_project_image_names():
    assert project_image("kserve") == "serving-eval/kserve" and is_project_image("serving-eval/kserve:0123")
    assert not is_project_image("nvcr.io/nvidia/tritonserver:24.10-py3")
    ref = ImageRef("serving-eval/kserve:0123", "sha256:abc", "project")
    assert ref.label == "serving-eval/kserve:0123@sha256:abc"


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
