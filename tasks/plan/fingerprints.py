"""Which cells changed, as the plan step can tell before anything runs: each cell's inputs that are known without a
live server (the artifact's cache key, the runtime folder's files, the serving options), against those its last
measured night recorded (`inputs`, tasks/measure/inputs.py).

    changes = planned_changes(plan, nights)     # cell id -> what changed ("runtime custom: files of docker/custom/")

A server's version only a live server reports: it never reorders a night (the regression check still finds it). A
cell whose last night's regression record was not settled (a regression, a size uncertain, undecided or disputed:
nobody's reference) counts as changed too, so that its work goes on first. A cell with no measured night is new,
not changed.
"""

from __future__ import annotations

import json
from functools import lru_cache

from tasks.convert.core import artifact_key
from tasks.core.paths import runtime_home
from tasks.core.spec import load_spec
from tasks.plan.cells import Cell, Plan, rows_of
from tasks.plan.config import RunConfig
from tasks.plan.past_nights import PastNight
from tasks.runtimes.venvs import BUILDER, files_sha256, venv_builder
from tasks.serve.budget import plan_budget
from tasks.serve.options import ServingOptions, serving_fingerprint
from tasks.serve.servers import get_server

SETTLED = ("no_change", "no_history", "improvement", "environment")  # a night that is its cells' reference


@lru_cache(maxsize=64)
def _artifact_key(model: str, fmt: str) -> str | None:
    try:
        return artifact_key(load_spec(model), fmt)
    except Exception:  # noqa: BLE001 - a source that cannot be hashed here: the conversion will say why
        return None


@lru_cache(maxsize=32)
def _runtime_files(runtime: str) -> str:
    return files_sha256(runtime_home(runtime))


def planned_serving(config: RunConfig) -> dict:
    """The serving options tonight's untuned sessions run with (as tasks/measure/session.py builds them)."""
    budget = plan_budget(config.server_cpus, config.server_memory, config.pin_cpus)
    options = ServingOptions(max_batch_size=config.max_batch_size, dynamic_batching=config.dynamic_batching,
                             device=config.device, cpus=budget.cpu_count, images=config.images)
    return serving_fingerprint(options, None)


def _inputs(row: dict) -> dict | None:
    text = row.get("inputs")
    if not text:
        return None
    return json.loads(text) if isinstance(text, str) else text


def cell_changes(cell: Cell, inputs: dict, serving: dict) -> list[str]:
    """What of `cell`'s plan-time inputs differs from a measured night's `inputs` record."""
    changes = []
    key = _artifact_key(cell.model, cell.format)
    recorded = ((inputs.get("model") or {}).get("artifact") or {}).get("key")
    if key and recorded and key != recorded:
        changes.append(f"model {cell.model}/{cell.format}: artifact cache key {recorded[:8]}… → {key[:8]}…")
    runtime = get_server(cell.server).runtime
    files = (inputs.get("runtime") or {}).get("files_sha256")
    if files and files != _runtime_files(runtime):
        changes.append(f"runtime {runtime}: files of docker/{runtime}/ (requirements, entry scripts)")
    built_by = venv_builder(inputs.get("runtime") or {})
    if built_by and cell.launcher == "process" and built_by != BUILDER:
        changes.append(f"runtime {runtime}: venv built by {built_by} → {BUILDER}")
    before = {k: v for k, v in (inputs.get("serving") or {}).items() if k != "protocol"}
    now = {k: v for k, v in serving.items() if k != "protocol"}
    moved = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if before and moved:
        changes.append("serving " + ", ".join(f"{k} {before.get(k)} → {now.get(k)}" for k in moved))
    return changes


def planned_changes(plan: Plan, nights: list[PastNight]) -> dict[str, list[str]]:
    """Cell id -> what changed since its last measured night (or why its work goes on), for every cell that
    changed; cells with no measured night, or nothing changed, are left out."""
    serving = planned_serving(plan.config)
    out: dict[str, list[str]] = {}
    for cell in plan.cells:
        if cell.skip:
            continue
        for night in nights:
            rows = [r for r in rows_of(cell, night.rows) if r.get("status") == "ok" and _inputs(r)]
            if not rows:
                continue
            changes = cell_changes(cell, _inputs(rows[0]), serving)
            unsettled = sorted({r.get("verdict") for r in rows_of(cell, [r for r in night.records
                                                                       if r.get("kind") == "duet"])}
                               - set(SETTLED))
            if unsettled:
                changes.append(f"judged {', '.join(map(str, unsettled))} on {night.run_id}: the change is judged "
                               "again")
            if changes:
                out[cell.cell_id] = changes
            break
    return out
