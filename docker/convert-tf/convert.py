"""Entry point of the `convert-tf` runtime: one hop of a conversion path, with its parity measurement.

Hops: keras->savedmodel (a Keras model from the spec's builder, exported with a `serving_default` signature
whose inputs and outputs carry the spec's names), savedmodel->onnx (tf2onnx), and savedmodel->savedmodel, the
import of a bring-your-own SavedModel folder. Runs inside the runtime, never in the Airflow worker; see
tasks/convert/parity.py for the exit protocol.

    python docker/convert-tf/convert.py --spec spec.json --hop keras->savedmodel --out DIR --status FILE
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tasks.convert.parity import (  # noqa: E402 - TensorFlow reads its log level at import
    InputRejected,
    establish_reference,
    first_line,
    hop_source,
    measure_parity,
    parse_args,
    run_main,
    write_record,
)
from tasks.core.spec import ModelSpec  # noqa: E402

ARTIFACT_FILES = {"savedmodel": "model.savedmodel", "onnx": "model.onnx"}
ONNX_OPSET = 17
SIGNATURE = "serving_default"


def build_keras(spec: ModelSpec):
    module_name, func_name = spec.builder.split(":")
    return getattr(importlib.import_module(module_name), func_name)(seed=spec.seed, **spec.builder_args)


def run_keras(model, spec: ModelSpec, inputs: dict) -> list:
    args = [inputs[t.name] for t in spec.inputs]
    out = model(args if len(args) > 1 else args[0], training=False)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.numpy() if hasattr(o, "numpy") else o for o in outs]


def export_savedmodel(model, spec: ModelSpec, path: Path) -> dict:
    import keras
    import tensorflow as tf

    signature = [tf.TensorSpec([None, *t.shape[1:]], tf.as_dtype(t.dtype), name=t.name) for t in spec.inputs]

    def serve(*args):
        out = model(list(args) if len(args) > 1 else args[0], training=False)
        outs = out if isinstance(out, (list, tuple)) else [out]
        return {t.name: o for t, o in zip(spec.outputs, outs, strict=False)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(name=SIGNATURE, fn=serve, input_signature=signature)
    archive.write_out(str(path), verbose=False)
    return {"exporter": f"keras {keras.__version__} ExportArchive", "fallback_reason": None}


def load_savedmodel(spec: ModelSpec, path: str, from_user: bool):
    import tensorflow as tf

    try:
        fn = tf.saved_model.load(path).signatures[SIGNATURE]
    except Exception as exc:  # noqa: BLE001
        if not from_user:
            raise
        raise InputRejected("source.file", spec.source_file,
                            f"must be a SavedModel with a {SIGNATURE!r} signature: {first_line(exc)}") from exc
    names = sorted(fn.structured_input_signature[1])
    if from_user and names != sorted(t.name for t in spec.inputs):
        raise InputRejected("inputs", [t.name for t in spec.inputs], f"must name the SavedModel's inputs {names}")
    return fn


def run_savedmodel(fn, spec: ModelSpec, inputs: dict) -> list:
    import tensorflow as tf

    out = fn(**{t.name: tf.constant(inputs[t.name]) for t in spec.inputs})
    missing = [t.name for t in spec.outputs if t.name not in out]
    if missing:
        raise InputRejected("outputs", [t.name for t in spec.outputs],
                            f"must name the SavedModel's outputs {sorted(out)}")
    return [out[t.name].numpy() for t in spec.outputs]


def export_onnx(saved: str, spec: ModelSpec, path: Path) -> dict:
    """tf2onnx on the SavedModel's serving signature; inputs and outputs renamed to the spec's names."""
    import onnx
    import tf2onnx

    argv = [sys.executable, "-m", "tf2onnx.convert", "--saved-model", saved, "--signature_def", SIGNATURE,
            "--opset", str(ONNX_OPSET), "--output", str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tf2onnx failed:\n{proc.stderr[-3000:]}")
    model = onnx.load(str(path))
    renames = {}
    for values, tensors in ((model.graph.input, spec.inputs), (model.graph.output, spec.outputs)):
        for value in values:
            plain = value.name.split(":")[0]
            if plain != value.name and plain in {t.name for t in tensors}:
                renames[value.name] = plain
    for old, new in renames.items():
        for node in model.graph.node:
            node.input[:] = [new if n == old else n for n in node.input]
            node.output[:] = [new if n == old else n for n in node.output]
        for value in [*model.graph.input, *model.graph.output]:
            if value.name == old:
                value.name = new
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return {"exporter": f"tf2onnx {tf2onnx.__version__} (opset {ONNX_OPSET})", "fallback_reason": None,
            "renamed": renames}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__)
    import keras
    import onnxruntime
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    spec, out = args.spec_obj, args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    source_path = hop_source(args)

    if args.source_fmt == "keras":
        model = build_keras(spec)
        run_source = lambda inputs: run_keras(model, spec, inputs)  # noqa: E731
        description = f"Keras {keras.__version__} model {spec.builder} (seed {spec.seed}), TensorFlow {tf.__version__}"
    else:
        fn = load_savedmodel(spec, source_path, from_user=bool(args.source))
        run_source = lambda inputs: run_savedmodel(fn, spec, inputs)  # noqa: E731
        description = f"SavedModel source run by TensorFlow {tf.__version__}"
    establish_reference(args, spec, run_source, description)

    artifact = out / ARTIFACT_FILES[args.target_fmt]
    if args.source_fmt == args.target_fmt:
        shutil.copytree(source_path, artifact)
        export = {"exporter": "import", "fallback_reason": None}
    elif args.target_fmt == "savedmodel":
        export = export_savedmodel(model, spec, artifact)
    else:
        export = export_onnx(source_path, spec, artifact)

    if args.target_fmt == "onnx":
        session = onnxruntime.InferenceSession(str(artifact), providers=["CPUExecutionProvider"])
        parity = measure_parity(spec, out, lambda inputs: session.run([t.name for t in spec.outputs], inputs))
    else:
        loaded = load_savedmodel(spec, str(artifact), from_user=False)
        parity = measure_parity(spec, out, lambda inputs: run_savedmodel(loaded, spec, inputs))
    write_record(args, artifact, export, parity, started,
                 {"tensorflow": tf.__version__, "keras": keras.__version__, "onnxruntime": onnxruntime.__version__})
    return 0




if __name__ == "__main__":
    run_main(main)
