"""A measuring host without the artifact fetches it from the store (the moto S3 server)."""

from __future__ import annotations

import shutil

import pytest

from tasks.core.errors import ConfigError


@pytest.mark.integration
def test_a_host_without_the_artifact_fetches_it_from_the_store(mlp_spec, embedded_s3, bucket, tmp_path, monkeypatch):
    """Converted on one host (its artifact cache), served on another (an empty cache): fetched by key, checked."""
    from tasks.convert import convert, local_artifact
    from tasks.store.s3 import S3Store

    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    converted = convert(mlp_spec, "onnx", store=store)  # a local cache hit is shared too
    assert store.exists(f"eval/artifacts/mlp/onnx/{converted.key[:20]}/conversion.json")
    monkeypatch.setenv("SERVING_EVAL_ARTIFACTS", str(tmp_path / "other-host"))
    moved = type(converted)(**{**converted.to_dict(), "path": str(tmp_path / "converter-disk" / "model.onnx")})
    with pytest.raises(ConfigError, match="share_artifacts"):
        local_artifact(moved, None)
    here = local_artifact(moved, store)
    assert here.path.startswith(str(tmp_path / "other-host")) and here.sha256 == converted.sha256
    assert local_artifact(moved, store).path == here.path  # the second time from this host's cache
    with open(here.path, "ab") as f:
        f.write(b"tampered")
    with pytest.raises(Exception, match="SHA-256"):
        local_artifact(moved, store)
    shutil.rmtree(tmp_path / "other-host")
