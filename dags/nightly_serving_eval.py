"""Nightly serving evaluation: convert each model, serve it on each stack one server at a time per host, load-test
it, validate the results and publish them to S3.

Every night at 02:00 UTC, or from the trigger form. `plan` checks every input first (bad input fails it alone,
before anything is converted or planned) and spreads the server sessions over the run's measuring hosts (Param
`hosts`). Each host has its own tasks, made at parse time from `SERVING_EVAL_HOSTS` (tasks/plan/hosts.py): its
`measure_<host>` task is mapped over that host's sessions (one server session each: start, all its load points,
stop), in that host's Celery queue and one-slot pool `serving_eval_host_<host>`, so hosts measure side by side and
no host ever runs two servers (but for a regression duet's pair, by design). Conversions and the other steps run on
Airflow's default queue. A cell whose inputs changed since its reference night is measured beside that night's
inputs by `duet_<host>`, on the host that measured it, before it is published. Failed and contended cells
(measured while other work took the host, also when measured again) are published (run marked partial, or failed
when nothing could be measured) and then fail the run in `check`. The plan step logs the host's pre-flight check
(`python -m tasks.cli doctor`) and refuses a host that fails a hard limit. A run still going the nightly suite's
budget plus 10 % after it was queued is announced to Param `notify`'s notifiers (a deadline alert, in the triggerer).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import (
    Asset,
    AsyncCallback,
    DeadlineAlert,
    DeadlineReference,
    Param,
    dag,
    get_current_context,
    setup,
    task,
    teardown,
)
from serving_eval_notifiers import alert_night_running_long  # plugins/: the deadline callback the triggerer awaits

from tasks.convert import FORMATS
from tasks.loadgen.settings import MAX_CONCURRENCY, MAX_DURATION_S, MAX_WORKERS, STABLE_WINDOWS
from tasks.plan.config import (
    ARRIVALS,
    CONCURRENCY_SWEEPS,
    LAUNCHERS,
    MAX_BATCH_SIZE,
    MAX_DUET_PAIRS,
    MAX_NIGHT_BUDGET_S,
    MAX_QUIET_WAIT_S,
    MAX_READY_TIMEOUT_S,
    MAX_RECORD_NIGHTS,
    MAX_SIZE_BUDGET_S,
    MAX_SIZE_ROUNDS,
    MAX_SPEED,
    MAX_STORE_WAIT_S,
    MIN_NIGHT_BUDGET_S,
    MIN_SPEED,
    PROTOCOLS,
    RUN_MODES,
    SSE_MODES,
    RunConfig,
    model_names,
    server_names,
    trace_names,
)
from tasks.plan.deadline_alert import alert_interval_s
from tasks.plan.hosts import deployed_hosts
from tasks.plan.suites import SCHEDULED_SUITE, suite_names, suites_markdown
from tasks.serve.budget import CPU_SET_PATTERN, MEMORY_PATTERN
from tasks.serve.options import DEVICES, IMAGE_SOURCES
from tasks.store.publish import PUBLISHED_RUNS_ASSET

# A plain name, not an s3:// URI: an s3 URI makes Airflow load the Amazon provider (and boto3) at parse time.
PUBLISHED_RUNS = Asset(name=PUBLISHED_RUNS_ASSET)
HOSTS = deployed_hosts()  # SERVING_EVAL_HOSTS, read at parse time (no DB, no connection): one queue and pool each
D = RunConfig()  # the built-in defaults, under every suite's values
LATE_S = alert_interval_s()  # the scheduled suite's night_budget_s + 10 % (or SERVING_EVAL_NIGHT_DEADLINE_S), parsed


def suite_param(type_: str | list[str], **schema) -> Param:
    """A Param left empty by default: empty takes the picked suite's value, else the built-in default."""
    if "enum" in schema:
        schema["enum"] = [None, *schema["enum"]]
    hint = "empty: the suite's value"
    schema["description"] = f"{schema['description']}; {hint}" if schema.get("description") else hint
    return Param(None, type=["null", *([type_] if isinstance(type_, str) else type_)], **schema)


