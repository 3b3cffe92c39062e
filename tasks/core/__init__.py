"""The shared core every stage builds on: errors, names, paths, model specs, metrics and the results contract.

    errors.py    `ConfigError(field, value, rule)` and the project's other exceptions
    names.py     names that become folder names and S3 key parts, made safe or refused
    paths.py     the repository, the runtimes' folders, this host's cache and run work folders
    spec.py      model specs (models/*.yaml): source, inputs, outputs, parity tolerances, seeded inputs
    metrics.py   every published metric once: unit, good direction, minimum effect, where it is judged and shown
    verdicts.py  the regression check's verdicts that count as a regression or an improvement
    results.py   the results table contract: each column once (type, unit, meaning, since), the cell key, the
                 Arrow schema of Parquet, CSV, the data dictionary (docs/results-reference.md)
    workloads.py what a row was sent (`workload`): the fixed request, or a replayed trace's label
    confidence.py  how sure a latency claim is: percentile counts and intervals, bound decisions over looks
    cost.py      what serving costs: core-seconds and GPU-seconds per 1,000 inferences, the price of a million
    metadata.py  provenance: host, CPU, GPU, code version, the measuring host's name
    progress.py  progress lines: one as each stage, session, load point, look, duet pair and size round ends
    faces.py     the lazy package faces (this file's `__getattr__`)
"""

from tasks.core.faces import lazy_exports

EXPORTS = {
    "ConfigError": "errors", "ServingEvalError": "errors", "ModelSpec": "spec", "load_spec": "spec",
    "METRICS": "metrics", "Metric": "metrics", "number": "metrics", "COLUMNS": "results", "CELL_KEY": "results",
    "SCHEMA_VERSION": "results", "cell_key": "results", "REPO_ROOT": "paths", "cache_root": "paths",
    "run_dir": "paths", "PIPELINE_VERSION": "metadata", "host_name": "metadata",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
