"""Entry point of the `convert-tensorrt` runtime: ONNX -> TensorRT plan (fp32 or fp16), parity on the GPU.

The plan is built with the TensorRT Python API from the upstream ONNX artifact, with one optimisation profile
whose batch axis covers 1 .. max(parity batch sizes, MAX_BATCH); its outputs are compared with the source's
reference outputs carried from the first hop. fp16 plans are judged with tolerances of at least FP16_TOLERANCE
(recorded in conversion.json). Where TensorRT or a GPU is missing the hop exits as skipped with the reason
"needs an NVIDIA GPU and TensorRT"; see tasks/convert/parity.py for the exit protocol.

    python docker/convert-tensorrt/convert.py --spec spec.json --hop onnx->tensorrt --upstream DIR --out DIR --status F
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tasks.convert.parity import Skipped, carry_reference, measure_parity, parse_args, run_main, write_record
from tasks.core.spec import ModelSpec

SKIP_REASON = "needs an NVIDIA GPU and TensorRT"
MAX_BATCH = 32
WORKSPACE_BYTES = 1 << 30
FP16_TOLERANCE = 1e-2


def import_tensorrt():
    try:
        import tensorrt as trt
        from cuda.bindings import runtime as cudart
    except ImportError as exc:
        raise Skipped(f"{SKIP_REASON} ({exc})") from exc
    err, count = cudart.cudaGetDeviceCount()
    if int(err) != 0 or count == 0:
        raise Skipped(f"{SKIP_REASON} (CUDA sees no GPU: {err})")
    return trt, cudart


def check(result):
    """cuda-python calls return (error, *values): raise on an error, return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    return values[0] if len(values) == 1 else values


def build_plan(trt, onnx_path: Path, spec: ModelSpec, precision: str) -> bytes:
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise RuntimeError(f"TensorRT's ONNX parser rejected {onnx_path.name}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    largest = max(MAX_BATCH, *spec.parity_batch_sizes)
    for t in spec.inputs:
        dims = tuple(t.shape[1:])
        profile.set_shape(t.name, (1, *dims), (max(spec.parity_batch_sizes), *dims), (largest, *dims))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise RuntimeError("TensorRT could not build an engine from the ONNX artifact (see the log above)")
    return bytes(plan)


class PlanRunner:
    """Runs a deserialised plan on numpy inputs: device buffers per call, one stream."""

    def __init__(self, trt, cudart, plan: bytes, spec: ModelSpec) -> None:
        self.trt, self.cudart, self.spec = trt, cudart, spec
        self.engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(plan)
        self.context = self.engine.create_execution_context()
        self.stream = check(cudart.cudaStreamCreate())

    def __call__(self, inputs: dict) -> list:
        import numpy as np

        trt, cudart = self.trt, self.cudart
        to_device = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        to_host = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        buffers = []
        try:
            for t in self.spec.inputs:
                host = np.ascontiguousarray(inputs[t.name].astype(trt.nptype(self.engine.get_tensor_dtype(t.name))))
                self.context.set_input_shape(t.name, host.shape)
                ptr = check(cudart.cudaMalloc(host.nbytes))
                buffers.append(ptr)
                check(cudart.cudaMemcpy(ptr, host.ctypes.data, host.nbytes, to_device))
                self.context.set_tensor_address(t.name, int(ptr))
            outputs = []
            for t in self.spec.outputs:
                shape = tuple(self.context.get_tensor_shape(t.name))
                host = np.empty(shape, dtype=trt.nptype(self.engine.get_tensor_dtype(t.name)))
                ptr = check(cudart.cudaMalloc(max(host.nbytes, 1)))
                buffers.append(ptr)
                self.context.set_tensor_address(t.name, int(ptr))
                outputs.append((host, ptr))
            if not self.context.execute_async_v3(int(self.stream)):
                raise RuntimeError("TensorRT execute_async_v3 failed")
            check(cudart.cudaStreamSynchronize(self.stream))
            for host, ptr in outputs:
                check(cudart.cudaMemcpy(host.ctypes.data, ptr, host.nbytes, to_host))
            return [host for host, _ in outputs]
        finally:
            for ptr in buffers:
                cudart.cudaFree(ptr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__)
    trt, cudart = import_tensorrt()
    spec, out = args.spec_obj, args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    upstream = Path(args.upstream)
    onnx_path = upstream / json.loads((upstream / "conversion.json").read_text())["file"]
    carry_reference(upstream, out)
    precision = args.options_obj.get("precision", "fp32")
    plan = build_plan(trt, onnx_path, spec, precision)
    artifact = out / "model.plan"
    artifact.write_bytes(plan)
    atol, rtol = spec.parity_atol, spec.parity_rtol
    if precision == "fp16":
        atol, rtol = max(atol, FP16_TOLERANCE), max(rtol, FP16_TOLERANCE)
    parity = measure_parity(spec, out, PlanRunner(trt, cudart, plan, spec), atol=atol, rtol=rtol)
    export = {"exporter": f"TensorRT {trt.__version__} ({precision})", "fallback_reason": None, "precision": precision,
              "max_batch_size": max(MAX_BATCH, *spec.parity_batch_sizes)}
    write_record(args, artifact, export, parity, started, {"tensorrt": trt.__version__}, atol=atol, rtol=rtol)
    return 0


if __name__ == "__main__":
    run_main(main)