def _connection(conn_id: str):
    from airflow.sdk import Connection

    from tasks.store.s3 import ConnectionFields

    conn = Connection.get(conn_id)
    return ConnectionFields(conn_id, conn.login, conn.password, conn.extra_dejson)


@dag(
    dag_id=Path(__file__).stem,
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    # A night still going this long after it was queued (scheduled or triggered) is announced to its own notifiers.
    deadline=DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=timedelta(seconds=LATE_S),
                           callback=AsyncCallback(alert_night_running_long, kwargs={"deadline_s": LATE_S}),
                           name="night running long") if LATE_S else None,
    tags=["serving", "benchmark"],
    doc_md=f"{__doc__}\n\n**Suites** (`suites/*.yaml`):\n\n{suites_markdown()}",
    params={
        "suite": Param(SCHEDULED_SUITE, type="string", enum=suite_names(), title="Suite",
                       description="suites/<name>.yaml: what to measure; every field left empty below takes the "
                                   "suite's value", section="What to measure"),
        "models": suite_param("array", minItems=1, items={"type": "string", "enum": model_names()},
                        examples=model_names(), title="Models", section="What to measure"),
        "formats": suite_param("array", minItems=1, items={"type": "string", "enum": list(FORMATS)},
                         examples=list(FORMATS), title="Formats", section="What to measure"),
        "servers": suite_param("array", minItems=1, items={"type": "string", "enum": server_names()},
                         examples=server_names(), title="Servers", section="What to measure"),
        "launcher": suite_param("string", enum=list(LAUNCHERS), title="Launcher",
                          description="process: local runtime venvs; docker: containers", section="What to measure"),
        "device": suite_param("string", enum=list(DEVICES), title="Device", section="What to measure"),
        "batch_sizes": suite_param("array", minItems=1,
                             items={"type": "integer", "minimum": 1, "maximum": MAX_BATCH_SIZE},
                             title="Batch sizes", section="Load"),
        "mode": suite_param("string", enum=list(RUN_MODES), title="Mode",
                            description="concurrency: closed loop; rate: open loop; both: each in every session",
                            section="Load"),
        "concurrencies": suite_param("array", minItems=1,
                               items={"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENCY},
                               title="Concurrencies (closed loop)", section="Load"),
        "rates": suite_param("array", minItems=1, items={"type": "number", "exclusiveMinimum": 0},
                       title="Rates, requests/s (open loop)", section="Load"),
        "concurrency_sweep": suite_param("string", enum=list(CONCURRENCY_SWEEPS),
                                   title="Concurrency sweep (closed loop)",
                                   description="list: each concurrency; doubling: from 1 up to max(concurrencies), "
                                               "stopping when p99 > p99_bound_ms or throughput stops rising",
                                   section="Load"),
        "rate_search": suite_param("boolean", title="Rate search (open loop)",
                             description="the highest rate with p99 <= p99_bound_ms, doubling from min(rates) "
                                         "then bisecting (MLPerf Server style)", section="Load"),
        "traces": suite_param("array", items={"type": "string", "enum": trace_names()}, examples=trace_names(),
                              title="Traces (replayed on every stack)",
                              description="workloads/traces/<name>.csv, replayed in open loop at its offsets on "
                                          "each stack's efficient wires (docs/measuring.md, Traces)", section="Load"),
        "trace_speeds": suite_param("array", minItems=1,
                                    items={"type": "number", "minimum": MIN_SPEED, "maximum": MAX_SPEED},
                                    title="Trace speeds (1: as recorded)", section="Load"),
        "trace_search": suite_param("boolean", title="Trace speed search",
                                    description="per trace, the largest speed with p99 <= p99_bound_ms, doubling "
                                                "from min(trace_speeds) then bisecting", section="Load"),
        "trace_models": suite_param("array", items={"type": "string", "enum": model_names()},
                                    title="Models the traces are replayed for",
                                    description="empty: every model of the run", section="Load"),
        "p99_bound_ms": suite_param("number", exclusiveMinimum=0,
                              title="p99 bound of the sweeps, ms", section="Load"),
        "confidence_pct": suite_param("number", minimum=50, exclusiveMaximum=100,
                                      title="Confidence of a bound decision, %",
                                      description="\"p99 within the bound\" holds or fails only at this confidence, "
                                                  "else it is undecided (95: a claim rests on 299 requests with "
                                                  "none slow; 99, as MLPerf, on 459)", section="Load"),
        "max_point_s": suite_param("number", exclusiveMinimum=0, title="Longest a load point runs, s",
                                   description="a point an answer hinges on (a stack's best candidate within the "
                                               "bound, on its efficient wires) whose \"p99 within the bound\" is "
                                               "still undecided after duration_s is looked at again, as long as "
                                               "deciding it takes, at most this long; empty: never",
                                   section="Load"),
        "arrival": suite_param("string", enum=list(ARRIVALS), title="Arrivals (open loop)", section="Load"),
        "overload": suite_param("boolean", title="Overload and recovery",
                                description="after each stack's capacity is known (its sweep, rate search or "
                                            "listed loads), an open-loop burst at 1.5x and at 3x it between "
                                            "stretches at 0.5x: goodput, errors, p99 in the burst, the recovery "
                                            "time and whether it sheds, queues or fails", section="Load"),
        "protocols": suite_param("array", minItems=1, items={"type": "string", "enum": list(PROTOCOLS)},
                           examples=list(PROTOCOLS), title="Wires",
                           description="json: REST with JSON tensors; binary: REST with binary tensors; grpc; best: "
                                       "every wire each stack speaks, its fastest picked from the figures. A stack "
                                       "without a wire asked for by name gets a skipped cell saying why",
                           section="Load"),
        "duration_s": suite_param("number", exclusiveMinimum=0, maximum=MAX_DURATION_S,
                            title="Measured seconds per load point", section="Load"),
        "warmup_s": suite_param("number", minimum=0, maximum=MAX_DURATION_S,
                          title="Warm-up seconds (discarded)", section="Load"),
        "window_s": suite_param("number", exclusiveMinimum=0, maximum=MAX_DURATION_S,
                          title="Window seconds", section="Load"),
        "stability_pct": suite_param("number", exclusiveMinimum=0, maximum=100,
                               title="Stability band, %", section="Load"),
        "request_timeout_s": suite_param("number", exclusiveMinimum=0, maximum=600,
                                   title="Request timeout, s",
                                   description="a request without an answer by then is a timeout: an error, and a "
                                               "latency sample at the timeout", section="Load"),
        "max_error_rate": suite_param("number", minimum=0, maximum=1,
                                title="Tolerated error rate per load point",
                                description="a load point with failed or timed-out requests is failed unless their "
                                            "fraction is below this (0: any error fails it)", section="Outcome"),
        "max_neighbour_pct": suite_param("number", minimum=0, maximum=100,
                                         title="Most host CPU other work may use during a load point, %",
                                         description="above it (or with the server starved on its own CPUs) the "
                                                     "point is contended: re-measured once after the host quiets, "
                                                     "then published `contended`, never `ok` (100: never)",
                                         section="Outcome"),
        "quiet_wait_s": suite_param("number", minimum=0, maximum=MAX_QUIET_WAIT_S,
                                    title="Wait for a quiet host before re-measuring a contended point, s",
                                    description="at most this long; the point is then measured once more either way",
                                    section="Outcome"),
        "stop_when_stable": suite_param("boolean", title="End a load point once stable",
                                  description="at the first window boundary where the last three windows agree, "
                                              "after min_windows; duration_s stays the bound", section="Load"),
        "min_windows": suite_param("integer", minimum=STABLE_WINDOWS, maximum=1000,
                             title="Minimum windows before a stable stop", section="Load"),
        "workers": suite_param("integer", minimum=1, maximum=MAX_WORKERS,
                         title="Generator processes per load point", section="Load"),
        "ready_timeout_s": suite_param("number", exclusiveMinimum=0, maximum=MAX_READY_TIMEOUT_S,
                                 title="Server readiness timeout, s", section="Serving"),
        "dynamic_batching": suite_param("boolean", title="Dynamic batching", section="Serving"),
        "max_batch_size": suite_param("integer", minimum=1, maximum=MAX_BATCH_SIZE,
                                title="Server max batch size", section="Serving"),
        "pin_cpus": suite_param("boolean", title="Pin server and generator to separate cores",
                          section="Serving"),
        "server_cpus": suite_param(["integer", "string"], minimum=1, pattern=CPU_SET_PATTERN,
                                   title="Server CPUs", description="the same for every stack: an integer is a count "
                                   "of CPUs (the host's last ones), a string a CPU set (\"2-3\", \"1\"); the "
                                   "container's cpuset or the process's CPU affinity; each server's threads and "
                                   "workers follow it", section="Serving"),
        "server_memory": suite_param("string", pattern=MEMORY_PATTERN, title="Server memory limit",
                                     description="e.g. \"2g\": every container's memory limit (the process launcher "
                                     "cannot apply one)", section="Serving"),
        "images": suite_param("string", enum=list(IMAGE_SOURCES), title="Container images (launcher=docker)",
                              description="project: built here from docker/<runtime>/ on a Debian base (make images); "
                                          "official: the registry's Triton / TorchServe image, where a registry "
                                          "serves it", section="Serving"),
        "s3_bucket": suite_param("string", minLength=3, maxLength=63, title="S3 bucket", section="Store"),
        "s3_prefix": suite_param("string", title="S3 prefix", section="Store"),
        "aws_conn_id": suite_param("string", minLength=1, title="AWS connection id", section="Store"),
        "s3_sse": suite_param("string", enum=list(SSE_MODES), title="Server-side encryption", section="Store"),
        "s3_kms_key_id": suite_param("string", title="KMS key id (with aws:kms)",
                               section="Store"),
        "share_artifacts": suite_param("boolean",
                                 title="Share converted artifacts through the store (artifacts/ prefix)",
                                 section="Store"),
        "store_wait_s": suite_param("number", minimum=0, maximum=MAX_STORE_WAIT_S,
                                    title="Wait for a store that does not answer, s",
                                    description="publishing and the regression check try each request again with "
                                                "backoff this long (connection refused or timed out, a 5xx; never a "
                                                "403 or a missing bucket); past it the run fails, its results kept "
                                                "for `python -m tasks.cli publish <run id>`; 0: fail at once",
                                    section="Store"),
        "fail_on_cell_failure": suite_param("boolean",
                                      title="Fail the run when a cell failed (after publishing)", section="Outcome"),
        "fail_on_regression": suite_param("boolean",
                                    title="Fail the run when a stack regressed (a duet against its reference)",
                                    section="Outcome"),
        "duets": suite_param("boolean", title="Measure changed cells beside their reference (duets)",
                             description="a cell whose inputs (model file, runtime, server, serving options) changed "
                                         "since its reference night is measured at the same time as that night's "
                                         "inputs, on the same cores; unchanged cells cannot regress",
                             section="Outcome"),
        "duet_min_pairs": suite_param("integer", minimum=2, maximum=MAX_DUET_PAIRS,
                                      title="Duet pairs at its first look", section="Outcome"),
        "duet_max_pairs": suite_param("integer", minimum=2, maximum=MAX_DUET_PAIRS,
                                      title="Duet pairs at its last look", section="Outcome"),
        "size_rounds": suite_param("integer", minimum=0, maximum=MAX_SIZE_ROUNDS,
                                   title="Rounds that size a change alone",
                                   description="a change a duet finds (or leaves undecided) is measured again with "
                                               "each side alone, in a random order each round, at most this many "
                                               "rounds, judged at looks after 4, 6, 8 and 12 (0: not sized, the "
                                               "verdict says \"size uncertain\")", section="Outcome"),
        "size_budget_s": suite_param("number", exclusiveMinimum=0, maximum=MAX_SIZE_BUDGET_S,
                                     title="Measuring time that sizes one changed cell, s", section="Outcome"),
        "night_budget_s": suite_param("number", minimum=MIN_NIGHT_BUDGET_S, maximum=MAX_NIGHT_BUDGET_S,
                                      title="The night's budget, s",
                                      description="the plan estimates every stage and fits the night into this, "
                                                  "the cells the answers rest on first; what does not fit is "
                                                  "deferred to a later night (each cell measured at least once "
                                                  "every K nights, K shown); the nightly suite sets one hour",
                                      section="What to measure"),
        "price_per_core_hour": suite_param("number", minimum=0, title="Price of a CPU core-hour",
                                           description="in any currency: the report shows the price of a million "
                                                       "inferences at each stack's cheapest point within the p99 "
                                                       "bound; empty everywhere: no money shown, core-seconds only",
                                           section="Cost"),
        "price_per_gpu_hour": suite_param("number", minimum=0, title="Price of a GPU-hour",
                                          description="the same currency; a GPU row shows a price only with both",
                                          section="Cost"),
        "hosts": suite_param("array", minItems=1, uniqueItems=True,
                             items={"type": "string", "enum": [h.name for h in HOSTS]},
                             examples=[h.name for h in HOSTS], title="Measuring hosts",
                             description="the sessions are spread over these (longest first, to the least loaded); "
                                         "empty: every host of the deployment (SERVING_EVAL_HOSTS)",
                             section="Where to measure"),
        "notify": suite_param("array", uniqueItems=True, items={"type": "string", "minLength": 1},
                              title="Notifiers (Airflow connection ids)",
                              description="after publishing, one message per run to each: smtp (recipients in the "
                                          "extra's `to`), slackwebhook or apprise connections; sent when the night "
                                          "has a new finding (a regression or improvement, a failed, contended or "
                                          "missing cell, failed validation)", section="Notify"),
        "notify_quiet": suite_param("boolean", title="Also send a short message on a night without a new finding",
                                    section="Notify"),
        "ui_base_url": suite_param("string", pattern="^https?://", title="Airflow UI's address (the report's link)",
                                   description="e.g. http://127.0.0.1:8080: the message links the report in the "
                                               "reports page there; empty: the report's s3:// address",
                                   section="Notify"),
        "record_nights": suite_param("integer", minimum=1, maximum=MAX_RECORD_NIGHTS,
                                     title="Nights in each stack's record",
                                     description="the report's and the reports page's share of each stack's planned "
                                                 "cells that were ok, over this many published nights of the suite",
                                     section="Notify"),
        "control_cell": suite_param("string", pattern="^([^/]+/[^/]+/[^/]+|none)$",
                                    title="Control cell (model/format/server), measured every night",
                                    description="tells 'the host got slower' from 'this stack got slower' "
                                                f"(default {D.control_cell}); none: no control", section="Outcome"),
    },
)
def nightly_serving_eval():
    @setup
    def sweep_leftovers(host: str) -> int:
        from tasks.pipeline import sweep_host

        return sweep_host(None, host)

    @task
    def plan(params=None, run_id=None, dag_run=None) -> dict:
        """Check every input (bad input fails here alone, naming the model and field) and expand the plan."""
        from serving_eval_notifiers import notifier_senders  # plugins/: Airflow's notifier classes

        from tasks.pipeline import start_run
        from tasks.plan.config import RunConfig

        logical = (dag_run.logical_date or dag_run.run_after).isoformat()
        config = RunConfig.from_params(dict(params))  # an empty Param: the suite's value or the default
        notifier_senders(config.notify)  # an unknown connection or kind is refused here, before any work
        return start_run(dict(params), run_id=run_id, logical_date=logical, conn=_connection(config.aws_conn_id))

    @task
    def conversions(planned: dict) -> list[dict]:
        return planned["conversions"]

    @task
    def sessions(planned: dict, host: str) -> list[dict]:
        from tasks.pipeline import host_sessions

        return host_sessions(planned, host)

    @task(retries=1, map_index_template="{{ task.op_kwargs['conversion']['model'] }}."
                                        "{{ task.op_kwargs['conversion']['format'] }}")
    def convert(conversion: dict, planned: dict) -> dict:
        from tasks.pipeline import convert_in_run

        return convert_in_run(conversion, planned, _connection(planned["config"]["aws_conn_id"]))

    @task(max_active_tis_per_dag=1, map_index_template="{{ task.op_kwargs['session']['session_id'] }}")
    def measure(session: dict, planned: dict, converted: list[dict]) -> dict:
        from tasks.pipeline import measure_in_run

        return measure_in_run(session, list(converted), planned, _connection(planned["config"]["aws_conn_id"]))

    @task(trigger_rule="all_done")
    def collect(planned: dict, measured: list[list[dict]]) -> dict:
        if planned is None:  # the plan step failed: it alone says why; everything after it is skipped
            from airflow.sdk.exceptions import AirflowSkipException

            raise AirflowSkipException("the plan step failed: nothing was converted, measured or published")
        from tasks.pipeline import collect_results

        return collect_results(planned, [out for host in measured for out in (host or [])])

    @task
    def validate(planned: dict, collected: dict, converted: list[dict]) -> dict:
        from tasks.pipeline import validate_step

        return validate_step(planned, collected, list(converted))

    @task
    def regressions(planned: dict, collected: dict, converted: list[dict]) -> dict:
        from tasks.pipeline import regress_step

        return regress_step(planned, collected, list(converted), _connection(planned["config"]["aws_conn_id"]))

    @task
    def duet(planned: dict, converted: list[dict], regressed: dict, host: str) -> dict:
        from tasks.pipeline import duet_step

        return duet_step(planned, list(converted), regressed, host, _connection(planned["config"]["aws_conn_id"]))

    @task(outlets=[PUBLISHED_RUNS])
    def publish(planned: dict, collected: dict, converted: list[dict], validation: dict, regressed: dict,
                dueted: list[dict]) -> dict:
        from tasks.pipeline import merge_duet_parts, publish_step

        conn = _connection(planned["config"]["aws_conn_id"])
        summary = publish_step(planned, collected, list(converted), validation, conn,
                               merge_duet_parts(regressed, list(dueted)))
        get_current_context()["outlet_events"][PUBLISHED_RUNS].extra = summary
        return summary

    @task
    def notify(planned: dict, summary: dict) -> dict:
        """The night's message to Param notify's notifiers; a failing one is recorded, never fails the run."""
        from serving_eval_notifiers import notifier_senders  # plugins/: Airflow's notifier classes

        from tasks.pipeline import notify_step

        config = planned["config"]
        senders = notifier_senders(config["notify"], strict=False)  # a connection gone since the plan: recorded
        return notify_step(planned, summary, _connection(config["aws_conn_id"]), senders)

    @task
    def check(summary: dict) -> dict:
        from tasks.pipeline import check_outcome

        return check_outcome(summary)

    def sweep_run(host: str | None = None, run_id=None) -> int:
        from tasks.pipeline import sweep_host

        return sweep_host(run_id, host)

    def sweep_run_leftovers(host: str | None = None, **routing):  # a teardown's trigger rule cannot be overridden
        return teardown(task(task_id=f"sweep_run_{host}" if host else "sweep_run_leftovers", **routing)(sweep_run))

    # One set of measuring tasks per host, in its queue and pool: Airflow routes per task, not per mapped instance.
    on_host = {h.name: {"queue": h.queue, "pool": h.pool} if h.queue else {"pool": h.pool} for h in HOSTS}
    before = {h: sweep_leftovers.override(task_id=f"sweep_{h}", **on_host[h])(h) for h in on_host}
    planned = plan()
    converted = convert.partial(planned=planned).expand(conversion=conversions(planned))
    measured = [measure.override(task_id=f"measure_{h}", **on_host[h]).partial(planned=planned, converted=converted)
                .expand(session=sessions.override(task_id=f"sessions_{h}")(planned, h)) for h in on_host]
    collected = collect(planned, measured)
    validation = validate(planned, collected, converted)
    regressed = regressions(planned, collected, converted)
    dueted = [duet.override(task_id=f"duet_{h}", **on_host[h])(planned, converted, regressed, h) for h in on_host]
    summary = publish(planned, collected, converted, validation, regressed, dueted)
    list(before.values()) >> planned
    summary >> sweep_run_leftovers()() << list(before.values())  # the run's work folder on a default-queue worker
    for h, setup_task in before.items():
        summary >> sweep_run_leftovers(h, **on_host[h])(h) << setup_task
    notify(planned, summary)
    check(summary)


serving_eval_dag = nightly_serving_eval()
