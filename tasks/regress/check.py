"""The regression check of one run: did a stack get slower, judged side by side, and did the host move, judged on
the control cell's history.

Per ok cell tonight (tasks/regress/references.py): its reference is its newest earlier accepted night on the same
comparison key and host. Nothing the stack depends on changed since: `no_change`, recorded once for the cell (a
stack cannot regress without a change; only the host can). An input changed: one `pending` record per duet metric,
settled by the night's duets (tasks/regress/night_duets.py) on the host that measured the cell. First night: no_history.

The history comparison stays for what a duet cannot see, the environment (kernel, host, driver, noisy neighbours):
the control cell's figures against its own baseline nights (tasks/regress/history_check.py, Holm at ALPHA_NIGHT), each
record of `kind` `environment` with the verdict `environment` when the control moved beyond its noise, never a
stack's regression. Parity (deterministic) is compared with history: its largest earlier error on this host.

History hygiene: only runs strictly before the run's logical date (so a backfill never sees later nights), at most
HISTORY_MAX_RUNS of them, less every run or cell excluded by an annotation (`tasks.regress.annotations`); a night
judged a regression for a cell is not that cell's reference.
"""

from __future__ import annotations

from tasks.core.metadata import host_fingerprint
from tasks.core.metrics import METRICS
from tasks.core.results import CELL_KEY, SCHEMA_VERSION, cell_key, row_protocol
from tasks.plan.cells import Plan
from tasks.plan.control import control_cell, control_row, control_summary, is_control_match
from tasks.regress.annotations import apply_exclusions, list_acceptances, list_exclusions
from tasks.regress.carry import carry_over
from tasks.regress.duet_verdict import ALPHA_DUET, DUET_METRICS, DUET_THRESHOLD, NOISE_FLOOR
from tasks.regress.history_check import (
    ALPHA_NIGHT,
    BASELINE_MAX_NIGHTS,
    MIN_HISTORY,
    REGRESSED_METRICS,
    SEGMENT_NIGHTS,
    detect_parity_regressions,
    detect_regressions,
    metric_value,
    verdict_pairs,
)
from tasks.regress.looks import LAST_LOOK_SHARE, SIZE_LOOKS
from tasks.regress.missing import MISSING, missing_records, night_of, previous_night
from tasks.regress.night_duets import count_verdicts, plan_aa, plan_duets
from tasks.regress.order import work_order
from tasks.regress.references import Reference, find_references
from tasks.regress.size_verdict import ALPHA_SIZE, SCOPE, SIZE_CONFIDENCE_PCT, SIZE_METRICS
from tasks.store.history import list_manifests, read_parity_history, read_regressions, read_runs
from tasks.store.s3 import S3Store

HISTORY_MAX_RUNS = 120  # the newest runs before tonight that are read (a reference is the newest accepted night)
KINDS = ("inputs", "duet", "environment", "parity", "missing")


def method_summary() -> dict:
    return {"describe": "per ok cell: its inputs against its reference night's (the newest earlier accepted night); "
                        "changed cells measured beside their reference's inputs (a duet, the detector: two servers "
                        "on the same cores at once, a paired t-test on the pairs' ratios against the duet's own "
                        "threshold in duet units, Bonferroni over the night); a change the duet finds is sized by "
                        "interleaved solo rounds (each side alone, in a random order a round: the size "
                        f"{SCOPE}), and where several inputs changed, each part is measured alone beside the "
                        "reference (hybrid duets); the control cell's history for the environment",
            "duet_metrics": list(DUET_METRICS), "alpha_duet": ALPHA_DUET, "alpha_environment": ALPHA_NIGHT,
            "duet_threshold_pct": {m: 100 * v for m, v in DUET_THRESHOLD.items()},
            "size_metrics": list(SIZE_METRICS), "size_confidence_pct": SIZE_CONFIDENCE_PCT, "size_scope": SCOPE,
            "looks": {"alpha_size": ALPHA_SIZE, "size_looks": list(SIZE_LOOKS), "last_look_share": LAST_LOOK_SHARE,
                      "describe": "sizes: looks at the counts of size_looks up to the share of size_rounds, then "
                                  "size_rounds, each look's intervals at 1 - alpha_size / L; duets: looks at "
                                  "duet_min_pairs and its doublings up to the share of duet_max_pairs, then "
                                  "duet_max_pairs, each look's tests at alpha_duet / (tests * L); a verdict is the "
                                  "one of the look where its pairs or rounds stopped"},
            "noise_floor_pct": {k: 100 * v for k, v in NOISE_FLOOR.items()},
            "min_effect_pct": {m: 100 * METRICS[m].min_effect for m in DUET_METRICS},
            "environment": {"min_history": MIN_HISTORY, "segment_nights": SEGMENT_NIGHTS,
                            "baseline_max_nights": BASELINE_MAX_NIGHTS,
                            "metrics": [m for m in REGRESSED_METRICS]}}


