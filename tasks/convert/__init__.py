"""Conversion of a model spec into served formats, in converter runtimes, with parity checks and a cache.

    graph.py     the converter graph: hops (source -> target, runtime, entry script) and path finding
    sources.py   the model's source: built by a builder, or a file at a local path or an s3:// URI
    artifact.py  `Artifact`: a converted model on local disk with its conversion and parity record
    core.py      `convert()`: each hop of the path run in its runtime, cached by content (local + S3)
    tensorrt.py  whether this host can build TensorRT plans (an NVIDIA GPU), checked before any runtime
    parity.py    what the runtime entry scripts share (numpy only): references, comparisons, records
"""

from tasks.core.faces import lazy_exports

EXPORTS = {
    "Artifact": "artifact", "ConversionSkipped": "core", "artifact_key": "core", "check_conversion": "core",
    "convert": "core", "local_artifact": "core", "recheck_parity": "core", "FORMATS": "graph", "HOPS": "graph",
    "Hop": "graph", "find_path": "graph", "reachable_formats": "graph",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
