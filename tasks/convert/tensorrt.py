"""Whether this host can build TensorRT plans, checked in the orchestrator before any runtime is built."""

from __future__ import annotations

SKIP_REASON = "needs an NVIDIA GPU and TensorRT"


def gpu_skip_reason() -> str | None:
    """None when NVML sees at least one NVIDIA GPU, else the reason a TensorRT conversion is skipped."""
    try:
        import pynvml
    except ImportError:
        return f"{SKIP_REASON} (NVML is not installed)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound and friends: no driver here
        return f"{SKIP_REASON} (no NVIDIA driver: {type(exc).__name__})"
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    return None if count > 0 else f"{SKIP_REASON} (no GPU found)"
