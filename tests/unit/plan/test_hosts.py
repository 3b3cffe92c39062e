"""Measuring hosts (tasks/plan/hosts.py): the deployment's hosts, a run's target hosts, the spread of sessions,
the DAG's per-host tasks, per-host duets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks.core.errors import ConfigError
from tasks.plan.hosts import assign_hosts, check_hosts, check_worker_host, deployed_hosts, sessions_of
from tests.dagrun import DAG_FILE, REPO


def test_one_local_host_on_the_default_queue_without_the_variable():
    (host,) = deployed_hosts({})
    assert (host.name, host.queue, host.pool) == ("local", None, "serving_eval_host_local")


def test_each_deployed_host_has_its_own_queue_and_one_slot_pool():
    hosts = deployed_hosts({"SERVING_EVAL_HOSTS": "gpu-a, cpu-b"})
    assert [(h.name, h.queue, h.pool) for h in hosts] == [
        ("gpu-a", "serving_eval_host_gpu-a", "serving_eval_host_gpu-a"),
        ("cpu-b", "serving_eval_host_cpu-b", "serving_eval_host_cpu-b")]


@pytest.mark.parametrize("value", ["gpu a", "a,,b", "-x", "a,a", "ü"])
def test_bad_host_lists_are_refused_naming_the_variable(value):
    with pytest.raises(ConfigError, match="SERVING_EVAL_HOSTS"):
        deployed_hosts({"SERVING_EVAL_HOSTS": value})


def test_target_hosts_are_checked_against_the_deployment():
    env = {"SERVING_EVAL_HOSTS": "gpu-a,cpu-b"}
    assert check_hosts(None, env) == ("gpu-a", "cpu-b")
    assert check_hosts(("cpu-b",), env) == ("cpu-b",)
    for bad in (("gpu-z",), (), ("cpu-b", "cpu-b")):
        with pytest.raises(ConfigError, match="^hosts="):
            check_hosts(bad, env)


def test_run_config_refuses_an_unknown_host_naming_the_field(monkeypatch):
    from tasks.plan.config import RunConfig

    monkeypatch.setenv("SERVING_EVAL_HOSTS", "gpu-a,cpu-b")
    assert RunConfig.from_params({"hosts": ["cpu-b"]}).target_hosts() == ("cpu-b",)
    with pytest.raises(ConfigError, match="hosts='nope'.*gpu-a"):
        RunConfig.from_params({"hosts": ["nope"]})


def test_sessions_are_spread_longest_first_to_the_least_loaded_host_the_same_way_every_time():
    costs = {"a": 50, "b": 40, "c": 30, "d": 20, "e": 10}
    hosts = assign_hosts(list(costs.values()), ("h1", "h2"))
    placed = dict(zip(costs, hosts, strict=True))
    assert placed == {"a": "h1", "b": "h2", "c": "h2", "d": "h1", "e": "h1"}  # h1: 80 s, h2: 70 s
    assert assign_hosts(list(costs.values()), ("h1", "h2")) == hosts
    sessions = [{"session_id": s, "host": h} for s, h in placed.items()]
    assert [s["session_id"] for s in sessions_of(sessions, "h2")] == ["b", "c"]


def test_the_plan_spreads_its_sessions_over_the_run_hosts(monkeypatch):
    from tasks.plan.cells import make_plan
    from tasks.plan.config import RunConfig

    monkeypatch.setenv("SERVING_EVAL_HOSTS", "gpu-a,cpu-b")
    plan = make_plan(RunConfig.from_params({"suite": "smoke", "formats": ["onnx", "torchscript"]}))
    assert {s.host for s in plan.sessions} == {"gpu-a", "cpu-b"}
    plan = make_plan(RunConfig.from_params({"suite": "smoke", "formats": ["onnx", "torchscript"], "hosts": ["cpu-b"]}))
    assert {s.host for s in plan.sessions} == {"cpu-b"}


def test_a_worker_refuses_a_session_planned_on_another_host():
    env = {"SERVING_EVAL_HOSTS": "gpu-a,cpu-b", "SERVING_EVAL_HOST": "cpu-b"}
    check_worker_host("cpu-b", env)
    with pytest.raises(ConfigError, match="SERVING_EVAL_HOST='cpu-b'.*'gpu-a'"):
        check_worker_host("gpu-a", env)
    check_worker_host("local", {})  # one host: nothing to check


def _parse_dag(env_hosts: str | None) -> dict:
    code = f"""
import importlib.util, json
spec = importlib.util.spec_from_file_location("dag_under_test", {str(DAG_FILE)!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
dag = mod.serving_eval_dag
print(json.dumps({{t.task_id: [t.queue, t.pool, t.is_setup, t.is_teardown, sorted(t.upstream_task_ids)]
                  for t in dag.tasks}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "SERVING_EVAL_HOSTS"}
    if env_hosts is not None:
        env["SERVING_EVAL_HOSTS"] = env_hosts
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_dag_has_one_measuring_task_per_host_in_its_queue_and_pool():
    tasks = _parse_dag("gpu-a,cpu-b")
    default_queue = tasks["convert"][0]
    for host in ("gpu-a", "cpu-b"):
        queue = pool = f"serving_eval_host_{host}"
        for name in (f"measure_{host}", f"duet_{host}", f"sweep_{host}", f"sweep_run_{host}"):
            assert tasks[name][:2] == [queue, pool], name
        assert tasks[f"sweep_{host}"][2] and tasks[f"sweep_run_{host}"][3]  # setup, teardown
        assert f"sessions_{host}" in tasks[f"measure_{host}"][4]
    for name in ("plan", "convert", "collect", "validate", "regressions", "publish", "check"):
        assert tasks[name][0] == default_queue and tasks[name][1] == "default_pool", name
    assert {"duet_gpu-a", "duet_cpu-b"} <= set(tasks["publish"][4])
    assert {"measure_gpu-a", "measure_cpu-b"} <= set(tasks["collect"][4])


def test_merged_duets_take_each_record_from_the_host_that_settled_it():
    from tasks.regress.night_duets import merge_duets

    def rec(cell, verdict="pending"):
        return {"model": cell, "kind": "duet", "verdict": verdict}

    regressed = {"records": [rec("a"), rec("b"), rec("c"), {"model": "d", "kind": "inputs", "verdict": "no_change"}],
                 "duets": [{"duet_id": "duet0"}, {"duet_id": "duet1"}], "aa": {"duet_id": "aa.control"}}
    part_a = {**regressed, "records": [rec("a", "regression"), rec("b"), rec("c"), regressed["records"][3]],
              "duets": [{"duet_id": "duet0", "measured": {"pairs": []}}, {"duet_id": "duet1"}],
              "aa": {"duet_id": "aa.control", "measured": {"pairs": []}, "noise": {"throughput_rps": 0.01}}}
    part_b = {**regressed, "records": [rec("a"), rec("b", "no_change"), rec("c"), regressed["records"][3]],
              "duets": [{"duet_id": "duet0"}, {"duet_id": "duet1", "measured": {"pairs": []}}]}
    merged = merge_duets(regressed, [part_a, part_b])
    assert [r["verdict"] for r in merged["records"]] == ["regression", "no_change", "unconfirmed", "no_change"]
    assert "no measuring task ran" in merged["records"][2]["reason"]  # pending on every host: said so
    assert merged["regressions"] == 1 and merged["unconfirmed"] == 1
    assert [bool(g.get("measured")) for g in merged["duets"]] == [True, True]
    assert merged["aa"]["noise"] == {"throughput_rps": 0.01}
