"""Validation of a run's results and parity records with Great Expectations (ephemeral, suites in code).

The load generator records; this judges. The JSON result is published as `validation.json`.
"""

from __future__ import annotations

import os
from typing import Any

from tasks.core.confidence import VERDICTS
from tasks.core.results import CELL_KEY, COLUMNS, KEY_COLUMNS, OVERLOAD_MODE, SCHEMA_VERSION, STATUSES, WIRES
from tasks.validate.overload import OVERLOAD_CLASSES

# the published percentiles whose claims are checked (each expectation costs GX about 0.1 s a run; p90 and p95 lie
# between p50 and p99, whose order is checked above)
CHECKED_CLAIMS = ("p50", "p99", "p999")

MEASURED_ROWS = 'status=="ok" or status=="contended"'  # a contended row keeps its (clean) figures
# ... and of those the steady load points: an overload row's figures are in its own columns (1.7)
STEADY_ROWS = f'(status=="ok" or status=="contended") and mode!="{OVERLOAD_MODE}"'
OVERLOAD_ROWS = f'(status=="ok" or status=="contended") and mode=="{OVERLOAD_MODE}"'
PARITY_COLUMNS = ["model", "format", "max_abs_err", "max_rel_err", "atol", "rtol", "passed"]
LATENCY_ORDER = ("latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99", "latency_ms_max")


def results_expectations(expected_rows: int) -> list:
    import great_expectations.expectations as gxe

    ok = {"row_condition": MEASURED_ROWS, "condition_parser": "pandas"}
    steady = {"row_condition": STEADY_ROWS, "condition_parser": "pandas"}
    exps = [
        gxe.ExpectTableColumnsToMatchOrderedList(column_list=list(COLUMNS)),
        gxe.ExpectTableRowCountToEqual(value=expected_rows),
        gxe.ExpectCompoundColumnsToBeUnique(column_list=list(CELL_KEY)),
        gxe.ExpectColumnValuesToBeInSet(column="status", value_set=list(STATUSES)),
        gxe.ExpectColumnValuesToBeInSet(column="wire", value_set=list(WIRES)),
        gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[SCHEMA_VERSION]),
        gxe.ExpectColumnValuesToBeBetween(column="error_rate", min_value=0, max_value=1),
        gxe.ExpectColumnValuesToBeBetween(column="startup_s", min_value=0),
        gxe.ExpectColumnValuesToBeBetween(column="neighbour_cpu_pct", min_value=0, max_value=100),
        gxe.ExpectColumnValuesToNotBeNull(column="host_state", **ok),  # every measured point records the host
        gxe.ExpectColumnValuesToBeBetween(column="throughput_rps", min_value=0, strict_min=True, **steady),
        gxe.ExpectColumnValuesToNotBeNull(column="throughput_rps", **steady),
        gxe.ExpectColumnValuesToNotBeNull(column="latency_ms_p50", **steady),
        # a p99 of too few requests is published as a lower bound only (schema 1.8): one of the two, never both
        gxe.ExpectColumnValuesToNotBeNull(column="latency_ms_p99", row_condition=f"({STEADY_ROWS}) and "
                                          "latency_ms_p99_at_least.isnull()", condition_parser="pandas"),
        gxe.ExpectColumnValuesToNotBeNull(column="reason", row_condition='status!="ok"', condition_parser="pandas"),
    ]
    exps += [gxe.ExpectColumnValuesToNotBeNull(column=c) for c in KEY_COLUMNS]
    exps += [gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A=hi, column_B=lo, or_equal=True,
                                                         ignore_row_if="either_value_is_missing", **steady)
             for lo, hi in zip(LATENCY_ORDER, LATENCY_ORDER[1:], strict=False)]
    exps += confidence_expectations(steady)
    exps += lifecycle_expectations(ok)
    exps += cost_expectations()
    exps += overload_expectations()
    return exps


def confidence_expectations(steady: dict) -> list:
    """Every claim with what it rests on (schema 1.8, tasks/core/confidence.py): a steady row has its request count;
    each percentile lies in its interval; a percentile is a figure or a lower bound, never both; a bound decision is
    one of the verdicts."""
    import great_expectations.expectations as gxe

    either = {"ignore_row_if": "either_value_is_missing"}
    exps = [gxe.ExpectColumnValuesToNotBeNull(column="latency_samples", **steady),
            gxe.ExpectColumnValuesToBeBetween(column="latency_samples", min_value=1, **steady),
            gxe.ExpectColumnValuesToBeInSet(column="p99_bound_verdict", value_set=list(VERDICTS))]
    for key in CHECKED_CLAIMS:
        figure = f"latency_ms_{key}"
        exps += [gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A=figure, column_B=f"{figure}_ci_low",
                                                             or_equal=True, **either),
                 gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A=f"{figure}_ci_high", column_B=figure,
                                                             or_equal=True, **either),
                 gxe.ExpectColumnValuesToBeNull(column=figure, row_condition=f"{figure}_at_least.notnull()",
                                                condition_parser="pandas")]
    return exps


