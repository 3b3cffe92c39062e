"""The converter graph: which runtime turns which format into which, and the path from a source to a target.

Nodes are formats. `torch` (a module from a builder, or a state dict loaded into one) and `keras` are
source-only; `onnx`, `torchscript`, `savedmodel` and `tensorrt` are the served formats (`FORMATS`). A hop
from a format to itself imports a bring-your-own file: it is loaded, run and parity-checked, not changed.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass

from tasks.core.errors import ConfigError
from tasks.core.paths import REPO_ROOT
from tasks.core.spec import DTYPES, ModelSpec
from tasks.runtimes.venvs import requirements_sha256

FORMATS = ("onnx", "torchscript", "savedmodel", "tensorrt")
# Input/output dtypes each format can carry (TensorRT has no float64 tensors).
FORMAT_DTYPES: dict[str, tuple[str, ...]] = {
    "onnx": DTYPES, "torchscript": DTYPES, "savedmodel": DTYPES,
    "tensorrt": tuple(d for d in DTYPES if d != "float64"),
}
# Files the runtime side reads besides its entry script: a change to them changes every artifact.
SHARED_RUNTIME_FILES = ("tasks/core/spec.py", "tasks/convert/parity.py")


@dataclass(frozen=True)
class Hop:
    """One converter: `source` -> `target`, run by `entry` inside `runtime`."""

    source: str
    target: str
    runtime: str
    entry: str  # path relative to the repository root
    needs_gpu: bool = False

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def fingerprint(self) -> str:
        """SHA-256 of what the converter's output depends on: runtime requirements, entry script, shared code."""
        digest = hashlib.sha256(requirements_sha256(self.runtime).encode())
        for rel in (self.entry, *SHARED_RUNTIME_FILES):
            digest.update((REPO_ROOT / rel).read_bytes())
        return digest.hexdigest()


_TORCH = ("convert-torch", "docker/convert-torch/convert.py")
_TF = ("convert-tf", "docker/convert-tf/convert.py")
_TRT = ("convert-tensorrt", "docker/convert-tensorrt/convert.py")
HOPS: tuple[Hop, ...] = (
    Hop("torch", "torchscript", *_TORCH),
    Hop("torch", "onnx", *_TORCH),
    Hop("torchscript", "torchscript", *_TORCH),
    Hop("torchscript", "onnx", *_TORCH),
    Hop("onnx", "onnx", *_TORCH),
    Hop("keras", "savedmodel", *_TF),
    Hop("savedmodel", "savedmodel", *_TF),
    Hop("savedmodel", "onnx", *_TF),
    Hop("onnx", "tensorrt", *_TRT, needs_gpu=True),
)


def reachable_formats(source: str) -> list[str]:
    """Every served format some path of hops reaches from `source` (the source itself when it is served)."""
    seen = {source}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for hop in HOPS:
            if hop.source == node and hop.target not in seen:
                seen.add(hop.target)
                queue.append(hop.target)
    return [f for f in FORMATS if f in seen]


def find_path(spec: ModelSpec, fmt: str) -> list[Hop]:
    """The shortest chain of hops from the spec's source to `fmt`; a ConfigError names what is reachable."""
    if fmt not in FORMATS:
        raise ConfigError(f"model {spec.name}: formats", fmt, f"must be one of {list(FORMATS)}")
    source = spec.source_kind
    if source == fmt:
        return [next(h for h in HOPS if h.source == h.target == fmt)]
    previous: dict[str, Hop] = {}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for hop in HOPS:
            if hop.source == node and hop.target != source and hop.target not in previous:
                previous[hop.target] = hop
                queue.append(hop.target)
    if fmt not in previous:
        raise ConfigError(f"model {spec.name}: formats", fmt,
                          f"cannot be reached from its {source} source; reachable formats: {reachable_formats(source)}")
    path = [previous[fmt]]
    while path[0].source != source:
        path.insert(0, previous[path[0].source])
    return path


def check_dtypes(spec: ModelSpec, path: list[Hop]) -> None:
    """Reject a tensor whose dtype a format on the path cannot carry."""
    for hop in path:
        allowed = FORMAT_DTYPES[hop.target]
        for kind, tensors in (("inputs", spec.inputs), ("outputs", spec.outputs)):
            for i, t in enumerate(tensors):
                if t.dtype not in allowed:
                    raise ConfigError(f"model {spec.name}: {kind}[{i}].dtype", t.dtype,
                                      f"{hop.target} cannot carry it; it carries {list(allowed)}")
