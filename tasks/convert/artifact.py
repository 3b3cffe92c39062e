"""A converted model on local disk, with its conversion and parity record (`conversion.json`)."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.core.spec import ModelSpec


@dataclass(frozen=True)
class Artifact:
    """A converted model: its file (or SavedModel folder), content hash, cache key and conversion record."""

    model: str
    format: str
    path: str
    sha256: str
    key: str
    cache_hit: bool
    record: dict

    @property
    def parity_passed(self) -> bool:
        return bool(self.record["parity"]) and all(p["allclose"] for p in self.record["parity"])

    def parity_record(self, spec: ModelSpec) -> dict:
        """The parity record of this artifact (docs/design.md#the-parity-contract)."""
        worst_abs = max(p["max_abs_err"] for p in self.record["parity"])
        worst_rel = max(p["max_rel_err"] for p in self.record["parity"])
        ratios = [p["max_err_ratio"] for p in self.record["parity"] if "max_err_ratio" in p]
        return {
            "model": self.model, "format": self.format, "reference": self.record["reference"],
            "max_abs_err": worst_abs, "max_rel_err": worst_rel,
            # worst |a - b| / (atol + rtol * |b|): the allclose rule as one number, passes at <= 1
            "max_err_ratio": max(ratios) if ratios else None,
            "atol": self.record.get("atol", spec.parity_atol), "rtol": self.record.get("rtol", spec.parity_rtol),
            "passed": self.parity_passed,
            "batch_sizes": [p["batch_size"] for p in self.record["parity"]],
            "artifact_sha256": self.sha256, "exporter": self.record.get("exporter"),
            "fallback_reason": self.record.get("fallback_reason"),
            "source_sha256": self.record.get("source_sha256"), "path": self.record.get("path"),
            "options": self.record.get("options"),
        }

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("model", "format", "path", "sha256", "key", "cache_hit", "record")}

    @classmethod
    def from_dict(cls, data: dict) -> Artifact:
        return cls(**data)
