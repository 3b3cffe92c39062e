"""Conversion speed: the small models cold and with a cache hit (goal: a hit >= 10x faster), then the full-size
resnet50 and bert-base to TorchScript and ONNX with their parity.

Runtimes are built (or found) first and their build time is printed apart, so conversion times exclude pip.
Artifacts go to a fresh temporary folder, so "cold" means converted now.

    .venv/bin/python benchmarks/convert_models.py [--small-only] [--with-tf-full]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SMALL = [("mlp", "onnx"), ("mlp", "torchscript"), ("tiny-cnn", "onnx"), ("tiny-cnn", "torchscript"),
         ("tiny-bert", "onnx"), ("tiny-bert", "torchscript"), ("tiny-cnn-tf", "savedmodel"), ("tiny-cnn-tf", "onnx")]
FULL = [("resnet50", "torchscript"), ("resnet50", "onnx"), ("bert-base", "torchscript"), ("bert-base", "onnx")]
FULL_TF = [("resnet50-tf", "savedmodel"), ("resnet50-tf", "onnx")]
CACHE_SPEEDUP_GOAL = 10.0


def timed_convert(model: str, fmt: str):
    from tasks.convert import convert
    from tasks.core.spec import load_spec

    started = time.perf_counter()
    artifact = convert(load_spec(model), fmt, log=lambda _: None)
    return artifact, time.perf_counter() - started


def parity_text(artifact) -> str:
    worst = max(p["max_abs_err"] for p in artifact.record["parity"])
    sizes = ",".join(str(p["batch_size"]) for p in artifact.record["parity"])
    return f"{'passed' if artifact.parity_passed else 'FAILED'} (max_abs_err {worst:.2e}, batches {sizes})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small-only", action="store_true", help="skip resnet50 and bert-base")
    parser.add_argument("--with-tf-full", action="store_true", help="also resnet50-tf to SavedModel and ONNX")
    args = parser.parse_args()
    artifacts = tempfile.mkdtemp(prefix="serving-eval-bench-artifacts-")  # a cold cache, removed afterwards
    os.environ["SERVING_EVAL_ARTIFACTS"] = artifacts
    try:
        return run(args)
    finally:
        shutil.rmtree(artifacts, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from tasks.runtimes.venvs import ensure_runtime

    for runtime in ("convert-torch", "convert-tf"):
        env = ensure_runtime(runtime, log=lambda _: None)
        print(f"runtime {runtime}: " + (f"built in {env.build_s:.1f} s" if env.built_now else "cached"))

    ok = True
    print(f"\n{'model':<13} {'format':<12} {'cold_s':>8} {'hit_s':>8} {'speedup':>9}  parity")
    for model, fmt in SMALL:
        cold, cold_s = timed_convert(model, fmt)
        hit, hit_s = timed_convert(model, fmt)
        speedup = cold_s / hit_s if hit_s > 0 else float("inf")
        ok &= cold.parity_passed and hit.cache_hit and not cold.cache_hit and speedup >= CACHE_SPEEDUP_GOAL
        print(f"{model:<13} {fmt:<12} {cold_s:8.2f} {hit_s:8.4f} {speedup:8.0f}x  {parity_text(cold)}")

    full = [] if args.small_only else FULL + (FULL_TF if args.with_tf_full else [])
    if full:
        print(f"\n{'model':<13} {'format':<12} {'convert_s':>10} {'size_MB':>8}  exporter / parity")
    for model, fmt in full:
        artifact, seconds = timed_convert(model, fmt)
        ok &= artifact.parity_passed
        size_mb = artifact.record["size_bytes"] / 1e6
        print(f"{model:<13} {fmt:<12} {seconds:10.1f} {size_mb:8.1f}  {artifact.record['exporter']} / "
              f"{parity_text(artifact)}")
        if artifact.record.get("fallback_reason"):
            print(f"{'':<13} fallback reason: {artifact.record['fallback_reason'][:200]}")
    verdict = f"all conversions passed parity and every cache hit was >= {CACHE_SPEEDUP_GOAL:.0f}x faster"
    print("\n" + (verdict if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
