"""A runtime's identity does not depend on its builder: one requirements file built by pip (the builder before the
switch) and by uv reports one package set, the installer left out on purpose; uv's venvs share their files."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REQUIREMENTS = "requests==2.34.2\nsix==1.17.0\n"  # small, with dependencies that resolve (certifi, idna, urllib3 ...)


@pytest.mark.integration
def test_a_pip_built_and_a_uv_built_runtime_report_the_same_packages(tmp_path, monkeypatch):
    from tasks.runtimes.venvs import ensure_runtime, installed_packages, runtime_builder, runtime_packages

    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path / "cache"))  # no venv, no uv cache: both build now
    req = tmp_path / "requirements.txt"
    req.write_text(REQUIREMENTS)
    by_pip = ensure_runtime("tinyrt", requirements=req, builder="pip", log=lambda _: None)
    by_uv = ensure_runtime("tinyrt", requirements=req, log=lambda _: None)
    assert by_pip.built_now and by_uv.built_now and by_pip.venv_dir != by_uv.venv_dir
    assert runtime_builder(by_pip).startswith("pip ") and runtime_builder(by_uv).startswith("uv ")

    packages = runtime_packages(by_uv)
    assert runtime_packages(by_pip) == packages  # the same set, each at the same version
    assert packages["requests"] == "2.34.2" and packages["six"] == "1.17.0" and {"idna", "urllib3"} <= set(packages)
    # neither venv holds an installer; one that does (a venv pip built before the switch) has it left out
    assert not (by_pip.venv_dir / "bin" / "pip").exists() and not (by_uv.venv_dir / "bin" / "pip").exists()
    seeded = tmp_path / "seeded"
    subprocess.run([sys.executable, "-m", "venv", str(seeded)], check=True)  # ensurepip's pip in it
    subprocess.run([sys.executable, "-m", "pip", "--python", str(seeded / "bin" / "python"), "install", "--quiet",
                    "-r", str(req)], check=True)
    assert (seeded / "bin" / "pip").exists() and installed_packages(seeded).items() >= packages.items()
    assert "pip" not in installed_packages(seeded)
    assert ensure_runtime("tinyrt", requirements=req, log=lambda _: None).built_now is False  # cached by its hash


@pytest.mark.integration
def test_two_uv_runtimes_share_one_unpacked_copy_of_a_wheel(tmp_path, monkeypatch):
    from tasks.runtimes.venvs import ensure_runtime

    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path / "cache"))
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("six==1.17.0\n")
    second.write_text("six==1.17.0\nidna==3.11\n")
    envs = [ensure_runtime(name, requirements=req, log=lambda _: None) for name, req in (("a", first), ("b", second))]
    six = [next(env.venv_dir.glob("lib/python*/site-packages/six.py")) for env in envs]
    assert os.stat(six[0]).st_ino == os.stat(six[1]).st_ino  # one file on disk, hard-linked from uv's cache
    assert os.stat(six[0]).st_nlink >= 3
