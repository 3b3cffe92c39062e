"""Runtime folders a test night serves instead of the checkout's (through `$SERVING_EVAL_RUNTIMES`), and the small
local packages that change them: an inert one (a package added that changes nothing) and a CPU agent (a package
whose import starts a thread that takes a share of the server's CPU, as a profiler or telemetry agent does).

The packages are wheels written by hand (a wheel is a zip of the files, its METADATA, WHEEL and RECORD), so uv
installs them from a file with no build step and no index. The custom service's runtime is trimmed to what serves
ONNX (its torch and TensorFlow pins out): its app imports each engine only when a model of that format loads, and a
venv of the four packages left builds in seconds from the package cache.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import zipfile
from pathlib import Path

from tasks.core.paths import DOCKER_DIR

ONNX_ONLY = ("fastapi", "uvicorn", "onnxruntime", "numpy")
# A thread that runs 4 ms of every 10 ms in every Python process of the venv that imports site (the server's):
# about 40 % of the server's one core here, so the stack serves slower with the package installed.
CPU_AGENT = '''import threading
import time


def _burn():
    while True:
        end = time.perf_counter() + 0.004
        while time.perf_counter() < end:
            pass
        time.sleep(0.006)


threading.Thread(target=_burn, name="se-cpu-agent", daemon=True).start()
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of `files` (name inside the wheel -> text); its path."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = {**{k: v.encode() for k, v in files.items()},
                f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
                f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: serving-eval tests\nRoot-Is-Purelib: true\n"
                                 b"Tag: py3-none-any\n"}
    record = [_record_line(k, v) for k, v in contents.items()] + [f"{info}/RECORD,,"]
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as wheel:
        for key, data in contents.items():
            wheel.writestr(key, data)
        wheel.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def inert_wheel(folder: Path) -> Path:
    return write_wheel(folder, "se-inert", "1.0", {"se_inert.py": "VALUE = 1\n"})


def cpu_agent_wheel(folder: Path) -> Path:
    return write_wheel(folder, "se-cpu-agent", "1.0", {"se_cpu_agent.py": CPU_AGENT,
                                                       "se_cpu_agent.pth": "import se_cpu_agent\n"})


def custom_runtime(root: Path, extra_lines: tuple[str, ...] = ()) -> Path:
    """`root`/custom: the checkout's custom runtime trimmed to ONNX, with `extra_lines` added to its
    requirements; `root` is what `$SERVING_EVAL_RUNTIMES` names."""
    folder = root / "custom"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(DOCKER_DIR / "custom", folder)
    lines = [line for line in (folder / "requirements.txt").read_text().splitlines()
             if line.split("==", 1)[0].strip() in ONNX_ONLY]
    (folder / "requirements.txt").write_text("\n".join([*lines, *extra_lines]) + "\n")
    return folder


def wheel_line(wheel: Path) -> str:
    name = wheel.name.split("-", 1)[0].replace("_", "-")
    return f"{name} @ {wheel.resolve().as_uri()}"
