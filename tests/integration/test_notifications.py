"""The night reaches the team: real DAG runs (real servers, the moto S3 server) send their message through Airflow's
SmtpNotifier to a real SMTP server on loopback (aiosmtpd, started and stopped here), a notifier at a closed port is
recorded and never fails the run, a regression announced once is open the next night, a cell dropped between two
nights is missing, a planted secret shows nowhere; the watchdog DAG notices a store whose latest.json is too old."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from email import message_from_bytes

import pytest

from benchmarks.duet_nights import MLP_SPEC
from tasks.runtimes.ports import free_port
from tasks.serve.servers.custom import CustomServer
from tasks.store.layout import notifications_key
from tasks.store.s3 import S3Store
from tests.dagrun import REPO, fast_conf, load_dag_module, read_json_object, read_run
from tests.smtp_inbox import html_of, smtp_conn, smtp_inbox

SECRET = "planted-Secret-7c41d2"  # the notifiers' password: it must show in no message, log or object
DAY = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
UI = "http://127.0.0.1:8080"


@pytest.fixture()
def smtp_server():
    """A real SMTP server on 127.0.0.1, stopped after the test."""
    with smtp_inbox() as server:
        yield server


@pytest.fixture()
def notifiers(smtp_server, monkeypatch):
    """Two notifier connections in the environment: the team's SMTP server, and one at a port nothing listens on."""
    port, inbox = smtp_server
    monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_TEAM", smtp_conn(port, SECRET))
    monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_CLOSED", smtp_conn(free_port(), SECRET))
    return inbox


@pytest.fixture()
def nights(airflow_db, embedded_s3, bucket, tmp_path, monkeypatch):
    """A night of the DAG with the model file as the test writes it (`duet-mlp`, the MLP at `hidden`)."""
    for key, value in embedded_s3.airflow_conn_env("serving_eval_s3").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SERVING_EVAL_MODELS", str(tmp_path))
    base = fast_conf(bucket, models=["duet-mlp"], protocols=["best"], concurrencies=[2], duration_s=1.0,
                     warmup_s=0.3, window_s=0.25, duet_min_pairs=3, duet_max_pairs=6, fail_on_cell_failure=False,
                     ui_base_url=UI)

    def run(i: int, hidden: int, **conf):
        (tmp_path / "duet-mlp.yaml").write_text(MLP_SPEC.format(name="duet-mlp", seed=0, hidden=hidden))
        dag = load_dag_module().serving_eval_dag
        return dag.test(logical_date=DAY + timedelta(days=i), run_conf={**base, **conf})

    return run


def notifications(store: S3Store, manifest: dict) -> dict:
    return store.get_json(notifications_key(store, manifest["logical_date"], manifest["run_id"]))


