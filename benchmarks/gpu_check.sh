#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: convert tiny-cnn to a TensorRT plan (fp32 and fp16) and check its parity
# against the torch source. Builds the orchestrator venv and the convert-torch and convert-tensorrt runtimes
# if needed (the TensorRT wheels are several GB). Exit status 0 only when both plans pass parity.
#
#     bash benchmarks/gpu_check.sh [model]        (default tiny-cnn)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-tiny-cnn}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
make venv >/dev/null
export PYTHONPATH="$PWD"
.venv/bin/python - "$MODEL" <<'PY'
import sys
import time

from tasks.convert import ConversionSkipped, convert
from tasks.core.spec import load_spec

model = sys.argv[1]
failed = False
for precision in ("fp32", "fp16"):
    started = time.perf_counter()
    try:
        artifact = convert(load_spec(model), "tensorrt", options={"precision": precision})
    except ConversionSkipped as exc:
        print(f"{model} tensorrt {precision}: SKIPPED: {exc.reason}")
        failed = True
        continue
    seconds = time.perf_counter() - started
    rec = artifact.record
    print(f"{model} tensorrt {precision}: {rec['exporter']} path {' / '.join(rec['path'])} in {seconds:.1f} s "
          f"(cache hit: {artifact.cache_hit}), plan {artifact.path}")
    for p in rec["parity"]:
        print(f"  batch {p['batch_size']}: max_abs_err {p['max_abs_err']:.3e} max_rel_err {p['max_rel_err']:.3e} "
              f"(atol {rec['atol']}, rtol {rec['rtol']}) {'ok' if p['allclose'] else 'FAILED'}")
    failed |= not artifact.parity_passed
print("gpu check:", "FAILED" if failed else "passed")
sys.exit(1 if failed else 0)
PY
