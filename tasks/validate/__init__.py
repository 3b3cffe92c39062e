"""Judging what was measured: when a load point may say `ok`, and the run's results against their expectations.

    outcome.py       the ok rules of a load point, applied once the server's health after it is known
    expectations.py  the results and parity records validated with Great Expectations
    overload.py      what a stack did under overload: holds, sheds, queues or fails
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"judge_point": "outcome", "ServerHealth": "outcome", "validate_run": "expectations"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
