"""The nightly DAG's deadline alert's interval (tasks/plan/deadline_alert.py): the scheduled suite's budget plus the
margin, or the deployment's setting; a bad setting refused naming it."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.plan.deadline_alert import DEADLINE_ENV, alert_interval_s
from tasks.plan.suites import load_suite


def test_the_scheduled_suites_budget_plus_ten_percent_in_whole_seconds():
    assert load_suite("nightly")["night_budget_s"] == 3600
    assert alert_interval_s({}) == 3960.0  # not 3961: 3600 * 1.1 is 3960.0000000000005 in floating point


def test_a_suite_without_a_budget_has_no_alert():
    assert "night_budget_s" not in load_suite("smoke")
    assert alert_interval_s({}, suite="smoke") is None


def test_the_deployments_setting_wins():
    assert alert_interval_s({DEADLINE_ENV: " 2 "}) == 2.0
    assert alert_interval_s({DEADLINE_ENV: ""}) == 3960.0  # set but empty: unset
    assert alert_interval_s({DEADLINE_ENV: "off"}) is None  # how `airflow dags test` runs parse it


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_a_bad_setting_is_refused_naming_it(value):
    with pytest.raises(ConfigError, match=DEADLINE_ENV) as raised:
        alert_interval_s({DEADLINE_ENV: value})
    assert "seconds > 0" in raised.value.rule
