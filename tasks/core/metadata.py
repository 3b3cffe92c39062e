"""Provenance collected by small explicit functions, once per run, and attached to every row."""

from __future__ import annotations

import os
import platform
import socket
import subprocess

from tasks.core.paths import REPO_ROOT

PIPELINE_VERSION = "0.1.0"
HOST_ENV = "SERVING_EVAL_HOST"  # the measuring host's name (a deployment sets it per worker)


def collect_cpu_metadata() -> dict:
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": model or "unknown", "cpu_count": os.cpu_count() or 1}


def collect_gpu_metadata() -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return {"gpu_name": None, "gpu_driver": None}
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {"gpu_name": name if isinstance(name, str) else name.decode(),
                "gpu_driver": driver if isinstance(driver, str) else driver.decode()}
    except Exception:  # noqa: BLE001 - no NVIDIA driver or library on this host
        return {"gpu_name": None, "gpu_driver": None}


def collect_host_metadata() -> dict:
    """The host a process runs on: its measuring-host name (`SERVING_EVAL_HOST`, else the machine's hostname), CPU
    and GPU. Each measuring task collects its own, so a row carries the host it was measured on."""
    return {"hostname": host_name(), **collect_cpu_metadata(), **collect_gpu_metadata()}


def collect_code_metadata() -> dict:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        sha = None
    return {"pipeline_version": PIPELINE_VERSION, "git_sha": sha}


def host_fingerprint(host: dict) -> str:
    """What makes two hosts comparable: the same CPU model and count and the same GPU."""
    return "|".join(str(host.get(k)) for k in ("cpu_model", "cpu_count", "gpu_name"))


def host_name() -> str:
    """The name of the host this process measures on: `SERVING_EVAL_HOST`, else the machine's hostname."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def measuring_hosts(rows: list[dict]) -> dict[str, dict]:
    """hostname -> host metadata of every host that measured a row of the run (a load point ran on it)."""
    keys = ("hostname", "cpu_model", "cpu_count", "gpu_name", "gpu_driver")
    return {r["hostname"]: {k: r.get(k) for k in keys} for r in rows
            if r.get("hostname") and r.get("requests") is not None}
