"""Image build contexts (tasks/runtimes/build_context.py): the CA option, the runtime's files, the CPU wheel and
the builder, the tag as the hash of the inputs, a CUDA wheel refused."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.runtimes import build_context
from tasks.runtimes.build_context import CA_ENV, ca_files, context_files, host_wheels, inputs_sha256
from tasks.runtimes.images import BUILDER


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
