"""Entry point of the `convert-torch` runtime: one hop of a conversion path, with its parity measurement.

Hops: torch->torchscript (trace, or script with option method=script), torch->onnx (the dynamo exporter as
one file, falling back to the legacy exporter with the reason recorded), torchscript->onnx, and the imports
torchscript->torchscript and onnx->onnx of bring-your-own files. A `torch` source is built by the spec's
builder, with a state dict loaded into it when the spec's source is one. Runs inside the runtime (venv or
container), never in the Airflow worker; see tasks/convert/parity.py for the exit protocol.

    python docker/convert-torch/convert.py --spec spec.json --hop torch->onnx --out DIR --status FILE
"""

from __future__ import annotations

import importlib
import shutil
import time
from pathlib import Path

from tasks.convert.parity import (
    InputRejected,
    establish_reference,
    first_line,
    hop_source,
    parse_args,
    run_main,
    write_record,
)
from tasks.core.spec import ModelSpec, make_inputs

ARTIFACT_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}
ONNX_OPSET = 18


def build_module(spec: ModelSpec, state_dict: str = ""):
    import torch

    module_name, func_name = spec.builder.split(":")
    model = getattr(importlib.import_module(module_name), func_name)(seed=spec.seed, **spec.builder_args)
    if state_dict:
        try:
            weights = torch.load(state_dict, map_location="cpu", weights_only=True)
            model.load_state_dict(weights, strict=True)
        except Exception as exc:  # noqa: BLE001 - any load failure is a bad source file
            raise InputRejected("source.file", spec.source_file,
                                f"must be a state dict that {spec.builder} loads: {first_line(exc)}") from exc
    return model.eval()


def load_torchscript(spec: ModelSpec, path: str):
    import torch

    try:
        return torch.jit.load(path, map_location="cpu").eval()
    except Exception as exc:  # noqa: BLE001
        raise InputRejected("source.file", spec.source_file,
                            f"must be a loadable TorchScript archive: {first_line(exc)}") from exc


def onnx_session(path: str, spec: ModelSpec | None = None):
    import onnxruntime as ort

    try:
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        if spec is None:
            raise
        raise InputRejected("source.file", spec.source_file, f"must be a loadable ONNX model: {first_line(exc)}") \
            from exc


def run_torch(module, spec: ModelSpec, inputs: dict) -> list:
    import torch

    with torch.no_grad():
        out = module(*(torch.from_numpy(inputs[t.name]) for t in spec.inputs))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in outs]


def run_onnx(session, spec: ModelSpec, inputs: dict) -> list:
    names = [i.name for i in session.get_inputs()]
    missing = sorted(set(names) - set(inputs))
    if missing:
        raise InputRejected("inputs", sorted(inputs), f"must name the model's inputs {names}")
    return session.run([t.name for t in spec.outputs], {n: inputs[n] for n in names})


def export_onnx(model, spec: ModelSpec, path: Path) -> dict:
    import torch

    example = tuple(torch.from_numpy(a) for a in make_inputs(spec, 2).values())
    names_in = [t.name for t in spec.inputs]
    names_out = [t.name for t in spec.outputs]
    if not isinstance(model, torch.jit.ScriptModule):
        try:
            # The dynamo exporter, written as one self-contained file (no external data side files).
            batch = torch.export.Dim("batch", min=1, max=1024)
            dynamic_shapes = tuple({0: batch} for _ in names_in)
            program = torch.onnx.export(model, example, input_names=names_in, output_names=names_out,
                                        dynamic_shapes=dynamic_shapes, dynamo=True, external_data=False,
                                        opset_version=ONNX_OPSET, verbose=False)
            program.save(str(path), external_data=False)
            return {"exporter": "dynamo", "fallback_reason": None}
        except Exception as exc:  # noqa: BLE001 - any exporter failure falls back, and the reason is kept
            reason = f"dynamo exporter failed: {first_line(exc)}"
    else:
        reason = "a TorchScript source is exported by the legacy (TorchScript-based) exporter"
    torch.onnx.export(model, example, str(path), input_names=names_in, output_names=names_out,
                      dynamic_axes={n: {0: "batch"} for n in names_in + names_out}, dynamo=False, opset_version=17)
    return {"exporter": "legacy", "fallback_reason": reason}


def export_torchscript(model, spec: ModelSpec, path: Path, method: str) -> dict:
    import torch

    if method == "script":
        module = torch.jit.script(model)
    else:
        example = tuple(torch.from_numpy(a) for a in make_inputs(spec, 2).values())
        module = torch.jit.trace(model, example, strict=False, check_trace=False)
    module.save(str(path))
    return {"exporter": method, "fallback_reason": None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__)
    import onnxruntime
    import torch

    spec, out = args.spec_obj, args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    torch.manual_seed(0)
    source_path = hop_source(args)

    # Load the hop's input and, on a first hop, compute the source's reference outputs.
    if args.source_fmt == "torch":
        model = build_module(spec, args.source if spec.source_format == "state_dict" else "")
        run_source = lambda inputs: run_torch(model, spec, inputs)  # noqa: E731
        description = f"torch {torch.__version__} module {spec.builder} (seed {spec.seed})"
    elif args.source_fmt == "torchscript":
        model = load_torchscript(spec, source_path)
        run_source = lambda inputs: run_torch(model, spec, inputs)  # noqa: E731
        description = f"TorchScript source run by torch {torch.__version__}"
    else:
        session = onnx_session(source_path, spec if args.source else None)
        run_source = lambda inputs: run_onnx(session, spec, inputs)  # noqa: E731
        description = f"ONNX source run by onnxruntime {onnxruntime.__version__}"
    establish_reference(args, spec, run_source, description)

    artifact = out / ARTIFACT_FILES[args.target_fmt]
    if args.source_fmt == args.target_fmt:  # an import: the artifact is the source, checked as it is
        shutil.copy2(source_path, artifact)
        export = {"exporter": "import", "fallback_reason": None}
    elif args.target_fmt == "onnx":
        with torch.no_grad():
            export = export_onnx(model, spec, artifact)
    else:
        with torch.no_grad():
            export = export_torchscript(model, spec, artifact, args.options_obj.get("method", "trace"))

    if args.target_fmt == "onnx":
        check = onnx_session(str(artifact))
        run_artifact = lambda inputs: run_onnx(check, spec, inputs)  # noqa: E731
    else:
        loaded = torch.jit.load(str(artifact), map_location="cpu").eval()
        run_artifact = lambda inputs: run_torch(loaded, spec, inputs)  # noqa: E731
    from tasks.convert.parity import measure_parity

    parity = measure_parity(spec, out, run_artifact)
    write_record(args, artifact, export, parity, started,
                 {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__})
    return 0




if __name__ == "__main__":
    run_main(main)
