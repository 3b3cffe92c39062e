"""Evaluation suites: YAML files of Params, resolved under the values given, checked by the same rules."""

from __future__ import annotations

import pytest

from tasks.core.errors import ConfigError
from tasks.plan.cells import make_plan
from tasks.plan.config import RunConfig, resolve_params
from tasks.plan.suites import SCHEDULED_SUITE, suite_names


@pytest.mark.parametrize("name", suite_names())
def test_every_suite_in_the_repository_is_valid_and_plans(name):
    config = RunConfig.from_params({"suite": name})
    assert config.suite == name
    assert make_plan(config).cells


def test_nightly_is_the_articles_comparison():
    config = RunConfig.from_params({"suite": SCHEDULED_SUITE})
    assert {"resnet50", "bert-base"} <= set(config.models)
    assert {"triton", "torchserve", "bentoml", "kserve", "custom"} <= set(config.servers)
    plan = make_plan(config)
    modes = {(s.server, c.mode) for s in plan.sessions for c in s.cells}
    for server in ("triton", "torchserve", "bentoml", "kserve", "custom"):
        assert {(server, "concurrency-sweep"), (server, "rate-search")} <= modes
    formats = {(s.model, s.format) for s in plan.sessions}
    assert {("resnet50", "onnx"), ("resnet50", "torchscript"), ("bert-base", "onnx"),
            ("bert-base", "torchscript")} <= formats


def test_given_values_override_the_suite_and_none_is_not_given():
    resolved = resolve_params({"suite": "smoke", "duration_s": 3.0, "models": None})
    assert resolved["duration_s"] == 3.0 and resolved["models"] == ["mlp"] and resolved["suite"] == "smoke"
    config = RunConfig.from_params({"suite": "nightly", "servers": ["custom"], "p99_bound_ms": None})
    assert config.servers == ("custom",) and config.p99_bound_ms == 1000.0 and config.mode == "both"
    assert RunConfig.from_params({}).suite is None  # no suite: the built-in defaults


def test_a_suite_with_an_unknown_field_is_refused_naming_the_file_and_field(tmp_path):
    (tmp_path / "typo.yaml").write_text("models: [mlp]\nduraton_s: 5\n")
    with pytest.raises(ConfigError) as refused:
        resolve_params({"suite": "typo"}, tmp_path)
    assert refused.value.field == "suite typo (typo.yaml): duraton_s" and "duration_s" in refused.value.rule
    with pytest.raises(ConfigError, match="suite"):
        RunConfig.from_params({"suite": "no-such-suite"})
    with pytest.raises(ConfigError, match="window_s"):  # a suite's values are checked by the same rules
        RunConfig.from_params({"suite": "smoke", "window_s": 30.0})


def test_an_unknown_param_is_refused_naming_it():
    with pytest.raises(ConfigError, match="concurency"):
        RunConfig.from_params({"concurency": [1]})
