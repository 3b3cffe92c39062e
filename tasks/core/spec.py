"""Model specs: what a model is, where its source comes from, what it takes and returns, how to make inputs.

A spec is a YAML file in `models/` (one per model), or any YAML file passed to `parse_spec` (bring your own
model). This module is imported both by the orchestrator and inside runtimes (with only numpy available there),
so it reads YAML lazily and otherwise needs numpy alone.

A source is either built (`source.builder`, a "module:function" called with `seed` and `args`) or a file
(`source.file`, a local path relative to the spec or an `s3://` URI, of `source.format` onnx | torchscript |
savedmodel | state_dict; a state dict also names the `builder` that makes the module it loads into).
`params` name values that shapes and builder args refer to as "$name" (e.g. a sequence length).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tasks.core.errors import ConfigError
from tasks.core.names import MODEL_NAME_RULE, is_safe_model_name
from tasks.core.paths import MODELS_DIR

MODELS_ENV = "SERVING_EVAL_MODELS"  # more folders of spec files, besides models/
DTYPES = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")
GENERATORS = ("normal", "uniform", "token_ids", "ones", "prefix_ones")
FRAMEWORKS = ("torch", "tensorflow")  # frameworks a builder can build in
FILE_FORMATS = ("onnx", "torchscript", "savedmodel", "state_dict")  # formats a bring-your-own source file can have
FILE_FRAMEWORK = {"onnx": "onnx", "torchscript": "torch", "savedmodel": "tensorflow", "state_dict": "torch"}
CONVERT_OPTIONS = {  # per target format: option -> allowed values (the first is the default)
    "torchscript": {"method": ("trace", "script")},
    "tensorrt": {"precision": ("fp32", "fp16")},
}
INPUT_SEED = 20260101  # seed of every generated input; parity and load payloads are reproducible


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]  # -1 marks the dynamic batch axis, always first
    generator: str = "normal"
    low: float = 0.0
    high: float = 1.0


@dataclass(frozen=True)
class ModelSpec:
    name: str
    framework: str  # the source's framework: torch | tensorflow | onnx
    builder: str  # "module:function" that builds the source model from `builder_args` and `seed` ("" for a file)
    builder_args: dict[str, Any]
    seed: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    parity_atol: float = 1e-4
    parity_rtol: float = 1e-3
    parity_batch_sizes: tuple[int, ...] = (1, 8)
    source_file: str = ""  # local path (absolute once parsed) or s3:// URI of a bring-your-own source
    source_format: str = ""  # onnx | torchscript | savedmodel | state_dict when `source_file` is set
    source_sha256: str = ""  # the expected SHA-256 of the source file, when the spec pins it
    params: dict[str, Any] = field(default_factory=dict)
    convert_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: str = field(default="", compare=False)

    @property
    def source_kind(self) -> str:
        """The node the converter graph starts from: torch | keras | onnx | torchscript | savedmodel."""
        if self.source_file and self.source_format != "state_dict":
            return self.source_format
        return "keras" if self.framework == "tensorflow" else "torch"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        data = dict(data)
        data["inputs"] = tuple(TensorSpec(**{**t, "shape": tuple(t["shape"])}) for t in data["inputs"])
        data["outputs"] = tuple(TensorSpec(**{**t, "shape": tuple(t["shape"])}) for t in data["outputs"])
        data["parity_batch_sizes"] = tuple(data.get("parity_batch_sizes", (1, 8)))
        return cls(**data)

    def fingerprint(self) -> str:
        """SHA-256 of what defines the model apart from its source bytes (no file path or URI)."""
        data = asdict(self)
        data.pop("path")
        data.pop("source_file")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def options_for(self, fmt: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The conversion options of `fmt`: defaults, then the spec's `convert:` section, then `overrides`."""
        allowed = CONVERT_OPTIONS.get(fmt, {})
        options = {k: v[0] for k, v in allowed.items()}
        for where, given in ((f"convert.{fmt}", self.convert_options.get(fmt, {})), ("options", overrides or {})):
            for key, value in given.items():
                if key not in allowed:
                    raise ConfigError(f"model {self.name}: {where}.{key}", value,
                                      f"is not an option of {fmt}; options are {sorted(allowed)}")
                if value not in allowed[key]:
                    raise ConfigError(f"model {self.name}: {where}.{key}", value,
                                      f"must be one of {list(allowed[key])}")
                options[key] = value
        return options


