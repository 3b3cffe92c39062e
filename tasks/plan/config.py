"""The run configuration: the DAG's Params (or the CLI's JSON) parsed and checked before any work starts.

The same rules as the Params' JSON schema are enforced here, so a run started from the CLI, a test or an
old trigger form gets the same clear error naming the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tasks.convert import FORMATS
from tasks.core.cost import Prices
from tasks.core.errors import ConfigError
from tasks.core.results import WIRES
from tasks.core.spec import catalogue
from tasks.loadgen.settings import MAX_CONCURRENCY, MAX_DURATION_S, MAX_WORKERS, STABLE_WINDOWS, check_timing
from tasks.loadgen.trace import MAX_SPEED, MIN_SPEED, load_trace, trace_catalogue
from tasks.plan.control import parse_control
from tasks.plan.hosts import check_hosts
from tasks.plan.suites import load_suite
from tasks.plan.tune import TUNE_METHODS
from tasks.serve.budget import check_budget
from tasks.serve.options import DEVICES, IMAGE_SOURCES
from tasks.serve.servers import server_names as registered_servers

LAUNCHERS = ("process", "docker")
RUN_MODES = ("concurrency", "rate", "both")  # closed loop, open loop, or both in every server session
SSE_MODES = ("AES256", "aws:kms")
ARRIVALS = ("constant", "poisson")
CONCURRENCY_SWEEPS = ("list", "doubling")  # list: a cell per concurrency; doubling: one sweep cell (loadgen/sweep.py)
# The wires a run measures every stack over (tasks/serve/base.py `Server.wires`): json (REST, tensors as JSON),
# binary (REST, tensors as bytes), grpc; `best`: every wire the stack speaks, the fastest picked from the figures.
BEST = "best"
PROTOCOLS = (*WIRES, BEST)
OLD_PROTOCOL = {"default": "json", "grpc": "grpc"}  # Param `protocol` before `protocols` (older plan.json files)
MAX_BATCH_SIZE = 1024
MAX_READY_TIMEOUT_S = 1800
MAX_TUNE_BUDGET_S = 86400.0
MAX_DUET_PAIRS = 40
MAX_SIZE_ROUNDS = 40
MAX_SIZE_BUDGET_S = 7200.0
MAX_QUIET_WAIT_S = 600.0  # the longest a contended point waits for the host to quiet before its re-measurement
MAX_RECORD_NIGHTS = 120  # the most nights a stack's record counts (the regression check reads as many)
MAX_STORE_WAIT_S = 14400.0  # the longest a step waits for a store that does not answer: a night's hold on the next
MAX_NIGHT_BUDGET_S = 86400.0  # a night's budget: at most a day (the schedule runs one a day)
MIN_NIGHT_BUDGET_S = 60.0  # below a minute no server session fits
# What a night measures first when its budget cannot hold the whole matrix (tasks/plan/night.py): the cells the
# answers rest on, then the rest of the sweeps, the other wires, overload and recovery, the rest. A suite may reorder.
NIGHT_CLASSES = ("answers", "sweeps", "wires", "overload", "rest")


def param_names() -> list[str]:
    """Every Param a run takes (the fields of RunConfig)."""
    return [f.name for f in fields(RunConfig)]


def check_param_names(params: dict[str, Any], where: str = "") -> None:
    """The one rule for keys: a key that is not a Param is refused, naming it (and where it was written)."""
    known = set(param_names())
    for key in sorted(params):
        if key not in known:
            raise ConfigError(f"{where}{key}", params[key], f"is not a Param; Params are {sorted(known)}")


def resolve_params(params: dict[str, Any], suites_dir: Path | None = None) -> dict[str, Any]:
    """Defaults < the suite named by params["suite"] (if any, from `suites_dir`, default suites/) < the values given
    (None means not given). A key that is not a Param is refused, in the suite naming its file."""
    given = {k: v for k, v in params.items() if v is not None}
    check_param_names(given)
    name = given.get("suite")
    if not name:
        return given
    suite = load_suite(name, suites_dir)
    check_param_names({k: v for k, v in suite.items() if k != "suite"}, f"suite {name} ({name}.yaml): ")
    return {**suite, **given}


def model_names() -> list[str]:
    return sorted(catalogue())


def server_names() -> list[str]:
    return registered_servers()


def trace_names() -> list[str]:
    return sorted(trace_catalogue())

MIN_CONFIDENCE_PCT = 50.0  # below this a decision is a coin toss

@dataclass(frozen=True)
class RunConfig:
    suite: str | None = None  # the suite (suites/<name>.yaml) the values not given explicitly came from
    models: tuple[str, ...] = ("mlp",)
    formats: tuple[str, ...] = ("onnx",)
    servers: tuple[str, ...] = ("custom",)
    launcher: str = "process"
    device: str = "cpu"
    batch_sizes: tuple[int, ...] = (1,)
    mode: str = "concurrency"
    concurrencies: tuple[int, ...] = (1, 4)
    rates: tuple[float, ...] = (50.0,)
    arrival: str = "constant"
    protocols: tuple[str, ...] = ("json",)
    concurrency_sweep: str = "list"  # doubling: from `workers` up to max(concurrencies), stopped by p99/throughput
    rate_search: bool = False  # open loop: the highest rate with p99 <= p99_bound_ms, from min(rates)
    p99_bound_ms: float | None = None  # the sweeps' latency bound (required by rate_search and trace_search)
    # traces replayed on every stack in open loop at their offsets (workloads/traces/<name>.csv, loadgen/trace.py),
    # a cell per speed factor (1: as recorded), or with trace_search one cell per trace: the largest speed with p99
    # within p99_bound_ms, doubling from min(trace_speeds) then bisecting, decided as every claim is
    traces: tuple[str, ...] = ()
    trace_speeds: tuple[float, ...] = (1.0,)
    trace_search: bool = False
    trace_models: tuple[str, ...] | None = None  # the models the traces are replayed for; None: every model of the run
    # the confidence of "p99 within a bound" (tasks/core/confidence.py): 95, not MLPerf's 99, so that a slow model's
    # claim rests on 299 requests, not 459; 99 matches MLPerf
    confidence_pct: float = 95.0
    # a point whose bound decision its first look leaves undecided, and that could be its stack's best within the
    # bound, is measured again for this long (None: never): tasks/measure/bounds.py
    max_point_s: float | None = None
    duration_s: float = 10.0
    warmup_s: float = 2.0
    window_s: float = 2.0
    stability_pct: float = 10.0
    request_timeout_s: float = 10.0
    max_error_rate: float = 0.0  # a load point with errors is failed unless their fraction is below this
    max_neighbour_pct: float = 25.0  # above this much of the host's CPU used by other work a point is contended
    quiet_wait_s: float = 30.0  # a contended point waits at most this long for the host to quiet, then is re-measured
    tune: str = "off"  # off | grid | quick: a serving-configuration search per server session (tasks/plan/tune.py)
    tune_budget_s: float = 1800.0  # the search's time budget per server session
    stop_when_stable: bool = False  # end a load point at the first stable window after min_windows
    min_windows: int = STABLE_WINDOWS
    workers: int = 1  # generator processes per load point
    ready_timeout_s: float = 120.0
    dynamic_batching: bool = False
    max_batch_size: int = 8
    pin_cpus: bool = True
    server_cpus: int | str | None = None  # an integer: a CPU count; a string: a CPU set ("2-3"); serve/budget.py
    server_memory: str | None = None  # the server's memory limit ("2g"): containers only
    images: str = "project"  # launcher=docker: images built here, or "official" ones where a registry serves them
    s3_bucket: str = "serving-eval"
    s3_prefix: str = "serving-eval"
    aws_conn_id: str = "serving_eval_s3"
    s3_sse: str = "AES256"
    s3_kms_key_id: str | None = None
    share_artifacts: bool = True
    # how long each request of the run's later steps waits for a store that does not answer (tasks/store/wait.py),
    # so that an outage while a night publishes loses nothing; 0: fail at once (after botocore's own retries)
    store_wait_s: float = 1800.0
    fail_on_cell_failure: bool = True
    fail_on_regression: bool = False
    control_cell: str | None = "mlp/onnx/custom"  # model/format/server measured every night (tasks/plan/control.py)
    duets: bool = True  # measure each cell whose inputs changed beside its reference's (tasks/regress/night_duets.py)
    duet_min_pairs: int = 3  # a duet's first pairs at each of its load points, before it may stop as decided
    duet_max_pairs: int = 6  # ... and the most pairs it measures while still undecided
    # a change a duet finds is sized alone (tasks/regress/size_rounds.py): at most this many interleaved solo rounds a
    # changed load point (0: not sized, the verdict says "size uncertain"), within size_budget_s of measuring time
    size_rounds: int = 12
    size_budget_s: float = 600.0
    # the whole night's budget (tasks/plan/night.py): the plan estimates every stage and defers what does not fit, in
    # the order `night_order`, to a later night (rolling coverage); None: no budget, every planned cell runs
    night_budget_s: float | None = None
    night_order: tuple[str, ...] = NIGHT_CLASSES
    hosts: tuple[str, ...] | None = None  # the run's measuring hosts (plan/hosts.py); None: every deployed one
    overload: bool = False  # after capacity is known, bursts at 1.5x and 3x it and the recovery (loadgen/overload.py)
    price_per_core_hour: float | None = None  # a CPU core-hour's price (tasks/core/cost.py); None: no money shown
    price_per_gpu_hour: float | None = None  # a GPU-hour's price; None: no money shown for GPU rows
    notify: tuple[str, ...] = ()  # Airflow connection ids of notifiers (smtp, slackwebhook, apprise): the message
    notify_quiet: bool = False  # also send a short message on a night without a new finding ("all well")
    ui_base_url: str | None = None  # the Airflow UI's address, for the report's link in the reports page
    record_nights: int = 14  # nights in each stack's record (tasks/report/record.py), tonight included

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> RunConfig:
        """The run's configuration: the defaults, then the named `suite`'s values, then every value given (a
        None value is "not given": the form's empty fields and the suite's values show through). Checked."""
        config = cls.from_dict(resolve_params(params))
        config.check()
        return config

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunConfig:
        """A configuration from resolved values (what `to_dict` wrote into plan.json): no suite is read again, so a
        suite file renamed or edited while a run goes on changes nothing in its later tasks."""
        values = dict(values)
        if "protocol" in values and "protocols" not in values:  # a plan.json written before `protocols`
            old = values.pop("protocol")
            values["protocols"] = [OLD_PROTOCOL.get(old, old)] if old is not None else None
        check_param_names(values)
        values = {k: v for k, v in values.items() if v is not None}
        if str(values.get("control_cell", "")).lower() in ("none", "off"):
            values["control_cell"] = None  # "none" turns the control off (a null means "the suite's, or default")
        for name in ("models", "formats", "servers", "batch_sizes", "concurrencies", "rates", "hosts", "protocols",
                     "notify", "night_order", "traces", "trace_speeds", "trace_models"):
            if name in values:
                if isinstance(values[name], (str, int, float)):
                    values[name] = [values[name]]
                values[name] = tuple(values[name])
        return cls(**values)

    def check(self) -> None:
        def one_of(name: str, allowed: list[str] | tuple[str, ...], many: bool = True) -> None:
            values = getattr(self, name) if many else (getattr(self, name),)
            if many and not values:
                raise ConfigError(name, list(values), f"must name at least one of {list(allowed)}")
            for value in values:
                if value not in allowed:
                    raise ConfigError(name, value, f"must be one of {list(allowed)}")

        one_of("models", model_names())
        one_of("formats", FORMATS)
        one_of("servers", server_names())
        one_of("launcher", LAUNCHERS, many=False)
        one_of("device", DEVICES, many=False)
        one_of("mode", RUN_MODES, many=False)
        one_of("arrival", ARRIVALS, many=False)
        one_of("protocols", PROTOCOLS)
        one_of("concurrency_sweep", CONCURRENCY_SWEEPS, many=False)
        bound = self.p99_bound_ms
        if bound is not None and not (isinstance(bound, (int, float)) and bound > 0):
            raise ConfigError("p99_bound_ms", self.p99_bound_ms, "must be > 0 ms or null")
        if not (isinstance(self.confidence_pct, (int, float)) and MIN_CONFIDENCE_PCT <= self.confidence_pct < 100):
            raise ConfigError("confidence_pct", self.confidence_pct, f"must be >= {MIN_CONFIDENCE_PCT:g} and < 100 "
                                                                     "(percent; 95 default, 99 as MLPerf)")
        one_of("tune", TUNE_METHODS, many=False)
        if self.tune != "off" and self.p99_bound_ms is None:
            raise ConfigError("p99_bound_ms", None, f"must be set (> 0 ms) when tune is {self.tune!r}: a configuration "
                                                    "scores its best throughput with p99 within it")
        if not (isinstance(self.tune_budget_s, (int, float)) and 0 < self.tune_budget_s <= MAX_TUNE_BUDGET_S):
            raise ConfigError("tune_budget_s", self.tune_budget_s, f"must be > 0 and <= {MAX_TUNE_BUDGET_S:.0f} s")
        if self.rate_search and self.mode in ("rate", "both") and self.p99_bound_ms is None:
            raise ConfigError("p99_bound_ms", None, "must be set (> 0 ms) when rate_search is on")
        self.check_traces()
        for b in self.batch_sizes or (0,):
            if not (isinstance(b, int) and 1 <= b <= MAX_BATCH_SIZE):
                raise ConfigError("batch_sizes", b, f"each must be an integer from 1 to {MAX_BATCH_SIZE}")
        if self.mode in ("concurrency", "both"):
            for c in self.concurrencies or (0,):
                if not (isinstance(c, int) and 1 <= c <= MAX_CONCURRENCY):
                    raise ConfigError("concurrencies", c, f"each must be an integer from 1 to {MAX_CONCURRENCY}")
        if self.mode in ("rate", "both"):
            for r in self.rates or (0,):
                if not (isinstance(r, (int, float)) and r > 0):
                    raise ConfigError("rates", r, "each must be > 0 requests/s")
        check_timing(self.duration_s, self.warmup_s, self.window_s)
        if self.max_point_s is not None and not (isinstance(self.max_point_s, (int, float))
                                                 and self.duration_s < self.max_point_s <= MAX_DURATION_S):
            raise ConfigError("max_point_s", self.max_point_s, f"must be > duration_s ({self.duration_s:g}) and <= "
                                                               f"{MAX_DURATION_S:.0f} s, or null (never lengthen)")
        if not (isinstance(self.max_error_rate, (int, float)) and 0 <= self.max_error_rate <= 1):
            raise ConfigError("max_error_rate", self.max_error_rate,
                              "must be from 0 (any failed request fails the load point) to 1")
        if isinstance(self.max_neighbour_pct, bool) or not (
                isinstance(self.max_neighbour_pct, (int, float)) and 0 <= self.max_neighbour_pct <= 100):
            raise ConfigError("max_neighbour_pct", self.max_neighbour_pct,
                              "must be from 0 to 100 (% of the host's CPU other work may use during a load point; "
                              "100: never judged contended)")
        if isinstance(self.quiet_wait_s, bool) or not (
                isinstance(self.quiet_wait_s, (int, float)) and 0 <= self.quiet_wait_s <= MAX_QUIET_WAIT_S):
            raise ConfigError("quiet_wait_s", self.quiet_wait_s,
                              f"must be from 0 to {MAX_QUIET_WAIT_S:g} s (how long a contended point waits for the "
                              "host to quiet before it is measured again)")
        if not (isinstance(self.request_timeout_s, (int, float)) and self.request_timeout_s > 0):
            raise ConfigError("request_timeout_s", self.request_timeout_s, "must be > 0 s")
        if not (isinstance(self.workers, int) and 1 <= self.workers <= MAX_WORKERS):
            raise ConfigError("workers", self.workers, f"must be an integer from 1 to {MAX_WORKERS}")
        if self.mode in ("concurrency", "both") and self.workers > min(self.concurrencies):
            raise ConfigError("workers", self.workers,
                              f"must be <= the smallest concurrency ({min(self.concurrencies)})")
        max_windows = int(self.duration_s / self.window_s + 1e-9)
        if self.min_windows < STABLE_WINDOWS or (self.stop_when_stable and self.min_windows > max_windows):
            raise ConfigError("min_windows", self.min_windows,
                              f"must be >= {STABLE_WINDOWS} and, with stop_when_stable, <= duration_s / window_s "
                              f"({max_windows})")
        one_of("images", IMAGE_SOURCES, many=False)
        check_budget(self.server_cpus, self.server_memory, self.pin_cpus)
        if not 0 < self.ready_timeout_s <= MAX_READY_TIMEOUT_S:
            raise ConfigError("ready_timeout_s", self.ready_timeout_s, f"must be > 0 and <= {MAX_READY_TIMEOUT_S}")
        if not self.s3_bucket:
            raise ConfigError("s3_bucket", self.s3_bucket, "must name a bucket")
        one_of("s3_sse", SSE_MODES, many=False)
        if self.s3_sse == "aws:kms" and not self.s3_kms_key_id:
            raise ConfigError("s3_kms_key_id", self.s3_kms_key_id, "must name a KMS key when s3_sse is 'aws:kms'")
        if isinstance(self.store_wait_s, bool) or not (
                isinstance(self.store_wait_s, (int, float)) and 0 <= self.store_wait_s <= MAX_STORE_WAIT_S):
            raise ConfigError("store_wait_s", self.store_wait_s,
                              f"must be from 0 to {MAX_STORE_WAIT_S:g} s (how long publishing and the regression "
                              "check wait for a store that does not answer; 0: not at all)")
        if not (isinstance(self.duet_min_pairs, int) and 2 <= self.duet_min_pairs <= MAX_DUET_PAIRS):
            raise ConfigError("duet_min_pairs", self.duet_min_pairs, f"must be an integer from 2 to {MAX_DUET_PAIRS}")
        if not (isinstance(self.duet_max_pairs, int) and self.duet_min_pairs <= self.duet_max_pairs <= MAX_DUET_PAIRS):
            raise ConfigError("duet_max_pairs", self.duet_max_pairs,
                              f"must be an integer from duet_min_pairs ({self.duet_min_pairs}) to {MAX_DUET_PAIRS}")
        if isinstance(self.size_rounds, bool) or not (isinstance(self.size_rounds, int) and (
                self.size_rounds == 0 or 2 <= self.size_rounds <= MAX_SIZE_ROUNDS)):
            raise ConfigError("size_rounds", self.size_rounds,
                              f"must be 0 (changes not sized alone) or an integer from 2 to {MAX_SIZE_ROUNDS}")
        if isinstance(self.size_budget_s, bool) or not (isinstance(self.size_budget_s, (int, float))
                                                         and 0 < self.size_budget_s <= MAX_SIZE_BUDGET_S):
            raise ConfigError("size_budget_s", self.size_budget_s, f"must be > 0 and <= {MAX_SIZE_BUDGET_S:g} s")
        self.check_night()
        if self.control_cell is not None:
            model, fmt, server = parse_control(self.control_cell)
            for name, value, allowed in (("model", model, model_names()), ("format", fmt, FORMATS),
                                         ("server", server, server_names())):
                if value not in allowed:
                    raise ConfigError("control_cell", self.control_cell, f"its {name} must be one of {list(allowed)}")
        if not self.aws_conn_id:
            raise ConfigError("aws_conn_id", self.aws_conn_id, "must name an Airflow connection")
        check_hosts(self.hosts)
        if not isinstance(self.overload, bool):
            raise ConfigError("overload", self.overload, "must be true or false")
        self.prices()  # a price that is not a number >= 0 is refused here, naming its Param
        self.check_notify()

    def check_traces(self) -> None:
        """Each trace is in the catalogue and replays within a load point's longest time at its slowest speed."""
        if len(set(self.traces)) != len(self.traces):
            raise ConfigError("traces", list(self.traces), "must name each trace once")
        for speed in self.trace_speeds or (0,):
            if isinstance(speed, bool) or not (isinstance(speed, (int, float)) and MIN_SPEED <= speed <= MAX_SPEED):
                raise ConfigError("trace_speeds", speed, f"each must be from {MIN_SPEED:g} to {MAX_SPEED:g} (1: the "
                                                         "trace as recorded, 2: twice as fast)")
        if not isinstance(self.trace_search, bool):
            raise ConfigError("trace_search", self.trace_search, "must be true or false")
        for model in self.trace_models or ():
            if model not in self.models:
                raise ConfigError("trace_models", model, f"must be one of the run's models {list(self.models)}")
        if self.trace_search and self.traces and self.p99_bound_ms is None:
            raise ConfigError("p99_bound_ms", None, "must be set (> 0 ms) when trace_search is on")
        for name in self.traces:
            trace = load_trace(name)
            slowest = min(self.trace_speeds)
            if trace.replay_s(slowest) > MAX_DURATION_S:
                raise ConfigError("trace_speeds", slowest, f"replays trace {name} in {trace.replay_s(slowest):.0f} s: "
                                                           f"a load point runs at most {MAX_DURATION_S:.0f} s (raise "
                                                           "the speed or cut the trace)")

    def trace_labels(self) -> tuple[str, ...]:
        """Each trace's workload label (`trace:<name>@<digest>`), read from its file now: the plan carries them."""
        return tuple(load_trace(name).label for name in self.traces)

    def check_night(self) -> None:
        """The night's budget and the order its classes of cells are measured in (tasks/plan/night.py)."""
        budget = self.night_budget_s
        if budget is not None and (isinstance(budget, bool) or not (
                isinstance(budget, (int, float)) and MIN_NIGHT_BUDGET_S <= budget <= MAX_NIGHT_BUDGET_S)):
            raise ConfigError("night_budget_s", budget, f"must be from {MIN_NIGHT_BUDGET_S:g} to "
                                                        f"{MAX_NIGHT_BUDGET_S:g} s, or null (no budget)")
        order = self.night_order
        if sorted(order) != sorted(NIGHT_CLASSES) or len(set(order)) != len(order):
            raise ConfigError("night_order", list(order), f"must name each of {list(NIGHT_CLASSES)} once, in the "
                                                          "order a night measures them")

    def check_notify(self) -> None:
        """The notification Params' shapes (whether each connection exists and is of a kind that sends is checked by
        the DAG's plan step, which can look connections up: plugins/serving_eval_notifiers.py)."""
        for conn_id in self.notify:
            if not (isinstance(conn_id, str) and conn_id.strip()):
                raise ConfigError("notify", conn_id, "each must be the id of an Airflow connection (a notifier)")
        if len(set(self.notify)) != len(self.notify):
            raise ConfigError("notify", list(self.notify), "must name each connection once")
        if not isinstance(self.notify_quiet, bool):
            raise ConfigError("notify_quiet", self.notify_quiet, "must be true or false")
        url = self.ui_base_url
        if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            raise ConfigError("ui_base_url", url, "must be the Airflow UI's address, http:// or https:// "
                                                  "(e.g. http://127.0.0.1:8080), or null")
        if isinstance(self.record_nights, bool) or not (
                isinstance(self.record_nights, int) and 1 <= self.record_nights <= MAX_RECORD_NIGHTS):
            raise ConfigError("record_nights", self.record_nights,
                              f"must be an integer from 1 to {MAX_RECORD_NIGHTS} (nights, tonight included)")

    def prices(self) -> Prices:
        """The prices the run's cost columns are read at (tasks/core/cost.py); checked."""
        return Prices(self.price_per_core_hour, self.price_per_gpu_hour)

    def target_hosts(self) -> tuple[str, ...]:
        """The hosts this run measures on: `hosts`, or every host of the deployment (`SERVING_EVAL_HOSTS`)."""
        return check_hosts(self.hosts)

    def load_groups(self) -> list[tuple[str, tuple[float, ...]]]:
        """(cell mode, loads) of every server session: the closed loop's listed concurrencies or one
        "concurrency-sweep" cell (its load the largest concurrency), then the open loop's listed rates or one
        "rate-search" cell (its load the smallest rate), as `mode` asks."""
        groups: list[tuple[str, tuple[float, ...]]] = []
        if self.mode in ("concurrency", "both"):
            groups.append(("concurrency-sweep", (float(max(self.concurrencies)),)) if self.concurrency_sweep ==
                          "doubling" else ("concurrency", tuple(float(c) for c in self.concurrencies)))
        if self.mode in ("rate", "both"):
            groups.append(("rate-search", (float(min(self.rates)),)) if self.rate_search else
                          ("rate", tuple(float(r) for r in self.rates)))
        return groups

    def trace_groups(self) -> list[tuple[str, tuple[float, ...]]]:
        """(cell mode, speeds) of each trace's cells: one "trace-search" cell (its load the slowest speed) or a
        "trace" cell per speed; none without traces."""
        if not self.traces:
            return []
        if self.trace_search:
            return [("trace-search", (float(min(self.trace_speeds)),))]
        return [("trace", tuple(float(s) for s in self.trace_speeds))]

    def to_dict(self) -> dict:
        values = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        if values["control_cell"] is None:
            values["control_cell"] = "none"  # a null reads back as "the default control" (from_dict)
        return values