def test_a_regression_reaches_the_team_once_then_stays_open(nights, notifiers, embedded_s3, bucket, monkeypatch,
                                                            capfd, caplog):
    caplog.set_level(logging.INFO)
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    assert nights(0, 256, notify=["notify_team"]).state == "success"
    _, first = read_run(store)
    assert notifications(store, first)["decision"].startswith("not sent: no new finding")  # its first night
    assert notifiers.messages == []  # quiet

    # Tonight the model has 60 times the compute (a regression measured beside its reference), and the custom
    # service speaks JSON only: its binary cell is no longer planned, with the same Params (missing).
    monkeypatch.setattr(CustomServer, "wires", {"json": CustomServer.wires["json"]})
    run = nights(1, 2048, notify=["notify_closed", "notify_team"])
    assert run.state == "success"  # fail_on_regression off; the closed notifier fails nothing
    _, second = read_run(store)
    assert second["run_id"] == run.run_id
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["publish"] == states["notify"] == "success"
    record = notifications(store, second)
    closed, team = record["deliveries"]
    assert (closed["conn_id"], closed["delivered"]) == ("notify_closed", False) and "Refused" in closed["error"]
    assert (team["conn_id"], team["delivered"]) == ("notify_team", True)
    (mail,) = notifiers.messages
    message, html = message_from_bytes(mail), html_of(mail)
    assert message["To"] == "team@example.com" and "new finding" in message["Subject"]
    regressions = [r for r in read_json_object(store, second, "regressions.json")["records"]
                   if r.get("kind") == "duet" and r["verdict"] == "regression"]
    assert regressions, "the 60x model must be a regression"
    assert "NEW regression: duet-mlp/onnx/custom concurrency 2 (kserve_v2_rest)" in html
    assert "NEW missing: duet-mlp.onnx.custom.process.cpu.b1.concurrency2.binary" in html
    link = f"{UI}/serving-eval/{second['prefix'].removeprefix('eval/')}/report.html"
    assert link in html and store.exists(f"{second['prefix']}/report.html")
    missing = [r for r in read_json_object(store, second, "regressions.json")["records"] if r["kind"] == "missing"]
    assert [(r["verdict"], r["reference_run_id"]) for r in missing] == [("missing", first["run_id"])]

    # The next night, the regression still there: open since the night it was announced, not new.
    # (notify_quiet: sent even if nothing is new; a metric regressed tonight only would be new, the rest open)
    run = nights(2, 2048, notify=["notify_team"], notify_quiet=True)
    assert run.state == "success"
    _, third = read_run(store)
    assert len(notifiers.messages) == 2
    text = html_of(notifiers.messages[-1])
    announced = {f["key"] for f in record["findings"] if f["kind"] == "regression"}
    again = [f for f in notifications(store, third)["findings"] if f["key"] in announced]
    assert again and all(not f["new"] and f["since"] == second["logical_date"] for f in again), again
    for finding in again:
        assert f"OPEN since {second['logical_date'][:10]} regression: {finding['where']}: {finding['metric']}" in text
    assert f"OPEN since {second['logical_date'][:10]} missing: duet-mlp.onnx.custom" in text
    kept = read_json_object(store, third, "record.json")
    (stack,) = kept["stacks"]
    assert (stack["stack"], stack["ok"], stack["missing"], len(kept["nights"])) == ("custom/onnx", 4, 2, 3)

    # The planted secret: in no message, no log line, no object of the store.
    assert all(SECRET.encode() not in m for m in notifiers.messages)
    out, err = capfd.readouterr()
    assert SECRET not in out and SECRET not in err
    assert not [r for r in caplog.records if SECRET in r.getMessage() and not r.name.startswith("mail")]
    for key in store.list_keys("eval/"):
        assert SECRET.encode() not in store.get(key), key


def test_the_watchdog_notices_a_store_whose_latest_is_too_old(airflow_db, embedded_s3, bucket, notifiers,
                                                              monkeypatch):
    from tasks.store.publish import publish_run

    for key, value in embedded_s3.airflow_conn_env("serving_eval_s3").items():
        monkeypatch.setenv(key, value)
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    old = (datetime.now(UTC) - timedelta(hours=40)).isoformat()
    publish_run(store, run_id="old-night", logical_date=old, files={"plan.json": b"{}"}, status="complete",
                provenance={})
    dag = load_dag_module(REPO / "dags" / "serving_eval_watchdog.py").serving_eval_watchdog_dag
    conf = {"notify": ["notify_team"], "s3_bucket": bucket, "s3_prefix": "eval", "ui_base_url": UI}
    assert dag.test(run_conf=conf).state == "success"
    (mail,) = notifiers.messages
    assert message_from_bytes(mail)["Subject"].startswith("serving-eval: no run published for")
    assert "old-night" in html_of(mail) and f"{UI}/serving-eval/" in html_of(mail)
    alarms = [k for k in store.list_keys("eval/notifications/watchdog/") if k.endswith("notifications.json")]
    assert len(alarms) == 1 and store.get_json(alarms[0])["delivered"] is True
    assert dag.test(run_conf=conf).state == "success"
    assert len(notifiers.messages) == 1  # the same missing night is announced once
