"""Load settings (tasks/loadgen/settings.py): each bad value refused naming field, value and rule."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.loadgen.settings import LoadSettings


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"mode": "concurrency", "load": 0}, "concurrency"),
    ({"mode": "rate", "load": 0}, "rate"),
    ({"duration_s": 2, "window_s": 3}, "window_s"),
    ({"workers": 0}, "workers"),
    ({"mode": "concurrency", "load": 2, "workers": 3}, "workers"),
    ({"stop_when_stable": True, "duration_s": 4, "window_s": 2}, "min_windows"),
    ({"arrival": "bursty"}, "arrival"),
])
def test_bad_settings_name_field_value_and_rule(kwargs, field):
    with pytest.raises(ConfigError) as info:
        LoadSettings(**kwargs)
    assert info.value.field == field and "must" in info.value.rule
