"""Model specs: the catalogue parses, parameters resolve, inputs are seeded, bad specs name model and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from tasks.core.errors import ConfigError
from tasks.core.spec import catalogue, load_spec, make_inputs, parse_spec

CATALOGUE = ("mlp", "tiny-cnn", "tiny-bert", "resnet50", "bert-base", "tiny-cnn-tf", "resnet50-tf")


def write_spec(tmp_path: Path, body: str, name: str = "byo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_catalogue_holds_the_built_in_models():
    assert set(CATALOGUE) <= set(catalogue())
    for name in CATALOGUE:
        spec = load_spec(name)
        assert spec.name == name and spec.inputs and spec.outputs
        assert 1 in spec.parity_batch_sizes and max(spec.parity_batch_sizes) > 1


def test_source_kinds_of_the_catalogue():
    assert load_spec("resnet50").source_kind == "torch"
    assert load_spec("resnet50-tf").source_kind == "keras"
    assert load_spec("tiny-cnn-tf").source_kind == "keras"


def test_bert_sequence_length_is_a_parameter():
    spec = load_spec("bert-base")
    assert spec.params["seq_len"] == 128
    assert spec.builder_args["layers"] == 12 and spec.builder_args["hidden"] == 768
    assert [t.shape for t in spec.inputs] == [(-1, 128), (-1, 128)]
    assert spec.outputs[0].shape == (-1, 128, 768)


def test_text_inputs_are_token_ids_in_the_vocabulary_and_prefix_masks():
    spec = load_spec("tiny-bert")
    x = make_inputs(spec, 8)
    assert x["input_ids"].dtype == np.int64 and x["input_ids"].shape == (8, 16)
    assert 0 <= x["input_ids"].min() and x["input_ids"].max() < spec.params["vocab_size"]
    mask = x["attention_mask"]
    assert set(np.unique(mask)) <= {0, 1} and mask[:, 0].all()
    assert (np.diff(mask, axis=1) <= 0).all()  # ones, then zeros: right padding
    assert (mask.sum(axis=1) >= 8).all()  # at least `low` (0.5) of the row is kept


def test_inputs_are_reproducible_per_batch_size():
    spec = load_spec("tiny-cnn")
    a, b = make_inputs(spec, 4), make_inputs(spec, 4)
    assert np.array_equal(a["input"], b["input"]) and a["input"].shape == (4, 3, 32, 32)
    assert not np.array_equal(make_inputs(spec, 1)["input"][0], make_inputs(spec, 2, seed=1)["input"][0])


def test_spec_without_input_shapes_is_rejected(tmp_path):
    path = write_spec(tmp_path, """
        name: shapeless
        source: {framework: torch, builder: models.builders.torch_models:build_mlp}
        inputs: [{name: input, dtype: float32}]
        outputs: [{name: output, dtype: float32, shape: [-1, 10]}]
    """)
    with pytest.raises(ConfigError) as err:
        parse_spec(path)
    assert "model shapeless" in str(err.value) and "inputs[0].shape" in str(err.value)


def test_spec_without_inputs_is_rejected(tmp_path):
    path = write_spec(tmp_path, """
        name: inputless
        source: {framework: torch, builder: models.builders.torch_models:build_mlp}
        outputs: [{name: output, dtype: float32, shape: [-1, 10]}]
    """)
    with pytest.raises(ConfigError, match="model inputless .*inputs"):
        parse_spec(path)


@pytest.mark.parametrize(("field", "body", "message"), [
    ("dtype", "inputs: [{name: x, dtype: complex64, shape: [-1, 4]}]", r"inputs\[0\]\.dtype"),
    ("batch axis", "inputs: [{name: x, dtype: float32, shape: [4, 4]}]", r"inputs\[0\]\.shape"),
    ("param", "inputs: [{name: x, dtype: float32, shape: [-1, $nope]}]", r"inputs\[0\]\.shape"),
    ("generator", "inputs: [{name: x, dtype: float32, shape: [-1, 4], generator: zipf}]", r"inputs\[0\]\.generator"),
])
def test_bad_tensors_are_rejected_naming_model_and_field(tmp_path, field, body, message):
    path = write_spec(tmp_path, f"""
        name: bad
        source: {{framework: torch, builder: models.builders.torch_models:build_mlp}}
        {body}
        outputs: [{{name: y, dtype: float32, shape: [-1, 10]}}]
    """)
    with pytest.raises(ConfigError, match=r"model bad .*" + message):
        parse_spec(path)


def test_file_source_needs_a_known_format_and_a_builder_for_state_dicts(tmp_path):
    tensors = ("\ninputs: [{name: x, dtype: float32, shape: [-1, 4]}]"
               "\noutputs: [{name: y, dtype: float32, shape: [-1, 2]}]\n")
    bad_format = write_spec(tmp_path, "name: m\nsource: {file: m.bin, format: pickle}" + tensors)
    with pytest.raises(ConfigError, match="model m .*source.format"):
        parse_spec(bad_format)
    no_builder = write_spec(tmp_path, "name: m\nsource: {file: m.pt, format: state_dict}" + tensors)
    with pytest.raises(ConfigError, match="model m .*source.builder"):
        parse_spec(no_builder)
    ok = parse_spec(write_spec(tmp_path, "name: m\nsource: {file: sub/m.onnx, format: onnx}" + tensors))
    assert ok.source_kind == "onnx" and ok.source_file == str((tmp_path / "sub" / "m.onnx").resolve())
    s3 = parse_spec(write_spec(tmp_path, "name: m\nsource: {file: 's3://b/k/m.pt', format: torchscript}" + tensors))
    assert s3.source_file == "s3://b/k/m.pt" and s3.framework == "torch"


def test_conversion_options_are_checked(tmp_path):
    spec = load_spec("mlp")
    assert spec.options_for("torchscript") == {"method": "trace"}
    assert spec.options_for("tensorrt", {"precision": "fp16"}) == {"precision": "fp16"}
    with pytest.raises(ConfigError, match="model mlp: options.precision"):
        spec.options_for("tensorrt", {"precision": "int4"})
    with pytest.raises(ConfigError, match="model mlp: options.method"):
        spec.options_for("onnx", {"method": "script"})


def test_spec_round_trips_through_json():
    import json

    from tasks.core.spec import ModelSpec

    spec = load_spec("tiny-bert")
    assert ModelSpec.from_dict(json.loads(spec.to_json())) == spec
