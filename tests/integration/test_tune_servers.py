"""The configuration search with real servers: a quick search on the MLP over two stacks finds a configuration
at least as good as the default by its own bookkeeping, publishes every configuration it tried, and a search
whose budget cannot fit one configuration is refused by the plan step."""

from __future__ import annotations

import json

import pytest

from tasks.core.errors import ConfigError
from tasks.pipeline import run_pipeline, start_run
from tasks.store.s3 import S3Store
from tests.dagrun import HOST_NOT_JUDGED, NO_CONTROL, read_json_object, read_run, results_frame

pytestmark = pytest.mark.integration


def _conf(bucket: str, **overrides) -> dict:
    return {"suite": "smoke", "models": ["mlp"], "formats": ["onnx"], "servers": ["custom", "triton"],
            "concurrencies": [4], "duration_s": 1.5, "warmup_s": 0.3, "window_s": 0.5, "tune": "quick",
            "tune_budget_s": 150, "p99_bound_ms": 250.0, "s3_bucket": bucket, "s3_prefix": "eval",
            "aws_conn_id": "serving_eval_s3", **HOST_NOT_JUDGED, **NO_CONTROL, **overrides}


def test_a_quick_search_over_two_stacks_keeps_the_best_and_publishes_every_configuration(embedded_s3, bucket):
    summary, _ = run_pipeline(_conf(bucket), run_id="tune-quick", logical_date="2026-11-30T02:00:00+00:00",
                              conn=embedded_s3.connection("serving_eval_s3"))
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    _, manifest = read_run(store)
    frame = results_frame(store, manifest)
    searches = {s["server"]: s for s in read_json_object(store, manifest, "tuning.json")["searches"]}
    assert set(searches) == {"custom", "triton"}
    for server, tuning in searches.items():
        trials = tuning["trials"]
        assert trials[0]["config_id"] == "default" and len(trials) >= 2, tuning["stop_reason"]
        mine = frame[frame["server"] == server]
        # every configuration tried is published as its own rows, with its knob values
        assert set(mine["config_id"]) == {t["config_id"] for t in trials if t["note"] != "not a valid configuration"}
        for trial in trials:
            rows = mine[mine["config_id"] == trial["config_id"]]
            assert json.loads(rows["config"].iloc[0]) == trial["config"]
        # the search's own bookkeeping: the best is at least as good as the default, and it is marked
        best = tuning["best"]
        assert best is not None and best["score_rps"] >= trials[0]["score_rps"]
        assert set(mine[mine["best_config"]]["config_id"]) == {best["config_id"]}
        assert tuning["used_s"] <= tuning["budget_s"] + max(t["elapsed_s"] for t in trials)
    assert manifest["status"] in ("complete", "partial") and summary["cells"] == len(frame)
    report = store.get(f"{manifest['prefix']}/report.html").decode()
    assert "default against tuned" in report and "Tuned ranking" in report
    assert "Engines against the stacks that serve them" not in report or "onnxruntime" in report


def test_a_search_whose_budget_cannot_fit_one_configuration_is_refused_before_work(embedded_s3, bucket):
    with pytest.raises(ConfigError) as refused:
        start_run(_conf(bucket, tune_budget_s=5), run_id="tune-refused", logical_date="2026-11-30",
                  conn=embedded_s3.connection("serving_eval_s3"))
    assert refused.value.field == "tune_budget_s" and "at least one configuration" in refused.value.rule
    assert S3Store(bucket, "", embedded_s3.connection("serving_eval_s3")).list_keys("") == []
