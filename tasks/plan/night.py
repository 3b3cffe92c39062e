"""The night's budget: what every stage of a run is planned to cost, what fits in Param `night_budget_s` in the order
of Param `night_order`, and the clock the later steps read (docs/design.md#the-nights-budget).

The plan's `night` record (`Plan.night`, plan.json and the plan task's XCom; empty without a budget):

    budget_s            Param night_budget_s
    started_at_s        wall-clock time (epoch seconds) the plan step started the run (`start_run`; absent in a dry
                        `tasks.cli plan`)
    measure_end_s       seconds after the start by which the measuring stage is planned to end
    regress_end_s       seconds after the start by which the regression work (duets, sizes, attribution) must end
    reserve_s           the seconds planned for the regression work of the changed cells
    answer_cells        the cell ids the answers rest on (class `answers`), measured first and judged first
    changed_cells       the cell ids whose inputs differ from their reference night's, as the plan step sees them
    classes             cell id -> its class (one of NIGHT_CLASSES)
    deferred            the cells left for a later night, each with why and when it was last measured
    coverage            rolling coverage: K (every cell measured at least once every K nights), overdue cells
    stages              stage -> {"planned_s": ...}, filled with "actual_s" as the run goes

The later steps read the clock through `measure_deadline`, `regress_deadline` and `answer_cells`, never the record's
keys directly.
"""

from __future__ import annotations


def _deadline(night: dict, key: str) -> float | None:
    if not night or night.get("started_at_s") is None or night.get(key) is None:
        return None
    return float(night["started_at_s"]) + float(night[key])


def measure_deadline(night: dict) -> float | None:
    """The wall-clock time (epoch seconds) after which no further load point starts; None: no budget."""
    return _deadline(night, "measure_end_s")


def regress_deadline(night: dict) -> float | None:
    """The wall-clock time (epoch seconds) by which the night's regression work must end; None: no budget (the
    Params size_budget_s and duet_max_pairs alone bound it)."""
    return _deadline(night, "regress_end_s")


def answer_cells(night: dict) -> frozenset[str]:
    """The cell ids the night's answers rest on (measured and judged first); empty without a budget."""
    return frozenset((night or {}).get("answer_cells") or ())
