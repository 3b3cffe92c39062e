"""Entry point of the `convert-torch` runtime: build a torch source model, export it, measure parity.

Runs inside the runtime (venv or container), never in the Airflow worker. It records what happened in
`conversion.json` next to the artifact; the orchestrator judges parity against the spec's tolerances.

    python docker/convert-torch/convert.py --spec spec.json --format onnx --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

from tasks.spec import ModelSpec, make_inputs

ARTIFACT_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}


def build_source(spec: ModelSpec):
    module_name, func_name = spec.builder.split(":")
    builder = getattr(importlib.import_module(module_name), func_name)
    return builder(seed=spec.seed, **spec.builder_args)


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def export_onnx(model, spec: ModelSpec, path: Path) -> dict:
    import torch

    example = tuple(torch.from_numpy(a) for a in make_inputs(spec, 2).values())
    names_in = [t.name for t in spec.inputs]
    names_out = [t.name for t in spec.outputs]
    dynamic_axes = {n: {0: "batch"} for n in names_in + names_out}
    try:
        # The dynamo exporter, written as one self-contained file (no external data side files).
        program = torch.onnx.export(
            model, example, input_names=names_in, output_names=names_out,
            dynamic_axes=dynamic_axes, dynamo=True, external_data=False, verbose=False,
        )
        program.save(str(path), external_data=False)
        return {"exporter": "dynamo", "fallback_reason": None}
    except Exception as exc:  # noqa: BLE001 - any exporter failure falls back, and the reason is kept
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        torch.onnx.export(
            model, example, str(path), input_names=names_in, output_names=names_out,
            dynamic_axes=dynamic_axes, dynamo=False, opset_version=17,
        )
        return {"exporter": "legacy", "fallback_reason": reason}


def export_torchscript(model, spec: ModelSpec, path: Path, script: bool = False) -> dict:
    import torch

    example = tuple(torch.from_numpy(a) for a in make_inputs(spec, 2).values())
    module = torch.jit.script(model) if script else torch.jit.trace(model, example)
    module.save(str(path))
    return {"exporter": "script" if script else "trace", "fallback_reason": None}


def run_artifact(fmt: str, path: Path, spec: ModelSpec, inputs: dict):
    if fmt == "onnx":
        import onnxruntime as ort

        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run([t.name for t in spec.outputs], inputs)
    import torch

    module = torch.jit.load(str(path))
    with torch.no_grad():
        return [o.numpy() for o in as_tuple(module(*(torch.from_numpy(a) for a in inputs.values())))]


def measure_parity(model, fmt: str, path: Path, spec: ModelSpec) -> list[dict]:
    import numpy as np
    import torch

    records = []
    for batch_size in spec.parity_batch_sizes:
        inputs = make_inputs(spec, batch_size)
        with torch.no_grad():
            reference = [o.numpy() for o in as_tuple(model(*(torch.from_numpy(a) for a in inputs.values())))]
        actual = run_artifact(fmt, path, spec, inputs)
        abs_err = max(float(np.max(np.abs(r - a))) for r, a in zip(reference, actual))
        rel_err = max(float(np.max(np.abs(r - a) / (np.abs(r) + 1e-12))) for r, a in zip(reference, actual))
        shapes_ok = all(r.shape == a.shape for r, a in zip(reference, actual))
        allclose = shapes_ok and all(
            np.allclose(a, r, atol=spec.parity_atol, rtol=spec.parity_rtol) for r, a in zip(reference, actual)
        )
        records.append({
            "batch_size": batch_size, "max_abs_err": abs_err, "max_rel_err": rel_err,
            "shapes_match": shapes_ok, "allclose": bool(allclose),
        })
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--format", required=True, choices=sorted(ARTIFACT_FILES))
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--script", action="store_true", help="TorchScript by scripting instead of tracing")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch

    spec = ModelSpec.from_dict(json.loads(args.spec.read_text()))
    args.out.mkdir(parents=True, exist_ok=True)
    artifact = args.out / ARTIFACT_FILES[args.format]
    started = time.monotonic()
    torch.set_num_threads(1)
    model = build_source(spec)
    with torch.no_grad():
        if args.format == "onnx":
            export = export_onnx(model, spec, artifact)
        else:
            export = export_torchscript(model, spec, artifact, script=args.script)
    record = {
        "model": spec.name,
        "format": args.format,
        "file": artifact.name,
        "sha256": hashlib.sha256(artifact.read_bytes()).hexdigest(),
        "size_bytes": artifact.stat().st_size,
        **export,
        "reference": f"torch {torch.__version__} ({spec.framework} source)",
        "parity": measure_parity(model, args.format, artifact, spec),
        "convert_s": time.monotonic() - started,
        "versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "python": sys.version.split()[0]},
    }
    (args.out / "conversion.json").write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(1)
