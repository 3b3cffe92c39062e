"""The regression check's verdicts (tasks/core/verdicts.py): a regression whose size is uncertain is still one."""

from tasks.core.verdicts import is_improvement, is_regression


def test_a_size_uncertain_change_counts_with_its_direction():
    assert is_regression("regression") and is_regression("regression_uncertain")
    assert is_improvement("improvement") and is_improvement("improvement_uncertain")
    assert not any(is_regression(v) or is_improvement(v) for v in ("no_change", "unconfirmed", "environment", None))