def _base(row: dict, kind: str, metric: str) -> dict:
    meta = METRICS.get(metric)
    return {**dict(zip(CELL_KEY, cell_key(row), strict=True)), "protocol": row_protocol(row),
            "host": host_fingerprint(row), "run_id": row.get("run_id"), "kind": kind, "metric": metric,
            "unit": meta.unit if meta else "", "better": meta.better if meta else "",
            "current": metric_value(row, metric) if meta else None}


def stack_records(references: list[Reference]) -> list[dict]:
    """The stack's records of tonight: one per unchanged (or new) cell, one pending record per duet metric of a
    changed cell."""
    records = []
    for ref in references:
        summary = ref.summary()
        if ref.state == "changed":
            for metric in DUET_METRICS:
                records.append({**_base(ref.row, "duet", metric), "verdict": "pending", **summary,
                                "reason": "inputs changed: " + "; ".join(ref.changes)})
            continue
        record = {**_base(ref.row, "inputs", "inputs"), **summary}
        if ref.state == "no_history":
            record.update(verdict="no_history", reason="the cell's first night (no earlier accepted night)")
        elif ref.state == "no_inputs":
            record.update(verdict="no_history", reason=f"the reference night {summary['reference_run_id']} was "
                                                       "published before cells' inputs were recorded (schema 1.5)")
        else:
            note = f" ({'; '.join(ref.changes)}: reported, not judged)" if ref.changes else ""
            record.update(verdict="no_change", reason=f"nothing the stack depends on changed since "
                                                      f"{summary['reference_run_id']}{note}")
        records.append(record)
    return records


def environment_records(rows: list[dict], history_rows: list[dict], earlier: dict, control: dict | None) -> list[dict]:
    """The control cell's figures against its history: how the host moved (never a stack's verdict)."""
    if control is None:
        return []
    mine = [r for r in rows if is_control_match(r, control)]
    past = [r for r in history_rows if is_control_match(r, control)]
    records = detect_regressions(mine, past, regressed=verdict_pairs(earlier, "environment"),
                                 improved=verdict_pairs(earlier, "improvement"), alpha=ALPHA_NIGHT)
    for record in records:
        moved = record["verdict"] in ("regression", "improvement")
        record.update(kind="environment", verdict="environment" if moved else record["verdict"],
                      direction=record["verdict"] if moved else None, confirmation=None)
    return records


def judge_run(store: S3Store, run: dict, rows: list[dict], parity_now: list[dict], plan: Plan) -> dict:
    """regressions.json of a run before its duets: one record per unchanged cell, pending records of the changed
    ones, the environment's records, parity's; the night's duet groups and A/A duet planned."""
    config = plan.config
    manifests = [m for m in list_manifests(store, before=run["logical_date"]) if m["run_id"] != run["run_id"]]
    manifests = manifests[-HISTORY_MAX_RUNS:]
    history = read_runs(store, manifests=manifests)
    history_rows = history.astype(object).where(history.notna(), None).to_dict("records")
    exclusions = list_exclusions(store)
    history_rows, applied = apply_exclusions(history_rows, exclusions)
    documents = read_regressions(store, manifests)
    earlier = {run_id: doc.get("records", []) for run_id, doc in documents.items()}
    control = control_cell(config)
    references = find_references([r for r in rows if r.get("role") != "control"], history_rows, earlier,
                                 list_acceptances(store))
    records = stack_records(references)
    records += environment_records(rows, history_rows, earlier, control)
    whole_runs = {e["run_id"] for e in exclusions if e["cells"] is None}
    parity_history = [p for p in read_parity_history(store, manifests=manifests) if p["run_id"] not in whole_runs]
    for record in detect_parity_regressions(parity_now, parity_history, run["host"]):
        records.append({**record, "kind": "parity"})
    records += missing_cells(store, manifests, run, rows, plan)
    duets = plan_duets(references, plan)
    carry_over(duets, documents)
    return {
        "schema_version": SCHEMA_VERSION, "history_runs": len(manifests), "history_before": run["logical_date"],
        "exclusions": applied, "method": method_summary(),
        "control": control_summary(config.control_cell, control, control_row(rows, control), records),
        "aa": plan_aa(rows, plan), "duets": duets, "order": work_order(duets, rows, plan),
        **count_verdicts(records), "missing": sum(r.get("verdict") == MISSING for r in records), "records": records,
    }


def missing_cells(store: S3Store, manifests: list[dict], run: dict, rows: list[dict], plan: Plan) -> list[dict]:
    """The cells `ok` on the previous night of the suite on this host and gone tonight (tasks/regress/missing.py)."""
    config = plan.config.to_dict()
    previous = previous_night(store, manifests, config.get("suite"), run["host"])
    tonight = night_of({"run_id": run["run_id"], "logical_date": run["logical_date"]},
                       {"config": config, "sessions": [s.to_dict() for s in plan.sessions], "night": plan.night},
                       rows, [])
    return missing_records(tonight, previous)
