"""A secret planted in the store connection appears in no log, result or report; two runs started together
never have two servers up at once on one host (the second waits for the first's session).

Secrets: on the old code every server process inherited the whole environment, `AIRFLOW_CONN_*` included,
so a server that printed its environment published the secret in its log; now no runtime gets credentials.
Two runs: on the old code two CLI runs measured at the same time (the Airflow pool does not see CLI runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import replace

from tasks.pipeline import run_pipeline
from tasks.serve.servers import SERVERS, register_server
from tasks.serve.servers.custom import CustomServer
from tasks.store.embedded_s3 import ACCESS_KEY, REGION
from tasks.store.s3 import S3Store, connection_from_env
from tests.dagrun import REPO, read_json_object, read_run
from tests.reliability.faults import conf


class EnvDumpingCustomServer(CustomServer):
    """The real custom server, started through a shell that first prints its whole environment to the log, as
    some servers do at start-up."""

    name = "custom-envdump"

    def run_spec(self, layout, spec, ports):
        real = super().run_spec(layout, spec, ports)
        return replace(real, argv=("sh", "-c", 'env; exec "$0" "$@"', *real.argv))


def test_a_planted_secret_is_in_no_log_result_or_report(embedded_s3, bucket, monkeypatch, capsys):
    secret = f"planted-SECRET-{uuid.uuid4().hex}"
    value = json.dumps({"conn_type": "aws", "login": ACCESS_KEY, "password": secret,
                        "extra": {"endpoint_url": embedded_s3.endpoint_url, "region_name": REGION}})
    monkeypatch.setenv("AIRFLOW_CONN_SERVING_EVAL_S3", value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    register_server(EnvDumpingCustomServer)
    try:
        summary, _ = run_pipeline(conf(bucket, servers=["custom-envdump", "kserve"], concurrencies=[1],
                                       duration_s=1.5), run_id="reliability-secret",
                                  logical_date="2026-11-30T02:00:00+00:00",
                                  conn=connection_from_env("serving_eval_s3"))
    finally:
        SERVERS.pop(EnvDumpingCustomServer.name, None)
    assert summary["status"] == "complete"
    store = S3Store(bucket, "", embedded_s3.connection("serving_eval_s3"))
    keys = store.list_keys("")
    (dump,) = [k for k in keys if k.endswith("custom-envdump.process.cpu.log")]
    assert b"\nPATH=" in store.get(dump)  # the environment was printed into the published log
    assert any(k.endswith("report.html") for k in keys) and any(k.endswith("results.parquet") for k in keys)
    for key in keys:
        assert secret.encode() not in store.get(key), f"the secret leaked into {key}"
    captured = capsys.readouterr()
    assert secret not in captured.out and secret not in captured.err


def test_two_runs_started_together_measure_one_after_the_other(embedded_s3, bucket):
    env = {**os.environ, **embedded_s3.airflow_conn_env("serving_eval_s3"), "PYTHONPATH": str(REPO)}
    params = json.dumps(conf(bucket, concurrencies=[1], duration_s=2.0))
    procs = [subprocess.Popen([sys.executable, "-m", "tasks.cli", "run", "--run-id", f"reliability-together-{i}",
                               "--conf", params], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=REPO) for i in range(2)]
    outputs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outputs]
    assert any("waiting for the server session of run reliability-together-" in out for out, _ in outputs)
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    sessions = []
    for manifest in (m for m in _manifests(store)):
        (timeline,) = read_json_object(store, manifest, "logs/sessions.json")
        sessions.append((timeline["start"], timeline["stopped"]))
    first, second = sorted(sessions)
    assert first[1] <= second[0], f"the two runs' servers overlapped: {sessions}"


def _manifests(store: S3Store) -> list[dict]:
    from tasks.store.history import list_manifests

    found = list_manifests(store)
    assert len(found) == 2 and read_run(store)
    return found
