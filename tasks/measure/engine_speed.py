"""The engine's own speed next to the stacks that serve it: where two stacks run the same engine (ONNX Runtime
behind Triton, KServe, BentoML and the custom service), the gap between them is serving overhead or a setting,
and the engine measured in process, with the same threads on the same CPUs, is the ceiling they are read against.

Measured once per (model, format, batch size, threads) in a run (cached in the run's folder), in the `custom`
runtime (docker/custom/engine_speed.py, the engine classes of the custom service) on the CPUs the servers are
given, between server sessions (the host's session lock is held). Published in each row as
`engine_inprocess_rps`.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tasks.convert import Artifact
from tasks.core.paths import REPO_ROOT
from tasks.core.spec import ModelSpec
from tasks.runtimes.venvs import ensure_runtime, runtime_env_vars
from tasks.serve.base import link_or_copy

SCRIPT = REPO_ROOT / "docker" / "custom" / "engine_speed.py"
MEASURE_S = 2.0
TIMEOUT_S = 600
ENGINE_FORMATS = ("onnx", "torchscript", "savedmodel")  # what the custom runtime's engines load


def engine_speed(artifact: Artifact, spec: ModelSpec, batch_size: int, threads: int, cpus: tuple[int, ...],
                 run_dir: Path) -> dict | None:
    """{"engine", "rps", "p50_ms", ...} of the artifact in process, or None for a format it cannot load (or when
    the measurement fails: it is context for the report, never a reason to fail a cell)."""
    if artifact.format not in ENGINE_FORMATS:
        return None
    cache = Path(run_dir) / "engine-speed.json"
    key = f"{artifact.key}|b{batch_size}|t{threads}"
    with open(Path(run_dir) / "engine-speed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = json.loads(cache.read_text()) if cache.is_file() else {}
        if key not in known:
            known[key] = measure_in_process(artifact, spec, batch_size, threads, cpus)
            cache.write_text(json.dumps(known))
    return known[key]


def measure_in_process(artifact: Artifact, spec: ModelSpec, batch_size: int, threads: int,
                       cpus: tuple[int, ...]) -> dict | None:
    """One uncached measurement of the artifact in process ({"engine", "rps", "p50_ms", ...}), or None."""
    env = ensure_runtime("custom")
    with tempfile.TemporaryDirectory(prefix="serving-eval-engine-") as tmp:
        work = Path(tmp)
        model_dir = work / "model"
        model_dir.mkdir()
        source = Path(artifact.path)
        link_or_copy(source, model_dir / (source.stem + ".savedmodel" if source.is_dir() else source.name))
        (work / "spec.json").write_text(spec.to_json())
        argv = [str(env.python), str(SCRIPT), "--model-dir", str(model_dir), "--spec", str(work / "spec.json"),
                "--batch-size", str(batch_size), "--threads", str(threads), "--seconds", str(MEASURE_S)]
        environ = runtime_env_vars(env, {"PYTHONPATH": f"{SCRIPT.parent}{os.pathsep}{REPO_ROOT}",
                                         "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=TIMEOUT_S,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        except subprocess.TimeoutExpired:
            return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])
