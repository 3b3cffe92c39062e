"""A night past its deadline (tasks/report/late_night.py): the run's own Params resolved as the plan step resolves
them, the message's figures, nothing for a run that ended in time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks.core.errors import ConfigError
from tasks.report.late_night import late_night, run_params

NOW = datetime(2026, 3, 2, 3, 10, tzinfo=UTC)
RUN = {"dag_run_id": "scheduled__2026-03-02T02:00:00+00:00", "dag_id": "nightly_serving_eval",
       "queued_at": "2026-03-02T02:00:05+00:00", "end_date": None, "state": "running", "conf": {}}


def test_a_scheduled_run_takes_the_nightly_suites_values():
    assert run_params(RUN) == {"suite": "nightly"}
    late = late_night(RUN, 3960.0, NOW)
    assert late.config.suite == "nightly" and late.config.notify == () and late.config.night_budget_s == 3600
    text = late.message.text
    assert late.message.subject == f"serving-eval: night {RUN['dag_run_id']} running long (4,195 s (70 min) " \
                                   "since queued)"
    assert f"Run {RUN['dag_run_id']} (suite nightly) ran past its deadline: queued at 2026-03-02T02:00:05+00:00, " \
           "it is still running, 4,195 s (70 min) after it was queued" in text
    assert "its budget is 3,600 s (60 min), and the night's deadline is 3,960 s (66 min) after a run is queued" in text
    assert "Run: " not in text  # no ui_base_url: no link


def test_the_runs_own_params_pick_the_notifiers_budget_and_link():
    run = {**RUN, "dag_run_id": "manual__2026-03-02T01:00:00+00:00",
           "conf": {"suite": "smoke", "notify": ["team_mail"], "night_budget_s": 600, "ui_base_url": "http://ui:8080/"}}
    late = late_night(run, 3960.0, NOW)
    assert late.config.notify == ("team_mail",)
    assert "suite smoke" in late.message.text and "its budget is 600 s (10 min)" in late.message.text
    link = "http://ui:8080/dags/nightly_serving_eval/runs/manual__2026-03-02T01%3A00%3A00%2B00%3A00"
    assert late.message.text.endswith(f"Run: {link}\n") and f"Run: <a href='{link}'>" in late.message.html


def test_a_run_without_a_budget_says_so():
    late = late_night({**RUN, "conf": {"suite": "smoke"}}, 60.0, NOW)
    assert "it has no budget" in late.message.text


def test_a_run_that_ended_in_time_sends_nothing_one_that_ended_late_says_how_it_ended():
    assert late_night({**RUN, "end_date": "2026-03-02T03:05:00+00:00", "state": "success"}, 3960.0, NOW) is None
    late = late_night({**RUN, "end_date": "2026-03-02T03:07:00+00:00", "state": "failed"}, 3960.0, NOW)
    assert "it ended failed after its deadline, 4,015 s (67 min) after it was queued" in late.message.text


def test_params_that_no_longer_resolve_name_the_field():
    with pytest.raises(ConfigError, match="suite"):
        late_night({**RUN, "conf": {"suite": "gone"}}, 3960.0, NOW)
