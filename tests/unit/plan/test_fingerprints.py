"""Which cells changed since their last night, as the plan step tells before anything runs
(tasks/plan/fingerprints.py): the artifact's cache key, the runtime folder's files, the serving options, and an
unsettled verdict that makes the next night judge the change again."""

from __future__ import annotations

import json

from tasks.core.paths import runtime_home
from tasks.plan.cells import Cell, make_plan
from tasks.plan.config import RunConfig
from tasks.plan.fingerprints import cell_changes, planned_changes, planned_serving
from tasks.plan.past_nights import PastNight
from tasks.runtimes.venvs import files_sha256

CELL = Cell("mlp", "onnx", "custom", "process", "cpu", 1, "concurrency", 1.0, "kserve_v2_rest", "json")


def inputs(config: RunConfig, **runtime) -> dict:
    from tasks.convert.core import artifact_key
    from tasks.core.spec import load_spec

    return {"model": {"artifact": {"key": artifact_key(load_spec("mlp"), "onnx")}},
            "runtime": {"files_sha256": files_sha256(runtime_home("custom")), **runtime},
            "serving": planned_serving(config)}


def test_nothing_changed_is_no_change():
    config = RunConfig()
    assert cell_changes(CELL, inputs(config), planned_serving(config)) == []


def test_each_plan_time_input_that_moved_is_named():
    config = RunConfig()
    before = inputs(config, files_sha256="0" * 64)
    before["model"]["artifact"]["key"] = "f" * 64
    before["serving"] = {**before["serving"], "max_batch_size": 99}
    changes = cell_changes(CELL, before, planned_serving(config))
    assert len(changes) == 3
    assert changes[0].startswith("model mlp/onnx: artifact cache key ffffffff")
    assert changes[1] == "runtime custom: files of docker/custom/ (requirements, entry scripts)"
    assert changes[2] == "serving max_batch_size 99 → 8"


def test_planned_changes_read_the_newest_night_that_measured_the_cell_and_its_verdicts():
    config = RunConfig()
    plan = make_plan(config)
    cell = plan.cells[0]
    row = {"model": cell.model, "format": cell.format, "server": cell.server, "batch_size": 1, "mode": cell.mode,
           "load": cell.load, "protocol": cell.protocol, "status": "ok", "inputs": json.dumps(inputs(config))}
    same = PastNight("r2", "d", "complete", {}, [row])
    assert planned_changes(plan, [same]) == {}
    older = PastNight("r1", "d", "complete", {}, [{**row, "inputs": json.dumps(inputs(config, files_sha256="0"))}])
    assert planned_changes(plan, [same, older]) == {}  # the newest measured night decides
    assert cell.cell_id in planned_changes(plan, [older])
    judged = {**{k: row[k] for k in ("model", "format", "server", "batch_size", "mode", "load", "protocol")},
              "kind": "duet", "verdict": "undecided"}
    unsettled = PastNight("r2", "d", "complete", {}, [row], records=[judged])
    assert planned_changes(plan, [unsettled])[cell.cell_id] == ["judged undecided on r2: the change is judged again"]


def test_a_venv_built_by_another_builder_is_a_runtime_change_known_at_plan_time():
    """The switch from pip to uv (tasks/runtimes/venvs.py) changes every process-launched cell's runtime: a record
    that names no builder was built by pip; a container's runtime is its image, whatever built the venvs."""
    config = RunConfig()
    serving = planned_serving(config)
    assert cell_changes(CELL, inputs(config, launcher="process"), serving) == [
        "runtime custom: venv built by pip → uv"]
    assert cell_changes(CELL, inputs(config, launcher="process", builder="pip 26.3"), serving) == [
        "runtime custom: venv built by pip → uv"]
    assert cell_changes(CELL, inputs(config, launcher="process", builder="uv 0.13.10"), serving) == []
    docker = Cell("mlp", "onnx", "custom", "docker", "cpu", 1, "concurrency", 1.0, "kserve_v2_rest", "json")
    assert cell_changes(docker, inputs(config, launcher="docker"), serving) == []
