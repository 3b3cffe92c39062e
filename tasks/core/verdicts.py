"""The regression check's verdicts, named once: what each reader (the summary, the report, the digest, the store's
run list, the references) counts as a regression or an improvement (tasks/regress/size.py decides them)."""

from __future__ import annotations

# a change the duet found whose size alone lies beyond the minimum effect, or whose size straddles it ("size
# uncertain"): both are regressions a team must look at; the second says its interval
REGRESSED = ("regression", "regression_uncertain")
IMPROVED = ("improvement", "improvement_uncertain")


def is_regression(verdict: object) -> bool:
    return verdict in REGRESSED


def is_improvement(verdict: object) -> bool:
    return verdict in IMPROVED
