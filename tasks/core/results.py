"""The results table contract (docs/design.md#the-results-contract): one row per cell, versioned; Parquet and CSV.

Every column is declared once, in `CONTRACT`, with its type, unit, meaning and the schema version that added it;
`COLUMNS` (name -> pandas dtype), the Arrow schema every Parquet file is written with, and the data dictionary
(docs/results-reference.md, `python -m tasks.cli reference`) are derived from it. Rows are plain dicts until
`to_frame`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.core.metrics import METRICS
from tasks.core.workloads import row_workload

SCHEMA_VERSION = "1.9"  # what each version changed: SCHEMA_CHANGES
# `contended` (1.5): the point ran cleanly but other work took the host's CPU while it ran, twice (docs/measuring.md)
STATUSES = ("ok", "contended", "failed", "skipped")
OVERLOAD_MODE = "overload"  # the `mode` of an overload row (1.7): a burst above capacity, not a steady load point
CELL_KEY = ("model", "format", "server", "launcher", "device", "batch_size", "mode", "load", "config_id", "protocol",
            "workload")
SESSION_KEY = CELL_KEY[:5]  # model, format, server, launcher, device: what one server session serves and where
POINT_KEY = (*CELL_KEY[:8], "protocol", "workload")  # a planned point: the cell key before a configuration, its wire
KEY_DEFAULTED = ("config_id", "protocol", "workload")  # key fields older rows and records lack: `cell_key` fills them
DEFAULT_CONFIG_ID = "default"  # the `config_id` of an untuned server's rows (tasks/serve/knobs.py)
# The kinds of wire a stack is spoken to over (the `wire` column): tensors as JSON text over REST, as bytes over
# REST (KServe v2 binary tensor data extension, raw bodies), or as bytes in gRPC messages.
WIRES = ("json", "binary", "grpc")
# What rows published before 1.1 (no `protocol`) were measured over: each server's REST JSON codec of then. A fact
# about those rows, fixed here, so the cell key of an old row never depends on what a server speaks today.
LEGACY_PROTOCOLS = {"triton": "kserve_v2_rest", "kserve": "kserve_v2_rest", "custom": "kserve_v2_rest",
                    "torchserve": "torchserve_rest", "bentoml": "bentoml_json", "tfserving": "tfserving_rest"}

# the published percentiles whose claims have columns: (key, ordinal)
CLAIMED_PERCENTILES = (("p50", "50th"), ("p90", "90th"), ("p95", "95th"), ("p99", "99th"), ("p999", "99.9th"))
STRING, INT, FLOAT, BOOL = "string", "Int64", "Float64", "boolean"  # the pandas dtypes a column may have
ARROW_TYPE_NAMES = {STRING: "string", INT: "int64", FLOAT: "double", BOOL: "bool"}  # each one's Arrow type, always
DUCKDB_TYPES = {STRING: "VARCHAR", INT: "BIGINT", FLOAT: "DOUBLE", BOOL: "BOOLEAN"}


@dataclass(frozen=True)
class Column:
    """One column of the results table. Every column may be null (a failed cell has no figures)."""

    name: str
    dtype: str  # STRING | INT | FLOAT | BOOL (pandas); the Arrow type is ARROW_TYPE_NAMES[dtype] in every file
    unit: str  # "" when it has none; a metric's unit is the metrics table's (tasks/core/metrics.py)
    meaning: str
    since: str = "1.0"  # the schema version that added it
    group: str = ""

    @property
    def arrow_type(self) -> str:
        return ARROW_TYPE_NAMES[self.dtype]


def is_overload(row: dict) -> bool:
    """An overload row (schema 1.7): a burst above capacity, not a steady load point; never ranked, plotted,
    tuned or judged for regressions (its errors are what a burst is for, its rate moves with each night's capacity)."""
    return row.get("mode") == OVERLOAD_MODE


def version_tuple(version: str) -> tuple[int, ...]:
    """"1.10" -> (1, 10): schema versions compare as numbers, not as text."""
    return tuple(int(part) for part in str(version).split("."))


def _columns(group: str, *columns: Column) -> tuple[Column, ...]:
    return tuple(Column(c.name, c.dtype, c.unit, c.meaning, c.since, group) for c in columns)


def _col(name: str, dtype: str, meaning: str, unit: str = "", since: str = "1.0") -> Column:
    if dtype not in ARROW_TYPE_NAMES:
        raise ValueError(f"column {name}: dtype={dtype!r}: must be one of {list(ARROW_TYPE_NAMES)}")
    return Column(name, dtype, unit, meaning, since)


def _claim_columns(key: str, nth: str) -> tuple[Column, ...]:
    """A percentile's claim (schema 1.8, tasks/core/confidence.py): its interval's ends and its lower bound."""
    figure = f"latency_ms_{key}"
    return (
        _col(f"{figure}_ci_low", FLOAT, f"lower end of a distribution-free 95 % interval of the {nth} percentile "
                                        "(null: none)", "ms", since="1.8"),
        _col(f"{figure}_ci_high", FLOAT, "upper end of that interval (null: open above, too few requests)", "ms",
             since="1.8"),
        _col(f"{figure}_at_least", FLOAT, f"where the requests are too few for the {nth} percentile (the estimate "
                                          f"would be their maximum): the percentile is at least this, and {figure} "
                                          "is null", "ms", since="1.8"),
    )


def _metric(name: str, meaning: str, since: str = "1.0") -> Column:
    """A column that is a metric: a float in the unit the metrics table declares for it."""
    return _col(name, FLOAT, meaning, METRICS[name].unit, since)


# Order is the published column order.
CONTRACT: tuple[Column, ...] = (
    *_columns(
        "Run identity",
        _col("run_id", STRING, "the Airflow DAG run id, exactly as Airflow, manifest.json and latest.json spell it "
                               "(`manual__2026-12-01T22:29:53.632483+00:00`); the run folder's `run=` holds a "
                               "made-safe copy"),
        _col("logical_date", STRING, "the run's logical date, ISO 8601 with its zone (the `dt=` partition is its "
                                     "date)"),
        _col("started_at", STRING, "when the run's plan step started, ISO 8601 UTC"),
        _col("finished_at", STRING, "when the run's measurements were collected, ISO 8601 UTC"),
        _col("schema_version", STRING, "the version of this contract the row was written under"),
        _col("pipeline_version", STRING, "the version of serving-eval that ran"),
        _col("git_sha", STRING, "the git commit of serving-eval that ran, when known"),
        _col("suite", STRING, "the evaluation suite the run's Params came from (`suites/<name>.yaml`), or null",
             since="1.3"),
        _col("role", STRING, "`control`: the control cell the plan added (not part of the comparison); else null",
             since="1.3"),
    ),
    *_columns(
        "Cell key",
        _col("model", STRING, "the model's name in the catalogue (`models/<name>.yaml`)"),
        _col("format", STRING, "the format the model was served in (onnx, torchscript, savedmodel, ...)"),
        _col("server", STRING, "the serving stack (triton, torchserve, tfserving, bentoml, kserve, custom)"),
        _col("launcher", STRING, "how the server ran: `process` (a cached venv) or `docker` (a container)"),
        _col("device", STRING, "`cpu` or `gpu`"),
        _col("batch_size", INT, "samples in one request", "samples"),
        _col("mode", STRING, "`concurrency` (closed loop) or `rate` (open loop); a sweep's rows carry their point's "
                             "mode; `overload` (1.7): an overload phase, its figures in the Overload columns; "
                             "`trace` (1.9): a trace replayed in open loop at its offsets"),
        _col("load", FLOAT, "the load point: connections in concurrency mode, requests per second in rate mode, the "
                            "burst's multiple of capacity in overload mode, the replay's speed (1: as recorded) in "
                            "trace mode", "connections | req/s | × capacity | × speed"),
        _col("workload", STRING, "what was sent: `fixed` (one seeded request at the load; every row before 1.9) or "
                                 "`trace:<name>@<digest>` (a replayed trace, `mode` trace: docs/measuring.md#traces); "
                                 "part of the cell key", since="1.9"),
    ),
    *_columns(
        "What was served",
        _col("model_sha256", STRING, "SHA-256 of the converted artifact that was served"),
        _col("server_version", STRING, "the server's version as it reported it"),
        _col("runtime_image", STRING, "the container image or runtime venv the server ran in"),
        _col("engine", STRING, "the inference engine the server ran the format with (e.g. onnxruntime)"),
        _col("protocol", STRING, "the request codec spoken (kserve_v2_rest, kserve_v2_binary, kserve_v2_grpc, "
                                 "torchserve_raw, ...): part of the cell key since 1.5; rows before 1.1 (empty) "
                                 "measured the server's REST JSON codec; a cell skipped because its stack has no such "
                                 "wire holds the wire's name", since="1.1"),
        _col("wire", STRING, "the kind of wire: `json` (REST, tensors as JSON text), `binary` (REST, tensors as bytes: "
                             "the KServe v2 binary tensor data extension, raw bodies) or `grpc`; rows before 1.5 "
                             "(empty) are json unless their protocol is a gRPC one", since="1.5"),
        _col("runtime_image_kind", STRING, "`official` (a registry's image), `project` (built by `make images`) or "
                                           "`venv`", since="1.3"),
        _col("config_id", STRING, "short id of the serving configuration (knob values); `default` when untuned "
                                  "(rows before 1.3 ran the default)", since="1.3"),
        _col("config", STRING, "the serving configuration's knob values as JSON", since="1.3"),
        _col("best_config", BOOL, "with a configuration search: this configuration won for its server and model",
             since="1.3"),
        _col("server_cpus", STRING, "the CPUs the server was given (a count or a CPU set), as applied", since="1.3"),
        _col("server_memory", STRING, "the server's memory limit as applied (e.g. `4g`), or null when none",
             since="1.3"),
        _col("inputs", STRING, "what the row's stack was served with, as JSON (tasks/measure/inputs.py): the "
                               "artifact and spec, the runtime (its venv's packages and files, or its image), the "
                               "server's version, the serving options, the load generator", since="1.5"),
        _col("inputs_sha", STRING, "SHA-256 of the stack's part of `inputs` (the load generator left out): equal "
                                   "hashes on two nights, nothing a stack depends on changed", since="1.5"),
    ),
    *_columns(
        "Host",
        _col("hostname", STRING, "the measuring host (`SERVING_EVAL_HOST`, else the machine's hostname)"),
        _col("cpu_model", STRING, "the host's CPU model"),
        _col("cpu_count", INT, "the host's logical CPUs", "CPUs"),
        _col("gpu_name", STRING, "the host's GPU model, or null without one"),
        _col("gpu_driver", STRING, "the host's GPU driver version, or null without one"),
    ),
    *_columns(
        "Load outcome",
        _col("duration_s", FLOAT, "the measured time (warm-up excluded)", "s"),
        _col("requests", INT, "requests scheduled (open loop) or sent (closed loop) in the measured time", "requests"),
        _col("errors", INT, "measured requests that failed or timed out", "requests"),
        _metric("error_rate", "errors / requests"),
        _metric("throughput_rps", "successful completions inside the measured time / its length"),
        _metric("throughput_sps", "throughput_rps times the batch size"),
        _col("throughput_rps_ci_low", FLOAT, "lower end of a 95 % interval of throughput over the windows",
             METRICS["throughput_rps"].unit, since="1.3"),
        _col("throughput_rps_ci_high", FLOAT, "upper end of that 95 % interval", METRICS["throughput_rps"].unit,
             since="1.3"),
        _metric("latency_ms_mean", "mean latency of the measured requests (timeouts counted at their timeout)"),
        _metric("latency_ms_p50", "50th percentile latency"),
        _metric("latency_ms_p90", "90th percentile latency"),
        _metric("latency_ms_p95", "95th percentile latency"),
        _metric("latency_ms_p99", "99th percentile latency"),
        _metric("latency_ms_p999", "99.9th percentile latency"),
        _col("latency_ms_max", FLOAT, "the largest latency seen", "ms"),
        _col("latency_from", STRING, "`sent` (closed loop: from the actual send) or `scheduled` (open loop: from the "
                                     "scheduled send, no coordinated omission)"),
        _col("stable", BOOL, "the last three windows' throughputs lie within stability_pct of their mean"),
        _col("windows", INT, "measurement windows the measured time was cut into", "windows"),
        _col("cv", FLOAT, "coefficient of variation of the windows' throughputs", "ratio"),
        _col("late_starts", INT, "open-loop sends more than the late-start threshold after their schedule",
             "requests"),
        _col("generator_late_starts", INT, "late starts the load generator itself caused (not a wait for a free "
                                           "connection)", "requests", since="1.2"),
        _col("generator_cpu_pct", FLOAT, "CPU use of the busiest load-generator worker (100 = one core)", "%"),
        _col("generator_saturated", BOOL, "the load generator may have set the pace (a worker near a full core, or "
                                          "too many generator late starts)"),
        _col("warmup_requests", INT, "requests of the discarded warm-up", "requests"),
        _col("timeouts", INT, "measured requests that timed out", "requests"),
        _col("errors_by_kind", STRING, "failed requests counted by kind, as JSON"),
        _col("stopped_early", BOOL, "the load point ended before its duration once stable (stop_when_stable)"),
        _col("schedule_lag_ms_p99", FLOAT, "99th percentile of how late sends left after their scheduled time", "ms"),
        _col("generator_cpu_us_per_request", FLOAT, "the load generator's CPU time per request", "µs"),
        _col("workers", INT, "load-generator worker processes", "processes"),
        _col("latency_hdr", STRING, "the latencies as an HdrHistogram (microseconds), compressed and base64: for "
                                    "merging points, never for the figures above"),
        _col("server_requests", FLOAT, "the server's own success counter's increase over the measured window "
                                       "(Triton), or null", "requests"),
        _col("server_throughput_rps", FLOAT, "server_requests per second of that window", "req/s"),
        _col("engine_inprocess_rps", FLOAT, "the engine's own speed in process on the server's CPUs with its threads "
                                            "(tasks/measure/engine_speed.py): the ceiling a stack serving the same "
                                            "engine is read against", "req/s", since="1.3"),
        _metric("request_bytes", "the payload of one request: its HTTP body or its gRPC message (HTTP headers and "
                                 "HTTP/2 framing not counted)", since="1.5"),
        _metric("response_bytes", "the mean payload of a successful response, counted the same way", since="1.5"),
    ),
    *_columns(
        "Confidence",
        _col("latency_samples", INT, "the requests the percentiles rest on: successes, timeouts and requests never "
                                     "sent (coordinated-omission stand-ins do not add to it)", "requests", since="1.8"),
        *(column for key, nth in CLAIMED_PERCENTILES for column in _claim_columns(key, nth)),
        _col("p99_bound_ms", FLOAT, "the run's p99 bound (Param p99_bound_ms) the point was judged against", "ms",
             since="1.8"),
        _col("p99_bound_verdict", STRING, "\"p99 within p99_bound_ms\": holds, fails or undecided, decided on the "
                                          "count of requests slower than the bound (docs/measuring.md#confidence)",
             since="1.8"),
        _col("p99_bound_exceed", INT, "requests slower than p99_bound_ms", "requests", since="1.8"),
        _col("p99_bound_rate_high_pct", FLOAT, "one-sided upper confidence bound of the share of requests slower "
                                               "than the bound", "%", since="1.8"),
        _col("p99_bound_more_requests", INT, "undecided: further requests that would decide it at the observed "
                                             "rate (null: decided, or no count would)", "requests", since="1.8"),
        _col("p99_bound_confidence_pct", FLOAT, "the confidence of the decision (Param confidence_pct), spread over "
                                                "its planned looks", "%", since="1.8"),
        _col("p99_bound_looks", INT, "the decision's planned looks: 1, or 2 where the run lengthens undecided "
                                     "points (Param max_point_s), the confidence split evenly over them", "looks",
             since="1.8"),
        _col("lengthened", BOOL, "an answer hinged on the point and its first look left its bound undecided: its "
                                 "figures are from a second, longer look (at most max_point_s)", since="1.8"),
        _col("p99_bounds", STRING, "the decision at every bound the report ranks on (its own and the run's), as "
                                   "JSON: bound in ms -> verdict, exceed, effective requests, rate_pct (the "
                                   "one-sided confidence bounds of the share slower, %), more_requests",
             since="1.8"),
    ),
    *_columns(
        "Where a request's time goes",
        _metric("server_ms", "the server's own total per request over the measured window, as the stack reports it "
                             "(`breakdown_source`); null where it reports none", since="1.5"),
        _metric("queue_ms", "per request, waiting in the server's queue before its model runs; null where not "
                            "reported", since="1.5"),
        _metric("decode_ms", "per request, decoding the request into the engine's inputs; null where not reported",
                since="1.5"),
        _metric("infer_ms", "per request, the engine (for a batch, its whole time, counted for each of its "
                            "requests); null where not reported", since="1.5"),
        _metric("encode_ms", "per request, encoding the outputs into the response; null where not reported",
                since="1.5"),
        _metric("outside_ms", "latency_ms_mean - server_ms: the client, the network and whatever the server does "
                              "outside its own total (its front end's reading and writing of the body, where the "
                              "source says so); null without server_ms", since="1.5"),
        _col("breakdown_source", STRING, "what the breakdown was read from (Triton's statistics extension, "
                                         "TorchServe's, KServe's, BentoML's or TF Serving's Prometheus metrics, the "
                                         "custom service's own timing), or `none reported: <why>`", since="1.5"),
    ),
    *_columns(
        "Resources",
        _metric("server_cpu_pct", "the server's CPU use over the measured window, from its CPU time (summed over "
                                  "its process tree, or its container's cgroup) read at both ends of the window; "
                                  "where that cannot be read, the mean of samples over the load point (100 = one "
                                  "core)"),
        _metric("server_rss_mb", "the server's peak resident memory over the load point"),
        _metric("server_cpu_us_per_request", "the server's CPU time per request: server_cpu_pct / 100 / "
                                             "throughput_rps", since="1.5"),
        _col("gpu_util_pct", FLOAT, "mean GPU utilisation over the load point, or null without a GPU", "%"),
        _col("gpu_mem_mb", FLOAT, "GPU memory in use, or null without a GPU", "MiB"),
        _col("gpu_power_w", FLOAT, "GPU power draw, or null without a GPU", "W"),
        _metric("startup_s", "from the server's start to its first ready answer"),
    ),
    *_columns(
        "Cost",
        _metric("server_core_s_per_1k", "the server's CPU-core-seconds per 1,000 inferences (an inference is one "
                                        "sample): server_cpu_us_per_request / batch_size / 1,000 "
                                        "(tasks/core/cost.py)", since="1.7"),
        _metric("gpu_s_per_1k", "on a GPU, GPU-seconds per 1,000 inferences: the GPU is held whole while it serves, "
                                "1,000 / throughput_sps; null on a CPU", since="1.7"),
        _col("price_per_core_hour", FLOAT, "the price of a CPU core-hour the run was given (Param "
                                           "`price_per_core_hour`), or null: no money shown", "price / core-hour",
             since="1.7"),
        _col("price_per_gpu_hour", FLOAT, "the price of a GPU-hour the run was given (Param `price_per_gpu_hour`), "
                                          "or null", "price / GPU-hour", since="1.7"),
        _metric("price_per_million", "the price of 1,000,000 inferences at this point: its core-hours times "
                                     "price_per_core_hour, plus on a GPU its GPU-hours times price_per_gpu_hour; null "
                                     "unless every resource the row used has a price", since="1.7"),
    ),
    *_columns(
        "Overload",
        _col("overload_factor", FLOAT, "an overload row (`mode` overload, its `load` this factor): the burst's rate "
                                       "as a multiple of capacity_rps (1.5 or 3)", "× capacity", since="1.7"),
        _col("capacity_rps", FLOAT, "the capacity the burst multiplied: the highest throughput of the session's ok "
                                    "points at the row's batch size over its wire (a sweep's or rate search's best)",
             "req/s", since="1.7"),
        _metric("goodput_rps", "successful answers that came back during the burst, per second of it (what the "
                               "stack served while overloaded)", since="1.7"),
        _metric("goodput_pct", "goodput_rps as % of capacity_rps: how much of its capacity the stack still served",
                since="1.7"),
        _metric("burst_p99_ms", "p99 latency (from the scheduled send; timeouts at the timeout) of the burst's "
                                "requests", since="1.7"),
        _col("pre_burst_p99_ms", FLOAT, "p99 latency at half the capacity before the burst (its first second left "
                                        "out)", "ms",
             since="1.7"),
        _metric("recovery_s", "from the burst's end until a window of requests is back: none failed and the share "
                              "slower than 1.2 × the pre-burst stretch's p99 (p90 or median where it holds too few "
                              "requests) decided below 1 − q; null when none was within the phase",
                since="1.7"),
        _col("recovered", BOOL, "latency came back within the phase (recovery_s is set)", since="1.7"),
        _col("overload_class", STRING, "what the stack did (tasks/validate/overload.py): `holds` (nothing failed, "
                                       "p99 within 1.2 ×), `sheds` (failures mostly fast errors), `queues` (mostly "
                                       "timeouts, or p99 rose), `fails` (the server died: the row is failed)",
             since="1.7"),
        _col("overload", STRING, "the overload phase as JSON: its stretches and rates, the burst's counts by kind, "
                                 "the recovery rule and the p99 of every window of the phase", since="1.7"),
    ),
    *_columns(
        "Host state",
        _metric("neighbour_cpu_pct", "CPU time of other work during the load point (everything but the server, the "
                                     "load generator and the measuring process; the hypervisor's steal included), "
                                     "% of all the host's CPUs over the point; null where /proc/stat or the server's "
                                     "CPU time cannot be read", since="1.5"),
        _metric("steal_pct", "the hypervisor's steal time during the point (/proc/stat), % of all the host's CPUs: a "
                             "part of neighbour_cpu_pct", since="1.5"),
        _col("server_cpus_neighbour_pct", FLOAT, "other work on the server's own CPUs during the point, % of their "
                                                 "time (an unpinned server: the host's figure)", "%", since="1.5"),
        _col("server_cpu_share_pct", FLOAT, "the server's CPU time during the point, % of what it was given (its CPUs "
                                            "× the point's length)", "%", since="1.5"),
        _metric("server_cpu_wait_pct", "time the server's threads were runnable but waiting for a CPU during the "
                                       "point (schedstat), % of its CPUs × the point's length; null where the kernel "
                                       "keeps no schedstat or the server runs on a remote engine", since="1.5"),
        _col("host_cpu_pressure_pct", FLOAT, "the host's CPU pressure during the point (/proc/pressure/cpu `some`: the "
                                             "share of time some task waited for a CPU), or null without PSI", "%",
             since="1.5"),
        _col("load_avg_1m", FLOAT, "the host's 1-minute load average at the end of the point", "tasks",
             since="1.5"),
        _col("host_state", STRING, "everything read of the host during the point as JSON: the figures above, the "
                                   "server's pressure and throttling where its cgroup has them, the source of each "
                                   "(`unknown` where missing) and, for a re-measured point, its first reading and "
                                   "the wait for a quiet host", since="1.5"),
    ),
    *_columns(
        "Lifecycle",
        _metric("first_correct_s", "from the server's start to the first answer that passed the served-output check "
                                   "(its first request is sent once it is ready): start-up, then the first "
                                   "inference's own cost; per server life, on each of its rows", since="1.6"),
        _metric("idle_rss_mb", "the server's resident memory after load-in and the served-output check, before its "
                               "first load point (summed over its process tree, or its container's memory as docker "
                               "stats counts it)", since="1.6"),
        _metric("session_rss_peak_mb", "the highest memory of the server life: idle, every load point's peak and every "
                                       "reading after a point", since="1.6"),
        _metric("rss_growth_mb", "memory read after the life's last load point less after its first, the server idle "
                                 "both times (what it kept from its load); null with fewer than two points",
                since="1.6"),
        _col("server_processes", INT, "processes of the server's tree (or container, its init included) after "
                                      "load-in", "processes", since="1.6"),
        _col("server_threads", INT, "threads of those processes after load-in", "threads", since="1.6"),
        _metric("runtime_size_mb", "the size of what the server ran from: its container image as the engine reports "
                                   "it (launcher docker), or its runtime venv on disk (process)", since="1.6"),
    ),
    *_columns(
        "Features and ease of use",
        _col("capabilities", STRING, "what the stack declares it can do (tasks/serve/capabilities.py: dynamic "
                                     "batching, several models, versions, metrics, health and readiness, gRPC, binary "
                                     "tensors, KServe v2, hot reload, ensembles) and what its probe of the live "
                                     "server found, as JSON: per capability `declared`, `how`, `probe`, `result` "
                                     "(passed, failed, not probed) and `evidence`", since="1.6"),
        _col("capability_findings", INT, "declared capabilities whose probe failed (findings: shown in the report, "
                                         "never a failed row)", "capabilities", since="1.6"),
        _col("config_lines", INT, "non-blank, non-comment lines of configuration the project writes to serve the "
                                  "model on this stack (its generated layout)", "lines", since="1.6"),
        _col("code_lines", INT, "non-blank, non-comment, non-docstring lines of code the project writes for it (the "
                                "layout's and the runtime's handler or service code)", "lines", since="1.6"),
        _col("serving_files", STRING, "the files counted, as JSON: each with its kind and lines, and the files left "
                                      "out with why (tasks/serve/lines.py)", since="1.6"),
    ),
    *_columns(
        "Outcome",
        _metric("served_err_ratio", "the served-output check before load: worst |a-b| / (atol + rtol*|b|) against "
                                    "the reference; <= 1 passes", since="1.3"),
        _col("restarts", INT, "times the session's server was restarted before this point (a crash gets one "
                              "restart)", "restarts", since="1.3"),
        _col("beyond_capacity", BOOL, "a sweep's point that failed only because its load exceeded what the server "
                                      "sustains (healthy after it, a lower load ok): the sweep's answer, not a fault; "
                                      "it does not make the run partial", since="1.3"),
        _col("remeasured", BOOL, "the point was measured a second time, after waiting for a quiet host, because the "
                                 "first measurement was contended; its figures are the second's", since="1.5"),
        _col("status", STRING, "`ok`, `contended` (1.5: measured cleanly twice but other work took the host's CPU "
                               "both times; the figures are kept and are not the stack's), `failed` or `skipped` "
                               "(docs/measuring.md, when a row says ok)"),
        _col("reason", STRING, "why a row is not ok, in words a user can act on (the server's log tail when it "
                               "died)"),
    ),
)
COLUMNS: dict[str, str] = {c.name: c.dtype for c in CONTRACT}  # name -> pandas dtype, in the published order
# version -> the columns it added (after 1.0); rows of older runs read back with those empty
COLUMNS_SINCE: dict[str, tuple[str, ...]] = {
    version: tuple(c.name for c in CONTRACT if c.since == version)
    for version in sorted({c.since for c in CONTRACT} - {"1.0"}, key=version_tuple)}
KEY_COLUMNS = ("run_id", "schema_version", *CELL_KEY, "status")
# The run folder's partition keys, `runs/dt=<date>/run=<safe id>/`, which hive-partitioned readers add as columns:
# never the name of a column. Before 1.4 the run's key was OLD_RUN_KEY, the `run_id` column's own name.
PARTITIONS = {
    "dt": "the run's logical date, YYYY-MM-DD",
    "run": "the run id made safe as a folder name (characters outside [A-Za-z0-9._-] become `_`): join on `run_id`, "
           "which is the id itself",
}
OLD_RUN_KEY = "run_id"
# What each schema version changed, for the data dictionary.
SCHEMA_CHANGES = {
    "1.0": "the first contract",
    "1.1": "`protocol`",
    "1.2": "`generator_late_starts`",
    "1.3": "the suite, the control role, the serving configuration, the image kind and CPU/memory budget, a 95 % "
           "interval of throughput, the served-output check, restarts, sweeps' beyond-capacity points, the engine's "
           "in-process speed",
    "1.4": "no column added; run folders are `runs/dt=<date>/run=<safe id>/` (no partition key repeats a column: "
           "`run_id` keeps the real id) and every column has one Arrow type in every file, written from this "
           "contract (strings `string`, never `large_string`; integers `int64`, also when all are null)",
    "1.5": "the inputs of each cell and their hash (what the regression duet compares), the server's CPU time per "
           "request; `wire`, `protocol` in the cell key (a row before 1.1, without one, keys as its server's REST "
           "JSON codec), request and response payload bytes, where a request's time goes (`server_ms`, `queue_ms`, "
           "`decode_ms`, `infer_ms`, `encode_ms`, `outside_ms`, `breakdown_source`); the host's state during every "
           "load point (other work's CPU, steal, the server's CPU share of its budget and its run-queue wait, other "
           "work on its CPUs, CPU pressure, load average, all of it as JSON), `remeasured`, and the status "
           "`contended`",
    "1.6": "how each server lives (`first_correct_s`, `idle_rss_mb`, `session_rss_peak_mb`, `rss_growth_mb`, "
           "`server_processes`, `server_threads`, `runtime_size_mb`) and what it can do and takes to serve "
           "(`capabilities` declared and probed, `capability_findings`, `config_lines`, `code_lines`, "
           "`serving_files`), each per server life on every row it measured",
    "1.7": "what serving costs: `server_core_s_per_1k`, `gpu_s_per_1k`, and with the run's prices "
           "(`price_per_core_hour`, `price_per_gpu_hour`) `price_per_million`; overload rows (`mode` overload, Param "
           "`overload`): `overload_factor`, `capacity_rps`, `goodput_rps`, `goodput_pct`, `burst_p99_ms`, "
           "`pre_burst_p99_ms`, `recovery_s`, `recovered`, `overload_class`, `overload`",
    "1.8": "every claim with the confidence behind it: `latency_samples`; each percentile's 95 % interval "
           "(`latency_ms_<p>_ci_low`, `_ci_high`) and, where its requests are too few, no figure but a lower bound "
           "(`latency_ms_<p>_at_least`); the p99 bound decided (`p99_bound_ms`, `p99_bound_verdict`, "
           "`p99_bound_exceed`, `p99_bound_rate_high_pct`, `p99_bound_more_requests`, `p99_bound_confidence_pct`, "
           "`p99_bound_looks`, `p99_bounds`) and points lengthened while undecided (`lengthened`)",
    "1.9": "`workload` in the cell key (rows before it read `fixed`); mode `trace`: a recorded or generated trace "
           "replayed at its offsets, `load` its speed factor",
}



def row_protocol(row: dict[str, Any]) -> str:
    """The protocol (codec) a row was measured over; rows from before schema 1.1 (none) used their server's REST
    JSON codec (LEGACY_PROTOCOLS), and a server unknown then has "" (its old rows compare among themselves)."""
    return str(row.get("protocol") or LEGACY_PROTOCOLS.get(str(row.get("server")), ""))


def cell_key(row: dict[str, Any]) -> tuple:
    """The cell key of a row (or a planned cell's fields): the one spelling of it. Rows from before schema 1.3 (no
    `config_id`) ran the default configuration; rows from before 1.1 (no `protocol`) their server's REST JSON; rows
    from before 1.9 (no `workload`) the fixed request."""
    return tuple((row.get(k) or DEFAULT_CONFIG_ID) if k == "config_id" else row_protocol(row) if k == "protocol"
                 else row_workload(row) if k == "workload" else row.get(k) for k in CELL_KEY)


def empty_row() -> dict[str, Any]:
    return dict.fromkeys(COLUMNS)


def to_frame(rows: list[dict[str, Any]]):
    """Rows -> a DataFrame with exactly the contract's columns and types (unknown keys are dropped)."""
    import pandas as pd

    frame = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=list(COLUMNS))
    return frame.astype(COLUMNS)


