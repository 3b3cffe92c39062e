"""The plan (tasks/plan/cells.py): conversions and server sessions from a run config, impossible requests refused
up front, sweep cells, the `protocols` Param's cells and the cell key."""

from __future__ import annotations

import json

import pytest

from tasks.core.errors import ConfigError
from tasks.core.results import CELL_KEY, cell_key
from tasks.plan.cells import Plan, make_plan, rows_of
from tasks.plan.config import RunConfig


def test_sessions_cover_each_server_format_pair_with_every_load_point():
    plan = make_plan(RunConfig.from_params({"models": ["mlp"], "formats": ["onnx", "torchscript"],
                                            "servers": ["custom", "torchserve"], "concurrencies": [1, 2, 4],
                                            "batch_sizes": [1, 8]}))
    assert [s.session_id for s in plan.sessions] == [
        "mlp.onnx.custom.process.cpu", "mlp.torchscript.custom.process.cpu", "mlp.torchscript.torchserve.process.cpu"]
    assert all(len(s.cells) == 6 for s in plan.sessions)
    assert plan.conversions == [{"model": "mlp", "format": "onnx"}, {"model": "mlp", "format": "torchscript"}]
    assert len({c.cell_id for c in plan.cells}) == len(plan.cells) == 18


def test_formats_a_model_cannot_reach_are_left_out_for_that_model():
    plan = make_plan(RunConfig.from_params({"models": ["mlp", "tiny-cnn-tf"], "formats": ["onnx", "savedmodel"],
                                            "servers": ["custom"]}))
    assert {(s.model, s.format) for s in plan.sessions} == {
        ("mlp", "onnx"), ("tiny-cnn-tf", "onnx"), ("tiny-cnn-tf", "savedmodel")}


@pytest.mark.parametrize(("conf", "match"), [
    ({"models": ["mlp"], "formats": ["savedmodel"]}, "model mlp: formats.*reachable formats"),
    ({"servers": ["torchserve"], "formats": ["onnx"]}, "servers='torchserve'.*serves formats"),
    ({"models": ["nope"]}, "models='nope'"),
])
def test_impossible_requests_are_refused_before_anything_starts(conf, match):
    with pytest.raises(ConfigError, match=match):
        make_plan(RunConfig.from_params(conf))


def test_protocols_best_plans_every_wire_a_stack_speaks_and_skips_what_it_lacks():
    config = RunConfig.from_params({"servers": ["triton", "custom", "bentoml", "torchserve"],
                                    "formats": ["onnx", "torchscript"], "protocols": ["best", "grpc"],
                                    "concurrencies": [1], "control_cell": "none"})
    plan = make_plan(config)
    wires = {(c.server, c.format): [(c.wire, c.protocol, bool(c.skip)) for c in s.cells]
             for s in plan.sessions for c in s.cells}
    assert wires[("triton", "onnx")] == [("json", "kserve_v2_rest", False), ("binary", "kserve_v2_binary", False),
                                         ("grpc", "kserve_v2_grpc", False)]
    assert wires[("torchserve", "torchscript")] == [("json", "torchserve_rest", False),
                                                    ("binary", "torchserve_raw", False),
                                                    ("grpc", "torchserve_grpc", False)]
    assert wires[("custom", "onnx")] == [("json", "kserve_v2_rest", False), ("binary", "kserve_v2_binary", False),
                                         ("grpc", "grpc", True)]  # asked by name: a skipped cell, never json instead
    assert wires[("bentoml", "onnx")] == [("json", "bentoml_json", False), ("grpc", "grpc", True)]
    skipped = next(c for s in plan.sessions for c in s.cells if c.server == "bentoml" and c.skip)
    assert skipped.skip.startswith("server bentoml has no grpc wire: ") and skipped.cell_id.endswith(".grpc")
    keys = [c.key for c in plan.cells]
    assert len(keys) == len(set(keys)) and "protocol" in CELL_KEY  # one cell key per wire
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))).cells == plan.cells
    with pytest.raises(ConfigError, match="protocols"):
        RunConfig.from_params({"protocols": []})


def test_an_older_plans_protocol_reads_as_protocols():
    assert RunConfig.from_dict({"protocol": "default"}).protocols == ("json",)
    assert RunConfig.from_dict({"protocol": "grpc"}).protocols == ("grpc",)
    with pytest.raises(ConfigError, match="protocol='default': is not a Param"):
        RunConfig.from_params({"protocol": "default"})  # a new trigger names protocols


def test_a_row_before_1_1_keys_as_its_servers_rest_json():
    old = {"model": "mlp", "format": "onnx", "server": "torchserve", "launcher": "process", "device": "cpu",
           "batch_size": 1, "mode": "concurrency", "load": 1.0}
    key = dict(zip(CELL_KEY, cell_key(old), strict=True))
    assert key["protocol"] == "torchserve_rest" and key["config_id"] == "default" and key["workload"] == "fixed"
    assert cell_key({**old, "protocol": "torchserve_raw"}) != cell_key(old)
    cell = make_plan(RunConfig.from_params({"servers": ["custom"], "protocols": ["best"], "concurrencies": [1],
                                            "control_cell": "none"})).cells
    rows = [{**old, "server": "custom", "protocol": p, "status": "ok"} for p in ("kserve_v2_rest", "kserve_v2_binary")]
    assert [len(rows_of(c, rows)) for c in cell] == [1, 1]  # each wire's cell owns its own row


