"""What a local run needs before it starts: its runtimes' venvs built (or found in the cache), side by side where
the cores allow, said per runtime."""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tasks.convert import find_path
from tasks.core.spec import load_spec
from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig
from tasks.runtimes.venvs import ensure_runtime
from tasks.serve.servers import get_server


def needed_runtimes(conf: dict) -> list[str]:
    """The runtimes a run of `conf` uses on the process launcher: converters on the paths, then servers."""
    config = RunConfig.from_params(conf)
    names = {hop.runtime for c in make_plan(config).conversions for hop in find_path(load_spec(c["model"]), c["format"])
             if not hop.needs_gpu}
    names |= {get_server(s).runtime for s in config.servers if not get_server(s).skip_reason(config.launcher)}
    return sorted(names)


def _say(line: str) -> None:
    sys.stdout.write(f"  {line}\n")  # one write: builds side by side print whole lines
    sys.stdout.flush()


def prebuild_runtimes(conf: dict) -> None:
    """Build (or find in the cache) every runtime the run needs, as many at once as the host has cores (uv's
    cache lock makes two builds that need one wheel unpack it once), and say which it was."""
    names = needed_runtimes(conf)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 1))) as pool:
        envs = pool.map(lambda name: ensure_runtime(name, log=_say), names)
        built = 0
        for name, env in zip(names, envs, strict=True):  # in order, each as soon as it and those before it are done
            built += env.built_now
            how = f"built in {env.build_s:.0f} s" if env.built_now else "reused from the cache, no reinstall"
            print(f"runtime {name}: {how} ({env.venv_dir})", flush=True)
    if built:
        print(f"runtimes: {built} of {len(names)} built in {time.monotonic() - started:.0f} s", flush=True)
