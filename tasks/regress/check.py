"""The regression check of one run: its history read from the store with the hygiene rules applied, judged
by `tasks.regress.detect`, with the control cell's drift.

History hygiene: only runs strictly before the run's logical date (so a backfill never sees later nights),
at most HISTORY_MAX_RUNS of them, less every run or cell excluded by an annotation (`tasks.regress.annotations`);
the earlier runs' own verdicts (their regressions.json) tell which nights are held out of baselines until
a regression persists.
"""

from __future__ import annotations

from tasks.core.metrics import METRICS
from tasks.core.results import SCHEMA_VERSION
from tasks.plan.control import control_cell, control_row, control_summary
from tasks.regress.annotations import apply_exclusions, list_exclusions
from tasks.regress.detect import (
    ALPHA_IMPROVEMENT,
    ALPHA_NIGHT,
    ALPHA_SUSPECT,
    BASELINE_MAX_NIGHTS,
    MIN_HISTORY,
    PERSIST_NIGHTS,
    REGRESSED_METRICS,
    SEGMENT_NIGHTS,
    detect_parity_regressions,
    detect_regressions,
    verdict_pairs,
)
from tasks.store.history import list_manifests, read_parity_history, read_regression_records, read_runs
from tasks.store.s3 import S3Store

HISTORY_MAX_RUNS = 120  # the newest runs before tonight that are read (baselines use at most 14 nights a cell)


def method_summary(alpha: float) -> dict:
    return {"alpha_night": alpha, "alpha_improvement": ALPHA_IMPROVEMENT, "min_history": MIN_HISTORY,
            "segment_nights": SEGMENT_NIGHTS,
            "baseline_max_nights": BASELINE_MAX_NIGHTS, "persist_nights": PERSIST_NIGHTS,
            "min_effect_pct": {m: 100 * METRICS[m].min_effect for m in REGRESSED_METRICS},
            "min_abs_change": {m: METRICS[m].min_abs_change for m in REGRESSED_METRICS if METRICS[m].min_abs_change},
            "describe": "per (cell, metric): t-test of the newest 1-3 nights against the baseline on the log "
                        "scale, noise pooled over the server's cells on this host with a per-metric prior and "
                        "each row's within-run spread; Holm over every test of the night; then re-measured"}


def judge_run(store: S3Store, run: dict, rows: list[dict], parity_now: list[dict], config) -> dict:
    """regressions.json of a run (before confirmation): one record per (ok cell, metric) and per artifact."""
    manifests = [m for m in list_manifests(store, before=run["logical_date"]) if m["run_id"] != run["run_id"]]
    manifests = manifests[-HISTORY_MAX_RUNS:]
    history = read_runs(store, manifests=manifests)
    history_rows = history.astype(object).where(history.notna(), None).to_dict("records")
    exclusions = list_exclusions(store)
    history_rows, applied = apply_exclusions(history_rows, exclusions)
    earlier = read_regression_records(store, manifests)
    alpha = ALPHA_SUSPECT if config.confirm_regressions else ALPHA_NIGHT
    records = detect_regressions(rows, history_rows, regressed=verdict_pairs(earlier, "regression"),
                                 improved=verdict_pairs(earlier, "improvement"), alpha=alpha)
    whole_runs = {e["run_id"] for e in exclusions if e["cells"] is None}
    parity_history = [p for p in read_parity_history(store, manifests=manifests) if p["run_id"] not in whole_runs]
    records += detect_parity_regressions(parity_now, parity_history, run["host"])
    control = control_cell(config)
    return {
        "schema_version": SCHEMA_VERSION, "history_runs": len(manifests),
        "history_before": run["logical_date"], "exclusions": applied, "method": method_summary(alpha),
        "control": control_summary(config.control_cell, control, control_row(rows, control), records),
        **count_verdicts(records), "records": records,
    }


def count_verdicts(records: list[dict]) -> dict:
    return {"regressions": sum(r["verdict"] == "regression" for r in records),
            "unconfirmed": sum(r["verdict"] == "unconfirmed" for r in records),
            "improvements": sum(r["verdict"] == "improvement" for r in records)}
