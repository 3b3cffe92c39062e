"""The CPU/memory budget of a server (tasks/serve/budget.py): how Params become CPU sets and limits, the
refusals naming the field, threads per server."""

from __future__ import annotations

import psutil
import pytest

from tasks.core.errors import ConfigError
from tasks.plan.config import RunConfig
from tasks.serve.budget import format_cpu_set, parse_cpu_set, parse_memory, plan_budget
from tasks.serve.options import ServingOptions

EIGHT = tuple(range(8))


@pytest.mark.parametrize(("server_cpus", "pin", "cpus", "generator"), [
    (None, True, (2, 3, 4, 5, 6, 7), (0, 1)),  # today's split: a quarter for the generator
    (None, False, (), ()),  # unpinned: every CPU
    (2, True, (6, 7), (0, 1)),  # a count: the host's last CPUs; the generator keeps its quarter of the rest
    (8, True, EIGHT, ()),  # every CPU to the server: the generator runs unpinned
    ("1,3", True, (1, 3), (0, 2)),  # a set: exactly those; the generator's quarter from the others
    ("0-3", False, (0, 1, 2, 3), ()),
])
def test_plan(server_cpus, pin, cpus, generator):
    budget = plan_budget(server_cpus, "2G", pin, EIGHT)
    assert (budget.cpus, budget.generator_cpus, budget.memory) == (cpus, generator, "2g")
    assert budget.cpu_count == len(cpus or EIGHT)
    assert budget.row_fields("docker") == {"server_cpus": format_cpu_set(cpus or EIGHT), "server_memory": "2g"}
    assert budget.row_fields("process") == {"server_cpus": format_cpu_set(cpus or EIGHT), "server_memory": None}


def test_two_core_host_and_one_core_host():
    assert plan_budget(None, None, True, (0, 1)).cpus == (1,)
    assert plan_budget(None, None, True, (0,)).cpus == ()  # one core: nothing to split
    assert plan_budget(1, None, True, (0, 1)).row_fields("docker") == {"server_cpus": "1", "server_memory": None}


@pytest.mark.parametrize(("server_cpus", "server_memory", "field", "rule"), [
    (0, None, "server_cpus", "from 1 to the 8 CPUs"),
    (9, None, "server_cpus", "from 1 to the 8 CPUs"),
    ("8-9", None, "server_cpus", "not among this host's usable CPUs (0-7)"),
    ("a-b", None, "server_cpus", "CPU count (an integer >= 1) or a CPU set"),
    ("3-1", None, "server_cpus", "from low to high"),
    (True, None, "server_cpus", "CPU count"),
    (None, "lots", "server_memory", "a size like '512m'"),
    (None, "10m", "server_memory", "at least 64m"),
])
def test_refusals_name_the_field(server_cpus, server_memory, field, rule):
    with pytest.raises(ConfigError) as info:
        plan_budget(server_cpus, server_memory, True, EIGHT)
    assert info.value.field == field and rule in info.value.rule


def test_run_config_checks_the_budget_on_this_host():
    host = len(psutil.Process().cpu_affinity())
    assert RunConfig.from_params({"server_cpus": host, "server_memory": "1g"}).server_cpus == host
    with pytest.raises(ConfigError, match="server_cpus"):
        RunConfig.from_params({"server_cpus": host + 1})
    with pytest.raises(ConfigError, match="images"):
        RunConfig.from_params({"images": "nightly"})


def test_parsers():
    assert parse_cpu_set("0-2,5") == (0, 1, 2, 5) and format_cpu_set((0, 1, 2, 5)) == "0-2,5"
    assert format_cpu_set((1, 3)) == "1,3" and format_cpu_set((4,)) == "4"
    assert parse_memory("512m") == 512 * 2**20 and parse_memory("2G") == 2 * 2**30


@pytest.mark.parametrize(("cpus", "instances", "per_instance", "process"), [
    (0, 1, 1, 1),  # unknown: one thread per instance, as before
    (1, 1, 1, 1),
    (4, 1, 4, 4),
    (4, 2, 2, 4),
    (3, 2, 1, 2),
    (1, 3, 1, 3),  # more instances than CPUs: still one thread each
])
def test_threads_follow_the_cpus(cpus, instances, per_instance, process):
    options = ServingOptions(cpus=cpus, instances=instances)
    assert (options.threads_per_instance, options.process_threads) == (per_instance, process)
    assert options.thread_env == {"OMP_NUM_THREADS": str(per_instance), "MKL_NUM_THREADS": str(per_instance)}


def test_each_server_sizes_its_threads(mlp_spec, mlp_onnx, mlp_torchscript, tmp_path):
    """The rule per server (docs/servers.md): workers = instances, threads per worker = CPUs / instances."""
    import json

    from tasks.serve.servers import get_server

    options = ServingOptions(cpus=4, instances=2)
    triton = get_server("triton", options)
    assert 'key: "num_threads" value: { string_value: "2" }' in triton.config_text(mlp_spec, "onnx",
                                                                                   python_backend=True)
    assert 'key: "intra_op_thread_count" value: { string_value: "2" }' in triton.config_text(mlp_spec, "onnx")
    assert 'key: "INTRA_OP_THREAD_COUNT" value: { string_value: "2" }' in triton.config_text(mlp_spec, "torchscript")
    torchserve = get_server("torchserve", options)
    props = torchserve.properties(mlp_spec, {n: ("127.0.0.1", 1) for n in torchserve.port_names}, "/s", "")
    assert "default_workers_per_model=2" in props and "number_of_netty_threads=4" in props
    bentoml = get_server("bentoml", options)
    layout = bentoml.write_layout(mlp_onnx, mlp_spec, tmp_path / "b")
    config = json.loads((layout / "service.json").read_text())
    assert (config["workers"], config["threads"]) == (2, 2)
    kserve = get_server("kserve", options)  # one process: its threads are the instances' together
    spec = kserve.run_spec(kserve.write_layout(mlp_onnx, mlp_spec, tmp_path / "kserve"), mlp_spec,
                           {"http": 1, "grpc": 2})
    assert spec.container_argv[spec.container_argv.index("--threads") + 1] == "4"
    custom = get_server("custom", options)  # instances are uvicorn workers, each with its share of the CPUs
    spec = custom.run_spec(custom.write_layout(mlp_onnx, mlp_spec, tmp_path / "custom"), mlp_spec, {"http": 1})
    argv = spec.container_argv
    assert (argv[argv.index("--workers") + 1], argv[argv.index("--threads") + 1]) == ("2", "2")
    tf = get_server("tfserving", options)
    assert "--tensorflow_intra_op_parallelism=4" in tf._flags("/m", "models.config", 1, 2)
