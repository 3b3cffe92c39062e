"""Conversion of a model spec into served formats, in converter runtimes, with parity checks and a cache.

    graph.py     the converter graph: hops (source -> target, runtime, entry script) and path finding
    sources.py   the model's source: built by a builder, or a file at a local path or an s3:// URI
    artifact.py  `Artifact`: a converted model on local disk with its conversion and parity record
    core.py      `convert()`: each hop of the path run in its runtime, cached by content (local + S3)
    tensorrt.py  whether this host can build TensorRT plans (an NVIDIA GPU), checked before any runtime
    parity.py    what the runtime entry scripts share (numpy only): references, comparisons, records
"""

from tasks.convert.artifact import Artifact
from tasks.convert.core import (
    ConversionSkipped,
    artifact_key,
    check_conversion,
    convert,
    local_artifact,
    recheck_parity,
)
from tasks.convert.graph import FORMATS, HOPS, SOURCE_KINDS, Hop, find_path, reachable_formats

__all__ = [
    "FORMATS", "HOPS", "SOURCE_KINDS", "Artifact", "ConversionSkipped", "Hop", "artifact_key", "check_conversion",
    "convert", "find_path", "local_artifact", "reachable_formats", "recheck_parity",
]
