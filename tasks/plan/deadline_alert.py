"""The nightly DAG's deadline alert: how long after a run is queued the team hears that it runs long
(docs/notifications.md#the-nights-clock).

    deadline_s = alert_interval_s()     # read when the DAG is parsed: the scheduled suite's budget + 10 %

Airflow fixes a deadline alert's interval when it parses the DAG, so the interval is the scheduled suite's
`night_budget_s` (suites/nightly.yaml) and DEADLINE_MARGIN, not the budget a run is triggered with. A deployment
sets `SERVING_EVAL_NIGHT_DEADLINE_S` (seconds, on the DAG processor) to fire at another time instead, or `off` for
none. `airflow dags test` and `dag.test()` evaluate no deadline, and in Airflow 3.3.2 cannot finish a successful run
of a DAG that has one (their in-memory copy of the DAG holds the alerts encoded, where the run's last state update
looks them up by id): the demo and the whole-run tests parse the DAG with `off`. Nothing here reads a database or a
connection: the DAG file calls this at parse time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from tasks.core.errors import ConfigError
from tasks.plan.suites import SCHEDULED_SUITE, load_suite

DEADLINE_ENV = "SERVING_EVAL_NIGHT_DEADLINE_S"
DEADLINE_OFF = "off"  # no alert: how `airflow dags test` runs must parse the DAG (module docstring)
DEADLINE_MARGIN = 0.10  # a night may run 10 % past its budget (issue 45's acceptance): later than that is late


def alert_interval_s(environ: Mapping[str, str] | None = None, suite: str = SCHEDULED_SUITE) -> float | None:
    """Seconds after a run is queued at which it is late: `SERVING_EVAL_NIGHT_DEADLINE_S` where set, else the
    suite's `night_budget_s` plus DEADLINE_MARGIN (whole seconds, rounded up); None: the suite has no budget."""
    environ = os.environ if environ is None else environ
    text = environ.get(DEADLINE_ENV, "").strip()
    if text.lower() == DEADLINE_OFF:
        return None
    if text:
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            raise ConfigError(DEADLINE_ENV, text, "must be a number of seconds > 0, off (no alert), or unset (the "
                                                  "suite's night_budget_s plus 10 %)")
        return seconds
    budget = load_suite(suite).get("night_budget_s")
    return None if budget is None else float(math.ceil(round(float(budget) * (1 + DEADLINE_MARGIN), 6)))  # 3600: 3960
