"""Conversions on real torch / TensorFlow / ONNX Runtime in their runtimes, with the small models only.

Each converter with parity at batch 1 and > 1, a perturbed artifact caught, bring-your-own ONNX, TorchScript,
state dict and SavedModel sources from a local path and from the moto S3 server, the cache (local and shared
through S3) and bad input. Full-size models are in test_convert_full.py (slow).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tasks.convert import Artifact, artifact_key, convert, recheck_parity
from tasks.core.errors import ConfigError
from tasks.core.spec import load_spec, parse_spec
from tasks.runtimes.venvs import ensure_runtime, runtime_env_vars
from tasks.store.s3 import S3Store

pytestmark = pytest.mark.integration
QUIET = lambda _: None  # noqa: E731 - conversion progress lines are not needed here
MLP_TENSORS = """
inputs: [{name: input, dtype: float32, shape: [-1, 64], generator: normal}]
outputs: [{name: output, dtype: float32, shape: [-1, 10]}]
parity: {atol: 1.0e-4, rtol: 1.0e-3, batch_sizes: [1, 8]}
"""


def assert_parity(artifact: Artifact) -> None:
    parity = artifact.record["parity"]
    assert {p["batch_size"] for p in parity} >= {1} and any(p["batch_size"] > 1 for p in parity)
    assert artifact.parity_passed, parity
    assert Path(artifact.path).exists()


def byo_spec(tmp_path: Path, name: str, source: str, tensors: str = MLP_TENSORS) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nsource: {source}\n" + textwrap.dedent(tensors))
    return path


def in_runtime(runtime: str, code: str) -> None:
    env = ensure_runtime(runtime, log=QUIET)
    subprocess.run([str(env.python), "-c", code], check=True, env=runtime_env_vars(env), capture_output=True)


def file_sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize(("model", "fmt"), [
    ("mlp", "onnx"), ("mlp", "torchscript"),
    ("tiny-cnn", "onnx"), ("tiny-cnn", "torchscript"),
    ("tiny-bert", "onnx"), ("tiny-bert", "torchscript"),
    ("tiny-cnn-tf", "savedmodel"), ("tiny-cnn-tf", "onnx"),
])
def test_each_converter_passes_parity_at_batch_1_and_more(model, fmt):
    spec = load_spec(model)
    artifact = convert(spec, fmt, log=QUIET)
    assert_parity(artifact)
    record = artifact.parity_record(spec)
    assert record["passed"] and record["model"] == model and record["format"] == fmt
    assert set(record) >= {"model", "format", "reference", "max_abs_err", "max_rel_err", "atol", "rtol", "passed"}
    assert artifact.record["path"][-1].endswith(f"->{fmt}")


def test_onnx_records_its_exporter():
    artifact = convert(load_spec("tiny-bert"), "onnx", log=QUIET)
    assert artifact.record["exporter"] in ("dynamo", "legacy")
    if artifact.record["exporter"] == "legacy":
        assert artifact.record["fallback_reason"]


def test_torchscript_by_scripting():
    artifact = convert(load_spec("mlp"), "torchscript", log=QUIET, options={"method": "script"})
    assert artifact.record["exporter"] == "script" and artifact.record["options"] == {"method": "script"}
    assert_parity(artifact)
    assert artifact.key != convert(load_spec("mlp"), "torchscript", log=QUIET).key  # options are in the key


def test_artifact_sha256_is_the_file_hash(mlp_onnx):
    assert mlp_onnx.sha256 == file_sha(mlp_onnx.path)


def test_second_conversion_of_unchanged_inputs_does_no_work():
    spec = load_spec("tiny-cnn")
    first = convert(spec, "onnx", log=QUIET)
    lines: list[str] = []
    second = convert(spec, "onnx", log=lines.append)
    assert second.cache_hit and second.key == first.key and second.sha256 == first.sha256
    assert not lines  # no runtime started, nothing converted
    assert artifact_key(spec, "onnx") == first.key
    assert Artifact.from_dict(second.to_dict()) == second


def test_cache_is_shared_through_s3(embedded_s3, bucket, tmp_path, monkeypatch):
    store = S3Store(bucket, "serving-eval", embedded_s3.connection("artifacts"))
    spec = load_spec("mlp")
    monkeypatch.setenv("SERVING_EVAL_ARTIFACTS", str(tmp_path / "worker-a"))
    made = convert(spec, "torchscript", log=QUIET, store=store)
    assert not made.cache_hit
    keys = store.list_keys(f"serving-eval/artifacts/mlp/torchscript/{made.key[:20]}/")
    assert any(k.endswith("/conversion.json") for k in keys) and any(k.endswith("/model.pt") for k in keys)
    monkeypatch.setenv("SERVING_EVAL_ARTIFACTS", str(tmp_path / "worker-b"))  # another worker, empty local cache
    lines: list[str] = []
    shared = convert(spec, "torchscript", log=lines.append, store=store)
    assert shared.cache_hit and shared.sha256 == made.sha256 == file_sha(shared.path)
    assert lines and all("found in s3://" in line for line in lines)


def test_perturbed_artifact_is_caught_by_parity(mlp_spec, mlp_onnx, tmp_path):
    directory = tmp_path / "perturbed"
    shutil.copytree(Path(mlp_onnx.path).parent, directory)
    assert all(p["allclose"] for p in recheck_parity(mlp_spec, directory, log=QUIET))  # unchanged: passes
    in_runtime("convert-torch", textwrap.dedent(f"""
        import onnx
        from onnx import numpy_helper
        model = onnx.load({str(directory / 'model.onnx')!r})
        for weight in model.graph.initializer:  # every weight moved by 1 %: a subtly wrong artifact
            array = numpy_helper.to_array(weight)
            if array.dtype.kind == "f":
                weight.CopyFrom(numpy_helper.from_array(array * 1.01, weight.name))
        onnx.save(model, {str(directory / 'model.onnx')!r})
    """))
    parity = recheck_parity(mlp_spec, directory, log=QUIET)
    assert not any(p["allclose"] for p in parity) and min(p["max_abs_err"] for p in parity) > mlp_spec.parity_atol


# Bring your own model -----------------------------------------------------------------------------------------


@pytest.fixture()
def byo_files(mlp_onnx, mlp_torchscript, tmp_path) -> dict[str, Path]:
    files = {"onnx": tmp_path / "files" / "mlp.onnx", "torchscript": tmp_path / "files" / "mlp.pt"}
    files["onnx"].parent.mkdir()
    shutil.copy2(mlp_onnx.path, files["onnx"])
    shutil.copy2(mlp_torchscript.path, files["torchscript"])
    return files


@pytest.mark.parametrize(("source_format", "targets"), [("onnx", ["onnx"]), ("torchscript", ["torchscript", "onnx"])])
def test_byo_file_from_a_local_path(byo_files, tmp_path, source_format, targets):
    path = byo_files[source_format]
    source = f"{{file: files/{path.name}, format: {source_format}}}"
    spec = parse_spec(byo_spec(tmp_path, f"byo-{source_format}", source))
    for fmt in targets:
        artifact = convert(spec, fmt, log=QUIET)
        assert_parity(artifact)
        assert artifact.record["source_sha256"] == file_sha(str(path))
        assert artifact.parity_record(spec)["source_sha256"] == file_sha(str(path))
    if source_format == "onnx":
        with pytest.raises(ConfigError, match=r"formats='torchscript'.*reachable formats: \['onnx', 'tensorrt'\]"):
            convert(spec, "torchscript", log=QUIET)


@pytest.mark.parametrize("source_format", ["onnx", "torchscript"])
def test_byo_file_from_s3(byo_files, embedded_s3, bucket, tmp_path, source_format):
    path = byo_files[source_format]
    conn = embedded_s3.connection("models")
    S3Store(bucket, "", conn).client.upload_file(str(path), bucket, f"models/{path.name}")
    spec = parse_spec(byo_spec(tmp_path, f"s3-{source_format}",
                               f"{{file: 's3://{bucket}/models/{path.name}', format: {source_format}}}"))
    artifact = convert(spec, source_format, log=QUIET, conn=conn)
    assert_parity(artifact)
    assert artifact.record["source"] == f"s3://{bucket}/models/{path.name}"
    assert artifact.record["source_sha256"] == file_sha(str(path))
    again = convert(spec, source_format, log=QUIET, conn=conn)
    assert again.cache_hit and again.key == artifact.key


def test_byo_state_dict_with_a_builder(tmp_path):
    weights = tmp_path / "mlp-seed7.pt"
    in_runtime("convert-torch", textwrap.dedent(f"""
        import torch
        from models.builders.torch_models import build_mlp
        torch.save(build_mlp(seed=7, in_features=64, hidden=256, out_features=10).state_dict(), {str(weights)!r})
    """))
    source = ("{file: mlp-seed7.pt, format: state_dict, builder: 'models.builders.torch_models:build_mlp', "
              "args: {in_features: 64, hidden: 256, out_features: 10}}")
    spec = parse_spec(byo_spec(tmp_path, "byo-state-dict", source))
    artifact = convert(spec, "onnx", log=QUIET)
    assert_parity(artifact)
    built = convert(load_spec("mlp"), "onnx", log=QUIET)
    assert artifact.sha256 != built.sha256  # the state dict's weights (seed 7), not the builder's seed 0


def test_byo_savedmodel_folder(tmp_path):
    made = convert(load_spec("tiny-cnn-tf"), "savedmodel", log=QUIET)
    shutil.copytree(made.path, tmp_path / "cnn.savedmodel")
    tensors = """
    inputs: [{name: input, dtype: float32, shape: [-1, 32, 32, 3]}]
    outputs: [{name: logits, dtype: float32, shape: [-1, 10]}]
    parity: {batch_sizes: [1, 4]}
    """
    spec = parse_spec(byo_spec(tmp_path, "byo-savedmodel", "{file: cnn.savedmodel, format: savedmodel}", tensors))
    artifact = convert(spec, "onnx", log=QUIET)
    assert_parity(artifact)
    assert artifact.record["path"] == ["savedmodel->onnx"]


# Bad input, rejected before any server starts ---------------------------------------------------------------------


def test_missing_source_file(tmp_path):
    spec = parse_spec(byo_spec(tmp_path, "missing", "{file: nowhere.onnx, format: onnx}"))
    with pytest.raises(ConfigError, match=r"model missing: source.file=.*nowhere.onnx.*must exist"):
        convert(spec, "onnx", log=QUIET)


def test_missing_s3_source(embedded_s3, bucket, tmp_path):
    spec = parse_spec(byo_spec(tmp_path, "missing-s3", f"{{file: 's3://{bucket}/nowhere.onnx', format: onnx}}"))
    with pytest.raises(ConfigError, match=r"model missing-s3: source.file=.*must be readable through connection"):
        convert(spec, "onnx", log=QUIET, conn=embedded_s3.connection("models"))


@pytest.mark.parametrize(("source_format", "content", "rule"), [
    ("torchscript", b"not a zip archive", "a zip archive"),
    ("onnx", b"garbage", "does not start like one"),
    ("onnx", b"\x08\x07garbage that is no ModelProto", "must be a loadable ONNX model"),  # passes the cheap check
])
def test_corrupt_source_file(tmp_path, source_format, content, rule):
    (tmp_path / "model.bin").write_bytes(content)
    spec = parse_spec(byo_spec(tmp_path, "corrupt", f"{{file: model.bin, format: {source_format}}}"))
    with pytest.raises(ConfigError) as err:
        convert(spec, source_format, log=QUIET)
    assert str(err.value).startswith("model corrupt: source.file=") and rule in str(err.value)


def test_source_that_changed_since_the_spec_pinned_it(byo_files, tmp_path):
    source = f"{{file: files/mlp.onnx, format: onnx, sha256: '{'0' * 64}'}}"
    spec = parse_spec(byo_spec(tmp_path, "pinned", source))
    with pytest.raises(ConfigError, match=r"model pinned: source.sha256=.*must match the file"):
        convert(spec, "onnx", log=QUIET)


def test_tensorrt_entry_reports_skipped_where_tensorrt_is_missing(mlp_spec, mlp_onnx, tmp_path):
    """The runtime side of the skip: the entry script exits 3 with the reason when tensorrt does not import."""
    import json

    from tasks.convert.parity import EXIT_SKIPPED
    from tasks.convert.tensorrt import SKIP_REASON
    from tasks.core.paths import REPO_ROOT

    env = ensure_runtime("convert-torch", log=QUIET)  # has no tensorrt: stands in for a GPU host without it
    (tmp_path / "spec.json").write_text(mlp_spec.to_json())
    entry = REPO_ROOT / "docker/convert-tensorrt/convert.py"
    argv = [str(env.python), str(entry), "--spec", str(tmp_path / "spec.json"), "--hop", "onnx->tensorrt",
            "--upstream", str(Path(mlp_onnx.path).parent), "--out", str(tmp_path / "out"),
            "--status", str(tmp_path / "status.json")]
    proc = subprocess.run(argv, capture_output=True, text=True, env=runtime_env_vars(env))
    assert proc.returncode == EXIT_SKIPPED, proc.stderr
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "skipped" and status["reason"].startswith(SKIP_REASON)
