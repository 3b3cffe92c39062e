"""The night's clock: the nightly DAG's deadline alert, evaluated by Airflow's own scheduler and run by its own
triggerer (neither `dag.test()` nor `airflow dags test` evaluates deadlines), reaches a real SMTP server on loopback
through the run's own Param `notify`; a notifier that fails is recorded and the next one still sends.

The run is slow on purpose and costs nothing: its host's pool has no free slot (0 here, as when another night
holds the host), so its first task waits and no server starts, while its deadline, set to 1 s by the documented
parse-time setting `SERVING_EVAL_NIGHT_DEADLINE_S`, passes. No task runs, so no API server is needed.
"""

from __future__ import annotations

import json
import time
from email import message_from_bytes
from urllib.parse import quote

from tasks.plan.deadline_alert import DEADLINE_ENV
from tasks.plan.hosts import deployed_hosts
from tasks.runtimes.ports import free_port
from tests.local_deployment import local_deployment
from tests.smtp_inbox import html_of, smtp_conn, smtp_inbox

DAG_ID = "nightly_serving_eval"
RUN_ID = "manual__night-running-long"
UI = "http://127.0.0.1:8080"
WAIT_S = 300  # for the DAG processor to store the DAG, and then for the alert's callback to end


def _wait(check, what: str, deployment) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        for name, proc in deployment.processes.items():
            if proc.poll() is not None:
                raise AssertionError(f"airflow {name} exited ({proc.returncode}) while waiting for {what}:\n"
                                     f"{deployment.logs()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {WAIT_S} s:\n{deployment.logs()}")
        time.sleep(1)


def test_a_night_past_its_deadline_reaches_the_team_through_its_own_notifiers():
    (host,) = deployed_hosts({})
    with smtp_inbox() as (port, inbox):
        env = {DEADLINE_ENV: "1", "AIRFLOW_CONN_NOTIFY_TEAM": smtp_conn(port, "unused-password"),
               "AIRFLOW_CONN_NOTIFY_CLOSED": smtp_conn(free_port(), "unused-password")}  # nothing listens there
        with local_deployment(env, pools={host.pool: 0}) as airflow:
            _wait(lambda: airflow.query("SELECT 1 FROM deadline_alert"), "stored deadline alert of the DAG", airflow)
            conf = {"notify": ["notify_closed", "notify_team"], "ui_base_url": UI}  # the rest: the nightly suite's
            airflow.airflow("dags", "trigger", DAG_ID, "--run-id", RUN_ID, "--conf", json.dumps(conf))
            # The triggerer records the callback's end after its mail was accepted (aiosmtpd keeps it first).
            _wait(lambda: airflow.query("SELECT 1 FROM callback WHERE state IN ('success', 'failed')"),
                  "end of the deadline alert's callback", airflow)
            sweep = f"sweep_{host.name}"  # the run's first task, in the host's pool
            _wait(lambda: airflow.query("SELECT 1 FROM task_instance WHERE run_id = ? AND task_id = ? AND state = "
                                        "'scheduled'", RUN_ID, sweep), f"{sweep} waiting for its host", airflow)
            (state, queued_at), = airflow.query("SELECT state, queued_at FROM dag_run WHERE run_id = ?", RUN_ID)
            tasks = dict(airflow.query("SELECT task_id, state FROM task_instance WHERE run_id = ?", RUN_ID))
            callbacks = airflow.query("SELECT state, output FROM callback")
            processes, home = list(airflow.processes.values()), airflow.home
        assert all(p.poll() is not None for p in processes) and not home.exists()  # all stopped, nothing left

    assert state == "running" and not [t for t, st in tasks.items() if st not in ("scheduled", None)], tasks
    ((callback_state, output),) = callbacks
    assert callback_state == "success", output
    closed, team = json.loads(output)  # the failing notifier is recorded, and the next one still gets the mail
    assert (closed["conn_id"], closed["delivered"]) == ("notify_closed", False) and "Refused" in closed["error"]
    assert (team["conn_id"], team["delivered"]) == ("notify_team", True), team
    (mail,) = inbox.messages
    message, html = message_from_bytes(mail), html_of(mail)
    assert message["To"] == "team@example.com" and RUN_ID in message["Subject"], message["Subject"]
    assert f"Run {RUN_ID} (suite nightly) ran past its deadline" in html
    # (still queued where the scheduler looked at the deadline before it started the run, 1 s after it was queued)
    assert "it is still running" in html or "it is still queued, not started" in html
    assert "its budget is 3,600 s (60 min)" in html  # the nightly suite's, the run's Param left empty
    assert "deadline is 1 s after a run is queued" in html
    assert str(queued_at)[:19].replace(" ", "T") in html
    link = f"{UI}/dags/{DAG_ID}/runs/{quote(RUN_ID)}"
    assert link in html
