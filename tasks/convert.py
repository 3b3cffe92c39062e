"""Conversion of a model spec into a served format, in the converter's runtime, cached by content.

The artifact's cache key covers everything that defines its bytes: the spec, the builder's source file,
the converter runtime's requirements, the converter's entry script and the target format. A re-run with
the same inputs converts nothing and reports `cache_hit=True`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tasks.errors import ConfigError, ConversionError
from tasks.runtimes import REPO_ROOT, cache_root, ensure_runtime, requirements_sha256, runtime_env_vars
from tasks.spec import ModelSpec

CONVERT_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Converter:
    """A converter: the runtime it runs in and its entry script."""

    runtime: str
    entry: str  # path relative to the repository root

    def fingerprint(self) -> str:
        return hashlib.sha256(
            requirements_sha256(self.runtime).encode() + (REPO_ROOT / self.entry).read_bytes()
        ).hexdigest()


TORCH_CONVERTER = Converter("convert-torch", "docker/convert-torch/convert.py")
# Target format -> converter, for torch sources (the walking skeleton's lineage).
CONVERTERS: dict[str, Converter] = {"onnx": TORCH_CONVERTER, "torchscript": TORCH_CONVERTER}
FORMATS = tuple(CONVERTERS)


@dataclass(frozen=True)
class Artifact:
    """A converted model on local disk, with its conversion and parity record."""

    model: str
    format: str
    path: str
    sha256: str
    key: str
    cache_hit: bool
    record: dict

    @property
    def parity_passed(self) -> bool:
        return all(p["allclose"] for p in self.record["parity"])

    def parity_record(self, spec: ModelSpec) -> dict:
        """The DESIGN.md parity contract for this artifact."""
        worst_abs = max(p["max_abs_err"] for p in self.record["parity"])
        worst_rel = max(p["max_rel_err"] for p in self.record["parity"])
        return {
            "model": self.model, "format": self.format, "reference": self.record["reference"],
            "max_abs_err": worst_abs, "max_rel_err": worst_rel,
            "atol": spec.parity_atol, "rtol": spec.parity_rtol, "passed": self.parity_passed,
            "batch_sizes": [p["batch_size"] for p in self.record["parity"]],
            "artifact_sha256": self.sha256, "exporter": self.record.get("exporter"),
            "fallback_reason": self.record.get("fallback_reason"),
        }

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("model", "format", "path", "sha256", "key", "cache_hit", "record")}

    @classmethod
    def from_dict(cls, data: dict) -> Artifact:
        return cls(**data)


def artifact_key(spec: ModelSpec, fmt: str) -> str:
    converter = converter_for(spec, fmt)
    builder_file = REPO_ROOT / (spec.builder.split(":")[0].replace(".", "/") + ".py")
    parts = [spec.fingerprint(), hashlib.sha256(builder_file.read_bytes()).hexdigest(), converter.fingerprint(), fmt]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def converter_for(spec: ModelSpec, fmt: str) -> Converter:
    if fmt not in CONVERTERS:
        raise ConfigError(f"model {spec.name}: formats", fmt, f"must be one of {list(FORMATS)}")
    return CONVERTERS[fmt]


def convert(spec: ModelSpec, fmt: str, log=print) -> Artifact:
    """Return the artifact of `spec` in `fmt`, converting it in its runtime unless the cache has it."""
    converter = converter_for(spec, fmt)
    key = artifact_key(spec, fmt)
    final_dir = cache_root() / "artifacts" / spec.name / fmt / key[:20]
    if (final_dir / "conversion.json").is_file():
        return _load(spec, fmt, key, final_dir, cache_hit=True)
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(final_dir.parent / f"{key[:20]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final_dir / "conversion.json").is_file():
            return _load(spec, fmt, key, final_dir, cache_hit=True)
        env = ensure_runtime(converter.runtime, log=log)
        work = Path(tempfile.mkdtemp(prefix=f".{key[:20]}-", dir=final_dir.parent))
        try:
            spec_file = work / "spec.json"
            spec_file.write_text(spec.to_json())
            out = work / "out"
            argv = [str(env.python), str(REPO_ROOT / converter.entry), "--spec", str(spec_file), "--format", fmt, "--out", str(out)]
            log(f"convert {spec.name} -> {fmt} in runtime {converter.runtime}")
            proc = subprocess.run(argv, capture_output=True, text=True, env=runtime_env_vars(env), cwd=work, timeout=CONVERT_TIMEOUT_S)
            if proc.returncode != 0:
                raise ConversionError(f"converting model {spec.name} to {fmt} failed:\n{proc.stderr[-3000:]}")
            out.rename(final_dir)  # atomic: readers see a whole artifact or none
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _load(spec, fmt, key, final_dir, cache_hit=False)


def _load(spec: ModelSpec, fmt: str, key: str, directory: Path, cache_hit: bool) -> Artifact:
    record = json.loads((directory / "conversion.json").read_text())
    return Artifact(spec.name, fmt, str(directory / record["file"]), record["sha256"], key, cache_hit, record)
