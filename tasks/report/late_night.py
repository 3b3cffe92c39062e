"""A night past its deadline: what the nightly DAG's deadline alert says and to whom, from the DAG run Airflow hands
its callback (docs/notifications.md#the-nights-clock).

    late = late_night(dag_run, deadline_s, now)    # None: the run ended in time (nothing to say)
    late.config.notify, late.message               # the run's own notifiers, and the words

`dag_run` is the run as the callback gets it (`context["dag_run"]`, the API's DAG-run fields as JSON: `dag_run_id`,
`dag_id`, `queued_at`, `end_date`, `state`, `conf`). Its Params as triggered are the DAG's defaults under its conf:
every default is empty but `suite` (the scheduled suite, tests/unit/test_dag_integrity.py holds it), so Param
`notify` left empty resolves to the suite's value here as in the plan step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from tasks.plan.config import RunConfig
from tasks.plan.suites import SCHEDULED_SUITE
from tasks.report.message import Message, late_night_message, run_link


@dataclass(frozen=True)
class LateNight:
    config: RunConfig
    message: Message


def run_params(dag_run: dict) -> dict:
    """The run's Params as triggered: the DAG's defaults (all empty but the suite) under the run's conf."""
    return {"suite": SCHEDULED_SUITE, **(dag_run.get("conf") or {})}


def instant(value: str | datetime | None) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def late_night(dag_run: dict, deadline_s: float, now: datetime) -> LateNight | None:
    """The alert of a run past `deadline_s` after it was queued, to its own notifiers; None when it ended in time.
    A run whose Params no longer resolve raises the ConfigError naming the field."""
    queued_at = instant(dag_run["queued_at"])
    ended = instant(dag_run.get("end_date"))
    if ended is not None and ended <= queued_at + timedelta(seconds=deadline_s):
        return None  # Airflow drops such a deadline when the run ends; a late look at one sends nothing either
    config = RunConfig.from_params(run_params(dag_run))
    late = {"run_id": dag_run["dag_run_id"], "suite": config.suite, "state": dag_run.get("state"),
            "queued_at": queued_at.isoformat(), "running_s": ((ended or now) - queued_at).total_seconds(),
            "budget_s": config.night_budget_s, "deadline_s": deadline_s}
    return LateNight(config, late_night_message(late, run_link(config.ui_base_url, dag_run["dag_id"],
                                                               dag_run["dag_run_id"])))