def overload_expectations() -> list:
    """Overload rows (schema 1.7, tasks/loadgen/overload.py): a measured one has its class, capacity, goodput and
    recovery flag; no steady figures (it is never ranked as a load point); the figures in their ranges."""
    import great_expectations.expectations as gxe

    rows = {"row_condition": OVERLOAD_ROWS, "condition_parser": "pandas"}
    exps = [gxe.ExpectColumnValuesToNotBeNull(column=c, **rows)
            for c in ("overload_class", "capacity_rps", "goodput_rps", "recovered", "overload_factor", "overload")]
    exps.append(gxe.ExpectColumnValuesToBeNull(column="throughput_rps", **rows))
    exps.append(gxe.ExpectColumnValuesToBeInSet(column="overload_class", value_set=list(OVERLOAD_CLASSES)))
    exps += [gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0)
             for c in ("goodput_rps", "goodput_pct", "burst_p99_ms", "pre_burst_p99_ms", "recovery_s")]
    exps.append(gxe.ExpectColumnValuesToBeBetween(column="capacity_rps", min_value=0, strict_min=True))
    return exps


def cost_expectations() -> list:
    """What serving costs (schema 1.7, tasks/core/cost.py): never negative; GPU-seconds only on a GPU; a price only
    where the run was given a core-hour's price."""
    import great_expectations.expectations as gxe

    exps = [gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0)
            for c in ("server_core_s_per_1k", "gpu_s_per_1k", "price_per_million", "price_per_core_hour",
                      "price_per_gpu_hour")]
    exps.append(gxe.ExpectColumnValuesToBeNull(column="gpu_s_per_1k", row_condition='device=="cpu"',
                                               condition_parser="pandas"))
    exps.append(gxe.ExpectColumnValuesToBeNull(column="price_per_million", row_condition="price_per_core_hour.isnull()",
                                               condition_parser="pandas"))
    return exps


def lifecycle_expectations(ok: dict) -> list:
    """How a server lives (schema 1.6): every measured row has its first correct answer and its capabilities; the
    figures are in their ranges and orders where they were read (a memory the launcher could not read is null)."""
    import great_expectations.expectations as gxe

    either = {"ignore_row_if": "either_value_is_missing"}
    exps = [gxe.ExpectColumnValuesToNotBeNull(column=c, **ok) for c in ("first_correct_s", "capabilities")]
    exps += [gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0, strict_min=True)
             for c in ("idle_rss_mb", "session_rss_peak_mb", "runtime_size_mb")]
    exps += [gxe.ExpectColumnValuesToBeBetween(column=c, min_value=1) for c in ("server_processes", "server_threads")]
    exps += [gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0)
             for c in ("capability_findings", "config_lines", "code_lines")]
    exps += [gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A=hi, column_B=lo, or_equal=True, **either, **ok)
             for hi, lo in (("first_correct_s", "startup_s"), ("session_rss_peak_mb", "idle_rss_mb"),
                            ("session_rss_peak_mb", "server_rss_mb"), ("server_threads", "server_processes"))]
    return exps


def parity_expectations(served: list[tuple[str, str]]) -> list:
    import great_expectations.expectations as gxe

    exps = [gxe.ExpectColumnValuesToNotBeNull(column=c) for c in ("model", "format", "max_abs_err", "passed")]
    exps.append(gxe.ExpectColumnValuesToBeBetween(column="max_abs_err", min_value=0))
    if served:  # every artifact that a server served must have passed parity
        condition = " or ".join(f'(model=="{m}" and format=="{f}")' for m, f in served)
        exps.append(gxe.ExpectColumnValuesToBeInSet(column="passed", value_set=[True], row_condition=condition,
                                                    condition_parser="pandas"))
    return exps


def _run_suite(context: Any, name: str, frame: Any, expectations: list) -> dict:
    import great_expectations as gx

    batch = (context.data_sources.add_pandas(name).add_dataframe_asset(name)
             .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": frame}))
    suite = gx.ExpectationSuite(name=name)
    for exp in expectations:
        suite.add_expectation(exp)
    return batch.validate(suite).to_json_dict()


def _describe(config: dict) -> str:
    """`type column` or `type column_A >= column_B`: which rule on which columns."""
    kwargs = config["kwargs"]
    if "column_A" in kwargs:
        return f"{config['type']} {kwargs['column_A']} >= {kwargs['column_B']}"
    return f"{config['type']} {kwargs.get('column', '')}".strip()


def validate_run(results_frame: Any, parity: list[dict], expected_rows: int) -> dict:
    """Validate the results table and parity records; return a JSON-ready record with `success`."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import pandas as pd

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = {"globally": False}
    frame = results_frame.astype(object).where(results_frame.notna(), None)  # GX handles None, not pd.NA
    results = _run_suite(context, "results", frame, results_expectations(expected_rows))
    served = sorted({(r, f) for r, f, s in zip(frame["model"], frame["format"], frame["status"], strict=True)
                     if s in ("ok", "contended")})
    parity_frame = pd.DataFrame(parity, columns=PARITY_COLUMNS)
    parity_result = _run_suite(context, "parity", parity_frame, parity_expectations(served)) if len(parity_frame) else {
        "success": not served, "results": [], "note": "no parity records"}
    failed = [f"{suite}: {_describe(r['expectation_config'])}"
              for suite, res in (("results", results), ("parity", parity_result)) for r in res["results"]
              if not r["success"]]
    return {
        "schema_version": SCHEMA_VERSION, "success": bool(results["success"] and parity_result["success"]),
        "failed_expectations": failed, "results": results, "parity": parity_result,
    }
