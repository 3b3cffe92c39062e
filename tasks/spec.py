"""Model specs: what a model is, what it takes and returns, and how to make inputs for it.

A spec is a YAML file in `models/` (one per model). This module is imported both by the orchestrator and
inside runtimes (with only numpy available there), so it reads YAML lazily and otherwise needs numpy alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tasks.errors import ConfigError

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
DTYPES = ("float32", "float16", "int64", "int32")
GENERATORS = ("normal", "uniform", "token_ids", "ones")
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
    framework: str  # the source's framework: torch
    builder: str  # "module:function" that builds the source model from `builder_args` and `seed`
    builder_args: dict[str, Any]
    seed: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    parity_atol: float = 1e-4
    parity_rtol: float = 1e-3
    parity_batch_sizes: tuple[int, ...] = (1, 8)
    path: str = field(default="", compare=False)

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
        """SHA-256 of what defines the source model (the spec without its file path)."""
        data = asdict(self)
        data.pop("path")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def catalogue() -> dict[str, Path]:
    """Model name -> spec file, for every spec in `models/`."""
    return {p.stem: p for p in sorted(MODELS_DIR.glob("*.yaml"))}


def load_spec(name: str) -> ModelSpec:
    specs = catalogue()
    if name not in specs:
        raise ConfigError("models", name, f"must be one of {sorted(specs)}")
    return parse_spec(specs[name])


def parse_spec(path: Path) -> ModelSpec:
    import yaml

    raw = yaml.safe_load(path.read_text())
    name = raw.get("name") or path.stem
    where = f"model {name} ({path.name})"

    def need(obj: dict, key: str, ctx: str) -> Any:
        if key not in obj or obj[key] in (None, "", []):
            raise ConfigError(f"{where}: {ctx}{key}", obj.get(key), "is required")
        return obj[key]

    source = need(raw, "source", "")
    tensors = {}
    for kind in ("inputs", "outputs"):
        parsed = []
        for i, t in enumerate(need(raw, kind, "")):
            ctx = f"{kind}[{i}]."
            shape = tuple(int(d) for d in need(t, "shape", ctx))
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
            parsed.append(TensorSpec(need(t, "name", ctx), dtype, shape, gen, float(t.get("low", 0)), float(t.get("high", 1))))
        tensors[kind] = tuple(parsed)
    parity = raw.get("parity", {})
    return ModelSpec(
        name=name,
        framework=need(source, "framework", "source."),
        builder=need(source, "builder", "source."),
        builder_args=dict(source.get("args", {})),
        seed=int(source.get("seed", 0)),
        inputs=tensors["inputs"],
        outputs=tensors["outputs"],
        parity_atol=float(parity.get("atol", 1e-4)),
        parity_rtol=float(parity.get("rtol", 1e-3)),
        parity_batch_sizes=tuple(int(b) for b in parity.get("batch_sizes", (1, 8))),
        path=str(path),
    )


def make_inputs(spec: ModelSpec, batch_size: int, seed: int = INPUT_SEED) -> dict[str, Any]:
    """Seeded inputs for one batch, the same on every host and in every runtime."""
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
        else:
            value = np.ones(shape)
        arrays[t.name] = np.ascontiguousarray(value.astype(t.dtype))
    return arrays