def catalogue() -> dict[str, Path]:
    """Model name -> spec file, for every spec in `models/` and in the folders of `$SERVING_EVAL_MODELS`
    (os.pathsep-separated: bring-your-own specs kept outside the repository; `models/` wins a name clash)."""
    import os

    folders = [MODELS_DIR, *(Path(p) for p in os.environ.get(MODELS_ENV, "").split(os.pathsep) if p)]
    specs: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            specs.setdefault(path.stem, path)
    return dict(sorted(specs.items()))


def load_spec(name: str) -> ModelSpec:
    specs = catalogue()
    if name not in specs:
        raise ConfigError("models", name, f"must be one of {sorted(specs)}")
    return parse_spec(specs[name])


def parse_spec(path: Path | str) -> ModelSpec:
    """Read and check one spec file; every error names the model, the field, the value and the rule."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError("spec file", str(path), "must exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError("spec file", str(path), f"must be valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"spec file {path.name}", type(raw).__name__, "must be a mapping")
    name = str(raw.get("name") or path.stem)
    if not is_safe_model_name(name):
        raise ConfigError(f"spec file {path.name}: name", name, MODEL_NAME_RULE)
    where = f"model {name} ({path.name})"

    def need(obj: dict, key: str, ctx: str) -> Any:
        if not isinstance(obj, dict) or key not in obj or obj[key] in (None, "", []):
            raise ConfigError(f"{where}: {ctx}{key}", obj.get(key) if isinstance(obj, dict) else obj, "is required")
        return obj[key]

    params = dict(raw.get("params") or {})

    def resolve(value: Any, ctx: str) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            if value[1:] not in params:
                raise ConfigError(f"{where}: {ctx}", value, f"names no entry of params {sorted(params)}")
            return params[value[1:]]
        return value

    source = need(raw, "source", "")
    file = str(source.get("file") or "")
    file_format = str(source.get("format") or "")
    builder = str(source.get("builder") or "")
    if file:
        if file_format not in FILE_FORMATS:
            raise ConfigError(f"{where}: source.format", file_format or None, f"must be one of {list(FILE_FORMATS)}")
        if not file.startswith("s3://"):
            file = str((path.parent / file).resolve())
        if file_format == "state_dict" and not builder:
            raise ConfigError(f"{where}: source.builder", None, "is required for a state_dict source")
        framework = FILE_FRAMEWORK[file_format]
        if source.get("framework") and source["framework"] != framework:
            raise ConfigError(f"{where}: source.framework", source["framework"],
                              f"must be {framework!r} for a {file_format} file (or left out)")
    else:
        framework = need(source, "framework", "source.")
        if framework not in FRAMEWORKS:
            raise ConfigError(f"{where}: source.framework", framework, f"must be one of {list(FRAMEWORKS)}")
        builder = need(source, "builder", "source.")
    if builder and (builder.count(":") != 1 or not all(builder.split(":"))):
        raise ConfigError(f"{where}: source.builder", builder, "must be 'module:function'")

    tensors = {}
    for kind in ("inputs", "outputs"):
        parsed = []
        items = need(raw, kind, "")
        if not isinstance(items, list):
            raise ConfigError(f"{where}: {kind}", items, "must be a list of tensors")
        for i, t in enumerate(items):
            ctx = f"{kind}[{i}]."
            dims = need(t, "shape", ctx)
            try:
                shape = tuple(int(resolve(d, f"{ctx}shape")) for d in dims)
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: {ctx}shape", dims, "must be a list of integers") from None
            if not shape or shape[0] != -1:
                raise ConfigError(f"{where}: {ctx}shape", list(shape), "must start with -1, the dynamic batch axis")
            if any(d <= 0 for d in shape[1:]):
                raise ConfigError(f"{where}: {ctx}shape", list(shape), "dimensions after the batch axis must be > 0")
            dtype = t.get("dtype", "float32")
            if dtype not in DTYPES:
                raise ConfigError(f"{where}: {ctx}dtype", dtype, f"must be one of {list(DTYPES)}")
            gen = t.get("generator", "normal")
            if gen not in GENERATORS:
                raise ConfigError(f"{where}: {ctx}generator", gen, f"must be one of {list(GENERATORS)}")
            low, high = float(resolve(t.get("low", 0), f"{ctx}low")), float(resolve(t.get("high", 1), f"{ctx}high"))
            if gen in ("uniform", "token_ids") and not low < high:
                raise ConfigError(f"{where}: {ctx}high", high, f"must be > low ({low}) for generator {gen}")
            parsed.append(TensorSpec(need(t, "name", ctx), dtype, shape, gen, low, high))
        tensors[kind] = tuple(parsed)
    for kind in ("inputs", "outputs"):
        names = [t.name for t in tensors[kind]]
        if len(set(names)) != len(names):
            raise ConfigError(f"{where}: {kind}", names, "names must be unique")
    parity = raw.get("parity") or {}
    batch_sizes = tuple(int(b) for b in parity.get("batch_sizes", (1, 8)))
    if 1 not in batch_sizes or not any(b > 1 for b in batch_sizes) or any(b < 1 for b in batch_sizes):
        raise ConfigError(f"{where}: parity.batch_sizes", list(batch_sizes), "must hold 1 and a batch size > 1")
    convert_options = dict(raw.get("convert") or {})
    spec = ModelSpec(
        name=name,
        framework=framework,
        builder=builder,
        builder_args={k: resolve(v, f"source.args.{k}") for k, v in dict(source.get("args") or {}).items()},
        seed=int(source.get("seed", 0)),
        inputs=tensors["inputs"],
        outputs=tensors["outputs"],
        parity_atol=float(parity.get("atol", 1e-4)),
        parity_rtol=float(parity.get("rtol", 1e-3)),
        parity_batch_sizes=batch_sizes,
        source_file=file,
        source_format=file_format if file else "",
        source_sha256=_sha256_field(source.get("sha256"), where),
        params=params,
        convert_options=convert_options,
        path=str(path),
    )
    for fmt in convert_options:
        spec.options_for(fmt)  # rejects unknown options now, not at conversion time
    return spec


def _sha256_field(value: Any, where: str) -> str:
    """A pinned source.sha256: 64 hex digits, or "" when not pinned."""
    if value is None or value == "":
        return ""
    text = str(value).strip().lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ConfigError(f"{where}: source.sha256", value, "must be 64 hexadecimal digits (quote it in YAML)")
    return text


def make_inputs(spec: ModelSpec, batch_size: int, seed: int = INPUT_SEED) -> dict[str, Any]:
    """Seeded inputs for one batch, the same on every host and in every runtime.

    Generators: `normal` (standard normal), `uniform` (in [low, high)), `token_ids` (integers in [low, high),
    e.g. a vocabulary), `ones` (e.g. an attention mask without padding) and `prefix_ones` (per row, ones for a
    random length of at least `low` x the row's length, then zeros: an attention mask with right padding).
    """
    import numpy as np

    rng = np.random.default_rng([seed, batch_size])
    arrays = {}
    for t in spec.inputs:
        shape = (batch_size, *t.shape[1:])
        if t.generator == "normal":
            value = rng.standard_normal(shape)
        elif t.generator == "uniform":
            value = rng.uniform(t.low, t.high, shape)
        elif t.generator == "token_ids":
            value = rng.integers(int(t.low), int(t.high), shape)
        elif t.generator == "prefix_ones":
            length = shape[-1]
            shortest = max(1, int(np.ceil(t.low * length)))
            keep = rng.integers(shortest, length + 1, shape[:-1])
            value = (np.arange(length) < keep[..., None]).astype(np.int64)
        else:
            value = np.ones(shape)
        arrays[t.name] = np.ascontiguousarray(value.astype(t.dtype))
    return arrays
