"""A runtime is rebuilt from its snapshot in the store (moto S3) after its cache entry is removed."""

from __future__ import annotations

import shutil

import pytest


@pytest.mark.integration
def test_a_reference_is_rebuilt_from_the_store_after_its_cache_entry_is_removed(embedded_s3, bucket, tmp_path,
                                                                                 monkeypatch):
    """The runtime folder a reference served with is kept in the store; on a host whose cache lost it (or never had
    it), the folder comes back from the store, checked by its hash, and its venv is built again from it with
    the same packages the reference recorded."""
    from tasks.runtimes.venvs import ensure_runtime, files_sha256, runtime_packages
    from tasks.store.runtimes import fetch_runtime, publish_runtime, snapshot_dir
    from tasks.store.s3 import S3Store

    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "tinyrt"
    folder.mkdir()
    (folder / "requirements.txt").write_text("six==1.17.0\n")
    (folder / "app.py").write_text("print('the reference night's entry script')\n")
    sha = files_sha256(folder)
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    assert publish_runtime(store, "tinyrt", folder, sha) and not publish_runtime(store, "tinyrt", folder, sha)
    recorded = runtime_packages(ensure_runtime("tinyrt", requirements=fetch_runtime(store, "tinyrt", sha)
                                               / "requirements.txt", log=lambda _: None))
    shutil.rmtree(tmp_path / "cache")  # the cache lost the snapshot and the venv
    restored = fetch_runtime(store, "tinyrt", sha)
    assert restored == snapshot_dir("tinyrt", sha) and files_sha256(restored) == sha
    assert (restored / "app.py").read_text() == (folder / "app.py").read_text()
    env = ensure_runtime("tinyrt", requirements=restored / "requirements.txt", log=lambda _: None)
    assert env.built_now and runtime_packages(env) == recorded and recorded["six"] == "1.17.0"
    with pytest.raises(Exception, match="cannot be rebuilt"):
        fetch_runtime(store, "tinyrt", "0" * 64)