def test_sweeps_plan_one_cell_per_batch_size():
    plan = make_plan(RunConfig.from_params({"concurrency_sweep": "doubling", "concurrencies": [1, 16],
                                            "batch_sizes": [1, 8]}))
    assert [(c.mode, c.load, c.batch_size) for c in plan.cells] == [
        ("concurrency-sweep", 16.0, 1), ("concurrency-sweep", 16.0, 8)]
    plan = make_plan(RunConfig.from_params({"mode": "rate", "rates": [200, 50], "rate_search": True,
                                            "p99_bound_ms": 20, "control_cell": "none"}))
    assert [(c.mode, c.load) for c in plan.cells] == [("rate-search", 50.0)]
    # the sweep settings of the other mode change nothing
    assert [c.mode for c in make_plan(RunConfig.from_params({"rate_search": True})).cells] == ["concurrency"] * 2


@pytest.mark.parametrize(("params", "field"), [
    ({"mode": "rate", "rate_search": True}, "p99_bound_ms"),
    ({"p99_bound_ms": 0}, "p99_bound_ms"),
    ({"concurrency_sweep": "tripling"}, "concurrency_sweep"),
])
def test_bad_sweep_inputs_name_the_field(params, field):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_params(params)
    assert info.value.field == field


def test_a_run_without_a_control_keeps_it_off_through_plan_json():
    # The later tasks read the config back from plan.json: a control turned off must not come back as the default.
    off = RunConfig.from_params({"control_cell": "none"})
    assert off.control_cell is None
    assert RunConfig.from_dict(off.to_dict()).control_cell is None
    on = RunConfig.from_params({})
    assert RunConfig.from_dict(on.to_dict()).control_cell == on.control_cell == "mlp/onnx/custom"


def test_a_trace_is_planned_per_speed_on_each_stacks_efficient_wires_with_its_label_in_the_key():
    from tasks.loadgen.trace import load_trace

    label = load_trace("synthetic-day").label
    plan = make_plan(RunConfig.from_params({"servers": ["triton", "bentoml"], "protocols": ["best", "json"],
                                            "concurrencies": [1], "traces": ["synthetic-day"],
                                            "trace_speeds": [1, 2], "control_cell": "none"}))
    traced = {s.server: [(c.mode, c.load, c.wire) for c in s.cells if c.workload == label] for s in plan.sessions}
    # Triton: binary and gRPC, not JSON; BentoML speaks only JSON
    assert traced == {"triton": [("trace", 1.0, "binary"), ("trace", 1.0, "grpc"), ("trace", 2.0, "binary"),
                                 ("trace", 2.0, "grpc")],
                      "bentoml": [("trace", 1.0, "json"), ("trace", 2.0, "json")]}
    keys = [c.key for c in plan.cells]
    assert len(keys) == len(set(keys)) and len({c.cell_id for c in plan.cells}) == len(plan.cells)
    cell = next(c for c in plan.cells if c.workload == label)
    assert cell.cell_id.endswith(".trace1.binary.synthetic-day")
    rows = [{**cell.to_dict(), "status": "ok"}, {**cell.to_dict(), "workload": "fixed", "status": "ok"}]
    assert rows_of(cell, rows) == rows[:1]  # a fixed-request row at the same mode and load is another cell's


def test_a_trace_search_is_one_cell_per_trace_for_the_models_asked():
    plan = make_plan(RunConfig.from_params({"models": ["mlp", "tiny-bert"], "servers": ["custom"],
                                            "concurrencies": [1], "traces": ["synthetic-day"], "trace_search": True,
                                            "trace_speeds": [0.5, 4], "trace_models": ["tiny-bert"],
                                            "p99_bound_ms": 100.0, "control_cell": "none"}))
    traced = [(c.model, c.mode, c.load) for c in plan.cells if c.workload != "fixed"]
    assert traced == [("tiny-bert", "trace-search", 0.5)] and plan.cells[-1].is_sweep


@pytest.mark.parametrize(("params", "field"), [
    ({"traces": ["nope"]}, "traces='nope'"),
    ({"traces": ["synthetic-day"], "trace_speeds": [0]}, "trace_speeds=0"),
    ({"traces": ["synthetic-day"], "trace_speeds": [0.01]}, "trace_speeds=0.01"),  # 6,000 s at 0.01 x
    ({"traces": ["synthetic-day"], "trace_search": True}, "p99_bound_ms=None"),
    ({"traces": ["synthetic-day"], "trace_models": ["resnet50"]}, "trace_models='resnet50'"),
])
def test_a_bad_trace_param_is_refused_naming_it(params, field):
    with pytest.raises(ConfigError, match=field):
        RunConfig.from_params(params)
