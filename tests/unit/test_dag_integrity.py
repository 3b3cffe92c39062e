"""The DAG files (dags/): they parse without connections, network or heavy imports, with the schedule, Params and
tasks the pipeline needs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from tasks.plan.config import RunConfig
from tests.dagrun import DAG_FILE, REPO, load_dag_module


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "nightly_serving_eval" in dagbag.dags


def test_schedule_and_run_settings(dagbag):
    dag = dagbag.dags["nightly_serving_eval"]
    assert dag.schedule == "0 2 * * *"
    assert "expression='0 2 * * *'" in repr(dag.timetable) and "Timezone('UTC')" in repr(dag.timetable)
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.doc_md
    measure = dag.get_task("measure_local")  # one host, `local`, without SERVING_EVAL_HOSTS: the default queue
    assert measure.pool == "serving_eval_host_local"
    assert measure.max_active_tis_per_dag == 1
    assert dag.get_task("duet_local").pool == "serving_eval_host_local"
    assert measure.queue == dag.get_task("convert").queue


def _validate(dag, **conf):
    """What a trigger does with a run conf: set each value on a copy of the Params and validate all."""
    params = copy.deepcopy(dag.params)
    for key, value in conf.items():
        params[key] = value
    params.validate()


@pytest.mark.parametrize(("conf", "field"), [
    ({"models": ["no-such-model"]}, "models"),
    ({"concurrencies": [0]}, "concurrencies"),
    ({"duration_s": -1}, "duration_s"),
    ({"servers": ["nginx"]}, "servers"),
    ({"warmup_s": 99999}, "warmup_s"),
])
def test_params_reject_bad_values_naming_the_field(dagbag, conf, field):
    from airflow.sdk.exceptions import ParamValidationError

    dag = dagbag.dags["nightly_serving_eval"]
    with pytest.raises(ParamValidationError, match=field):
        _validate(dag, **conf)


def test_defaults_validate(dagbag):
    _validate(dagbag.dags["nightly_serving_eval"])


def test_run_config_rejects_bad_values_naming_the_field():
    """The same rules hold without Airflow (CLI runs, old trigger forms)."""
    from tasks.core.errors import ConfigError
    from tasks.plan.config import RunConfig

    for conf, field in [({"models": ["nope"]}, "models"), ({"concurrencies": [0]}, "concurrencies"),
                        ({"duration_s": -1}, "duration_s"), ({"window_s": 20, "duration_s": 10}, "window_s")]:
        with pytest.raises(ConfigError, match=field):
            RunConfig.from_params(conf)


def test_parse_makes_no_connection_or_network_access():
    """Parsing in a fresh interpreter with sockets disabled and no connections defined, importing nothing heavy.
    How long the parse takes is a figure of the machine: benchmarks/dag_parse_time.py."""
    code = f"""
import socket, sys
def refuse(*a, **k):
    raise RuntimeError("network access at parse time")
socket.socket.connect = refuse
socket.create_connection = refuse
import importlib.util
spec = importlib.util.spec_from_file_location("dag_under_test", {str(DAG_FILE)!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
heavy = [m for m in ("torch", "tensorflow", "pandas", "great_expectations", "boto3") if m in sys.modules]
print(f"parsed {{','.join(heavy)}}")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    parsed, _, heavy = out.stdout.strip().splitlines()[-1].partition(" ")
    assert parsed == "parsed"
    assert heavy == "", f"heavy modules imported at parse time: {heavy}"


def test_the_schedule_runs_the_nightly_suite_and_the_form_overrides_it(dagbag):
    """The Params default to empty (the suite's values) with the nightly suite picked: what 02:00 runs."""
    from tasks.plan.config import RunConfig

    dag = dagbag.dags["nightly_serving_eval"]
    defaults = {k: dag.params[k] for k in dag.params}
    assert defaults["suite"] == "nightly" and all(v is None for k, v in defaults.items() if k != "suite")
    scheduled = RunConfig.from_params(defaults)
    assert scheduled.suite == "nightly" and "resnet50" in scheduled.models and scheduled.mode == "both"
    picked = RunConfig.from_params({**defaults, "suite": "smoke", "duration_s": 3.0})
    assert picked.models == ("mlp",) and picked.duration_s == 3.0
    _validate(dag, suite="smoke", duration_s=3.0)


def test_the_dag_runs_the_duets_in_the_host_pool_between_regressions_and_publish():
    dag = load_dag_module().serving_eval_dag
    duet = dag.get_task("duet_local")  # one per measuring host (tasks/plan/hosts.py); `local` by default
    assert duet.pool == "serving_eval_host_local"
    assert "regressions" in duet.upstream_task_ids and "publish" in duet.downstream_task_ids
    assert dag.params["duets"] is None  # empty in the form: the suite's value, else the default (on)
    scheduled = RunConfig.from_params({k: dag.params[k] for k in dag.params})
    assert scheduled.control_cell == "mlp/onnx/custom" and scheduled.duets is True


def test_the_deadline_alert_fires_past_the_scheduled_suites_budget_plus_ten_percent(dagbag):
    """Counted from when a run is queued (a manual run has that too), fixed at parse time, awaited by the triggerer
    (an AsyncCallback: the callable must import from the plugins folder and be a coroutine function)."""
    import importlib
    import inspect
    from datetime import timedelta

    from airflow.sdk import AsyncCallback, DeadlineReference

    (alert,) = dagbag.dags["nightly_serving_eval"].deadline
    assert alert.reference == DeadlineReference.DAGRUN_QUEUED_AT
    assert alert.interval == timedelta(seconds=3960)
    assert isinstance(alert.callback, AsyncCallback)
    assert alert.callback.path == "serving_eval_notifiers.alert_night_running_long"
    assert alert.callback.kwargs == {"deadline_s": 3960.0}
    module, _, name = alert.callback.path.rpartition(".")
    assert inspect.iscoroutinefunction(getattr(importlib.import_module(module), name))
