"""Bad input is refused before any work, naming the model and field; unsafe names never make unsafe paths.

On the old code: a spec whose `sha256` did not match was only found by the conversion (published `partial` with
zero measured cells, CLI exit 0); a run whose conversions all failed was `partial`; a run id ".." made the run's
work folder the cache root itself (which `start_run` then emptied); an unwritable cache folder gave a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.core.errors import ConfigError
from tasks.core.names import safe_component
from tasks.core.paths import cache_root
from tasks.pipeline import run_dir, run_pipeline, start_run
from tasks.store.s3 import S3Store
from tests.dagrun import REPO, read_run
from tests.reliability.faults import conf

BYO_SPEC = """name: {name}
source: {{file: {file}, format: onnx, sha256: {sha}}}
inputs: [{{name: {input}, dtype: float32, shape: [-1, 64]}}]
outputs: [{{name: output, dtype: float32, shape: [-1, 10]}}]
"""


def _byo(folder: Path, name: str, onnx: str, sha: str, input_name: str = "input") -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(BYO_SPEC.format(name=name, file=onnx, sha=sha, input=input_name))


def _cli_run(embedded_s3, params: dict, run_id: str, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO), **env}
    return subprocess.run([sys.executable, "-m", "tasks.cli", "run", "--run-id", run_id, "--conf", json.dumps(params)],
                          capture_output=True, text=True, env=environ, cwd=REPO, timeout=900)


def _keys(embedded_s3, bucket: str) -> list[str]:
    return S3Store(bucket, "", embedded_s3.connection("serving_eval_s3")).list_keys("")


def test_a_changed_byo_file_is_refused_by_the_plan_step_and_nothing_is_published(embedded_s3, bucket, tmp_path,
                                                                                  mlp_onnx):
    _byo(tmp_path / "specs", "byo-changed", mlp_onnx.path, "'" + "0a" * 32 + "'")
    proc = _cli_run(embedded_s3, conf(bucket, models=["byo-changed"]), "reliability-byo-sha",
                    SERVING_EVAL_MODELS=str(tmp_path / "specs"))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "model byo-changed: source.sha256" in proc.stderr and "changed or corrupt" in proc.stderr
    assert _keys(embedded_s3, bucket) == []  # nothing converted, started or published


def test_plan_refuses_a_changed_byo_file_as_the_run_does(tmp_path, mlp_onnx):
    """`tasks.cli plan` is a dry run of the plan step: it refuses what the run refuses, with the same exit code."""
    _byo(tmp_path / "specs", "byo-changed", mlp_onnx.path, "'" + "0a" * 32 + "'")
    environ = {**os.environ, "PYTHONPATH": str(REPO), "SERVING_EVAL_MODELS": str(tmp_path / "specs")}
    plan = [sys.executable, "-m", "tasks.cli", "plan", "--conf"]
    proc = subprocess.run([*plan, json.dumps({"models": ["byo-changed"], "servers": ["custom"]})],
                          capture_output=True, text=True, env=environ, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "model byo-changed: source.sha256" in proc.stderr and "changed or corrupt" in proc.stderr
    sha = hashlib.sha256(Path(mlp_onnx.path).read_bytes()).hexdigest()
    _byo(tmp_path / "specs", "byo-same", mlp_onnx.path, sha)
    proc = subprocess.run([*plan, json.dumps({"models": ["byo-same"], "servers": ["custom"]})],
                          capture_output=True, text=True, env=environ, cwd=REPO, timeout=300)
    assert proc.returncode == 0 and "byo-same.onnx.custom" in proc.stdout, proc.stderr[-2000:]


def test_wrong_input_names_fail_the_conversion_naming_the_field_and_the_run_is_failed(embedded_s3, bucket, tmp_path,
                                                                                     mlp_onnx):
    sha = hashlib.sha256(Path(mlp_onnx.path).read_bytes()).hexdigest()
    _byo(tmp_path / "specs", "byo-names", mlp_onnx.path, sha, input_name="pixels")
    proc = _cli_run(embedded_s3, conf(bucket, models=["byo-names"], concurrencies=[1]), "reliability-byo-names",
                    SERVING_EVAL_MODELS=str(tmp_path / "specs"))
    assert proc.returncode == 1, proc.stderr[-2000:]
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    assert manifest["status"] == "failed"  # no cell could be measured: not "partial"
    assert "inputs" in proc.stdout and "pixels" in proc.stdout
    assert "not fully ok" in proc.stderr


def test_window_longer_than_the_load_point_is_refused_before_work(embedded_s3, bucket):
    proc = _cli_run(embedded_s3, conf(bucket, window_s=10.0, duration_s=4.0), "reliability-window")
    assert proc.returncode == 2 and "window_s=10.0" in proc.stderr and "duration_s" in proc.stderr
    assert _keys(embedded_s3, bucket) == []


def test_an_unwritable_work_folder_is_one_clear_error(embedded_s3, bucket, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = _cli_run(embedded_s3, conf(bucket), "reliability-unwritable", SERVING_EVAL_CACHE=str(blocker / "cache"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "SERVING_EVAL_CACHE" in proc.stderr and "writable folder" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _keys(embedded_s3, bucket) == []


@pytest.mark.parametrize("name", ["../evil", "my model", "mödel", ".hidden"])
def test_unsafe_model_names_are_refused_naming_the_field(embedded_s3, bucket, tmp_path, monkeypatch, mlp_onnx, name):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "byo.yaml").write_text(BYO_SPEC.format(name=json.dumps(name), file=mlp_onnx.path, sha="",
                                                     input="input").replace("sha256: ,", ""))
    monkeypatch.setenv("SERVING_EVAL_MODELS", str(folder))
    with pytest.raises(ConfigError) as refused:
        start_run(conf(bucket, models=["byo"]), run_id="reliability-names", logical_date="2026-11-30",
                  conn=embedded_s3.connection("serving_eval_s3"))
    assert refused.value.field == "spec file byo.yaml: name" and "letters, digits" in refused.value.rule


@pytest.mark.parametrize("run_id", ["..", "../../etc", "a/../../b", ".hidden", "x y", "ünï/cödé", "a" * 300])
def test_unsafe_run_ids_become_safe_folder_and_key_names(run_id):
    safe = safe_component(run_id)
    assert safe and safe not in (".", "..") and "/" not in safe and not safe.startswith(".") and len(safe) <= 131
    assert run_dir(run_id).parent == cache_root() / "runs"
    assert safe_component(run_id) != safe_component(run_id + "x")


def test_a_run_with_an_unsafe_id_publishes_under_a_safe_key(embedded_s3, bucket):
    run_id = "reliability/../../ü x"
    summary, _ = run_pipeline(conf(bucket, concurrencies=[1], duration_s=1.5), run_id=run_id,
                              logical_date="2026-11-30T02:00:00+00:00", conn=embedded_s3.connection("serving_eval_s3"))
    assert summary["status"] == "complete"
    keys = _keys(embedded_s3, bucket)
    assert keys and all(".." not in k and " " not in k and k.startswith("eval/") for k in keys)
    pointer, manifest = read_run(S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3")))
    assert pointer["run_id"] == run_id and manifest["run_id"] == run_id  # the id itself is kept, as data
    assert not run_dir(run_id).exists()
