"""Serving knobs (tasks/serve/knobs.py): stable configuration ids, a knob the server does not declare refused."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.serve.knobs import DEFAULT_CONFIG_ID, apply_config, config_id, describe
from tests.unit.plan.test_tune import DEFAULTS, KNOBS


def test_config_ids_are_stable_and_default_is_named():
    assert config_id(DEFAULTS, DEFAULTS) == DEFAULT_CONFIG_ID
    a = config_id({"instances": 2, "dynamic_batching": False}, DEFAULTS)
    assert a == config_id({"dynamic_batching": False, "instances": 2}, DEFAULTS) and len(a) == 8
    assert a != config_id({"instances": 2, "dynamic_batching": True}, DEFAULTS)
    assert describe({"instances": 2, "dynamic_batching": False}, DEFAULTS) == "instances=2"


def test_a_knob_the_server_does_not_declare_is_refused():
    from tasks.serve.options import ServingOptions

    with pytest.raises(ConfigError, match="knob"):
        apply_config(ServingOptions(), {"workers_per_gpu": 2}, KNOBS)
    assert apply_config(ServingOptions(), {"instances": 2}, KNOBS).instances == 2