def conform(frame):
    """A results frame from any run (an older schema, types pandas inferred on some night) as the contract has it:
    every contract column in its order and type, those the run lacks empty; columns outside the contract follow,
    as they were. A value the contract's type cannot hold is a ValueError naming the column."""
    import pandas as pd

    data = {}
    for name, dtype in COLUMNS.items():
        series = frame[name] if name in frame.columns else pd.Series(None, index=frame.index, dtype=object)
        try:
            data[name] = series.astype(dtype)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"results column {name}: {series.dtype} values cannot be read as {dtype}, the "
                             f"contract's type ({exc})") from exc
    data.update({name: frame[name] for name in frame.columns if name not in COLUMNS})
    return pd.DataFrame(data, index=frame.index)


def arrow_schema():
    """The Arrow schema of every results.parquet: one type per column, from the contract, whatever the frame holds."""
    import pyarrow as pa

    types = {STRING: pa.string(), INT: pa.int64(), FLOAT: pa.float64(), BOOL: pa.bool_()}
    return pa.schema([pa.field(c.name, types[c.dtype], nullable=True) for c in CONTRACT])


def frame_records(frame) -> list[dict[str, Any]]:
    """A results frame back as plain row dicts: missing values None, numpy scalars as Python values."""
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in records]


def to_parquet_bytes(frame) -> bytes:
    """The frame as results.parquet: exactly the contract's columns, written with `arrow_schema()` (never the types
    pandas would infer), so every run's file has the same schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(conform(frame)[list(COLUMNS)], schema=arrow_schema(), preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def read_parquet_bytes(data: bytes):
    """A results.parquet of any run, conformed to the contract (`conform`)."""
    import io

    import pandas as pd

    return conform(pd.read_parquet(io.BytesIO(data)))


def to_csv_bytes(frame) -> bytes:
    return frame.to_csv(index=False).encode()


REFERENCE_PAGE = "docs/results-reference.md"
REFERENCE_COMMAND = "python -m tasks.cli reference"


def reference_markdown() -> str:
    """The data dictionary (docs/results-reference.md): every column with its types, unit, meaning and the version
    that added it; the partition keys; what each schema version changed. Generated, never edited by hand."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [
        f"# Results reference (schema {SCHEMA_VERSION})",
        "",
        f"<!-- Generated from tasks/core/results.py by `{REFERENCE_COMMAND}`: edit the contract there and run it "
        "again; tests/unit/core/test_results.py fails while this page and the contract disagree. -->",
        "",
        f"Generated from the results contract (`tasks/core/results.py`) by `{REFERENCE_COMMAND}`. Every "
        "`results.parquet` and `results.csv` a run publishes has these columns in this order, one row per cell. "
        "Every column may be null (a failed or skipped cell has no figures). The Arrow type is the one each column "
        "has in every run's Parquet file, whatever the night; pandas reads it as the pandas type; DuckDB sees the "
        "DuckDB type. Units are those of the metrics table (`tasks/core/metrics.py`) where the column is a metric. "
        "What the files are and how to read them: [results](results.md).",
        "",
        "## Partition keys",
        "",
        "Runs are stored as `runs/dt=<YYYY-MM-DD>/run=<safe id>/results.parquet`. A hive-partitioned reader "
        "(DuckDB `hive_partitioning = true`, `pyarrow.dataset` with `partitioning=\"hive\"`, Spark, Athena) adds "
        "these keys as columns: pyarrow as strings; DuckDB infers a type from the folder names it reads (`dt` a "
        "DATE, `run` a VARCHAR unless every id it reads looks like a number). Neither repeats a column of the table, "
        "so no reader replaces or rejects one:",
        "",
        "| key | meaning |",
        "|---|---|",
        *(f"| `{key}` | {cell(meaning)} |" for key, meaning in PARTITIONS.items()),
        "",
        f"Runs published before schema 1.4 sit under `runs/dt=<date>/{OLD_RUN_KEY}=<safe id>/`, a key that "
        "repeated the `run_id` column. The project's readers still read that layout through the 1.x contract "
        "(dropped in 2.0); `python -m tasks.cli migrate`, and every publish of 1.4 or later, move such runs to the "
        "new layout, so that one layout remains for readers of the files.",
        "",
        "## Columns",
    ]
    groups: dict[str, list[Column]] = {}
    for column in CONTRACT:
        groups.setdefault(column.group, []).append(column)
    for group, columns in groups.items():
        lines += ["", f"### {group}", "", "| column | Arrow | pandas | DuckDB | unit | since | meaning |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| `{c.name}` | {c.arrow_type} | {c.dtype} | {DUCKDB_TYPES[c.dtype]} | {cell(c.unit) or '–'} | "
                  f"{c.since} | {cell(c.meaning)} |" for c in columns]
    lines += ["", "## Schema versions", "", "| version | changed |", "|---|---|"]
    lines += [f"| {version} | {cell(change)} |" for version, change in SCHEMA_CHANGES.items()]
    return "\n".join(lines) + "\n"
