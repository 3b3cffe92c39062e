"""The regression check's verdicts, named once: what each reader (the summary, the report, the digest, the store's
run list, the references) counts as a regression or an improvement (tasks/regress/size_verdict.py decides them)."""

from __future__ import annotations

# a change the duet found whose size alone lies beyond the minimum effect, or whose size straddles it ("size
# uncertain"): both are regressions a team must look at; the second says its interval
REGRESSED = ("regression", "regression_uncertain")
IMPROVED = ("improvement", "improvement_uncertain")
# not settled: the duet left it undecided and the size alone did not decide it either, or the duet decided no change
# and the size alone lies beyond the minimum effect; counted apart from no_change, nobody's reference, judged again
NOT_SETTLED = ("undecided", "disputed")


def is_regression(verdict: object) -> bool:
    return verdict in REGRESSED


def is_improvement(verdict: object) -> bool:
    return verdict in IMPROVED


def is_not_settled(verdict: object) -> bool:
    return verdict in NOT_SETTLED


def duet_figures(record: dict) -> tuple[float | None, list | None]:
    """A duet record's ratio and its interval (the detector's), in both shapes a store may hold: `duet_ratio` since
    sizes are measured alone, `ratio` in records written before."""
    return record.get("duet_ratio", record.get("ratio")), record.get("duet_ratio_ci", record.get("ratio_ci"))


def size_alone(record: dict) -> tuple[float, list] | None:
    """(change_pct, change_ci) of a duet record whose size was measured alone; None where it was not (records
    written before sizes existed carry the duet's change as `change_pct`, not a size alone)."""
    if "duet_ratio" in record and record.get("change_ci") and record.get("change_pct") is not None:
        return record["change_pct"], record["change_ci"]
    return None
