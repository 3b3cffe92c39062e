"""Side-by-side judging without servers: the duet's paired test and its thresholds, a cell's inputs and what changed
between two nights, each cell's reference night, and a reference that stays runnable when this host's cache
lost it (its runtime folder and venv rebuilt from the store)."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from tasks.measure.inputs import input_changes, inputs_sha, stack_changed
from tasks.regress.duet import DuetThresholds, aa_noise, decided, duet_verdict, judge_pairs, log_ratios
from tasks.regress.references import find_references


def pairs_of(ratio: float, jitter: float, n: int, base: float = 1000.0) -> list[dict]:
    """n pairs whose candidate/reference throughput ratio is `ratio` times a small alternating jitter (and CPU
    per request and latency the inverse: a slower candidate is slower in every metric)."""
    out = []
    for i in range(n):
        r = ratio * (1 + jitter * (-1) ** i)
        ref = {"throughput_rps": base, "server_cpu_us_per_request": 500.0, "latency_ms_p50": 2.0,
               "latency_ms_p99": 5.0}
        cand = {"throughput_rps": base * r, "server_cpu_us_per_request": 500.0 / r, "latency_ms_p50": 2.0 / r,
                "latency_ms_p99": 5.0 / r}
        out.append({"load": 0, "index": i, "first": "reference", "sides": {"reference": ref, "candidate": cand}})
    return out


THRESHOLDS = DuetThresholds.for_stack("custom", "onnx")  # pass-through 0.5: a 5 % effect is 2.5 % in duet units


def by_metric(judged: list[dict]) -> dict[str, dict]:
    return {j["metric"]: j for j in judged}


def test_a_step_beyond_the_minimum_effect_and_the_noise_is_a_regression_in_every_metric():
    judged = by_metric(judge_pairs(pairs_of(0.90, 0.005, 4), THRESHOLDS))
    assert all(j["verdict"] == "regression" for j in judged.values()), judged
    assert judged["throughput_rps"]["ratio"] == pytest.approx(0.90, rel=0.01)
    assert judged["throughput_rps"]["ratio_ci"][0] < 0.90 < judged["throughput_rps"]["ratio_ci"][1]
    assert judged["server_cpu_us_per_request"]["change_pct"] == pytest.approx(100 * (1 / 0.9 - 1), rel=0.02)
    assert duet_verdict(list(judged.values())) == "regression"
    assert decided(pairs_of(0.90, 0.005, 4), THRESHOLDS)  # clear after four pairs: no more pairs measured
    assert not decided(pairs_of(0.90, 0.005, 3), THRESHOLDS)  # p99's noise floor (5 %) wants a fourth


def test_an_equal_pair_is_no_change_and_a_small_change_is_no_change_however_tight():
    assert {j["verdict"] for j in judge_pairs(pairs_of(1.0, 0.01, 6), THRESHOLDS)} == {"no_change"}
    small = by_metric(judge_pairs(pairs_of(0.985, 0.001, 6), THRESHOLDS))  # 1.5 %: significant, below 2.5 %
    assert small["throughput_rps"]["p_value"] < 0.05 and small["throughput_rps"]["verdict"] == "no_change"
    assert all(j["verdict"] == "improvement" for j in judge_pairs(pairs_of(1.10, 0.005, 4), THRESHOLDS))


def test_noisy_pairs_stay_undecided_and_the_noise_floor_widens_the_test():
    noisy = pairs_of(0.97, 0.06, 3)  # a 3 % step in pairs that swing 6 % either way
    assert not decided(noisy, THRESHOLDS)  # measure more pairs
    assert by_metric(judge_pairs(noisy, THRESHOLDS))["throughput_rps"]["verdict"] == "no_change"
    tight = pairs_of(0.95, 0.0005, 4)
    assert by_metric(judge_pairs(tight, THRESHOLDS))["throughput_rps"]["verdict"] == "regression"
    floored = DuetThresholds.for_stack("custom", "onnx", aa_noise={"throughput_rps": 0.08})  # tonight's A/A: 8 %
    assert by_metric(judge_pairs(tight, floored))["throughput_rps"]["verdict"] == "no_change"
    assert floored.noise_floor["throughput_rps"] == 0.08 and floored.source["aa_noise"] == {"throughput_rps": 0.08}


def test_a_pair_whose_sides_saw_different_host_states_is_set_aside():
    from tasks.regress.duets import trusted_pairs

    pairs = pairs_of(0.90, 0.005, 5)
    for pair in pairs:
        for side in pair["sides"].values():
            side["host"] = {"neighbour_cpu_pct": 40.0, "server_cpus_neighbour_pct": 2.0}  # busy, for both: kept
    pairs[2]["sides"]["candidate"]["host"] = {"neighbour_cpu_pct": 40.0, "server_cpus_neighbour_pct": 30.0}
    trusted, flags = trusted_pairs(pairs)
    assert [p["index"] for p in trusted] == [0, 1, 3, 4]
    assert len(flags) == 1 and flags[0].startswith("pair 2:") and "servers' CPUs" in flags[0]


def test_the_aa_noise_is_the_spread_of_a_pairs_log_ratio():
    pairs = pairs_of(1.0, 0.02, 6)
    noise = aa_noise(pairs)
    expected = math.log(1.02) - math.log(0.98)  # alternating +-2 %: a spread of about 2 %
    assert noise["throughput_rps"] == pytest.approx(abs(expected) / 2 * math.sqrt(6 / 5), rel=0.05)
    assert len(log_ratios(pairs, "throughput_rps")) == 6


def _inputs(**change) -> dict:
    base = {"schema": 1, "model": {"sha256": "9f2c" * 16, "artifact": {"model": "resnet50"}, "spec": {}},
            "runtime": {"name": "custom", "launcher": "process", "files_sha256": "1" * 64,
                        "packages": {"onnxruntime": "1.20.1", "numpy": "2.4.6"}},
            "server": {"version": "custom 1"}, "serving": {"instances": 1, "protocol": "kserve_v2_rest"},
            "loadgen": {"version": "0.1.0", "sha256": "2" * 64}}
    for path, value in change.items():
        node = base
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return base


def test_the_fingerprint_diff_names_what_changed():
    ref = _inputs()
    assert input_changes(ref, _inputs()) == [] and not stack_changed(ref, _inputs())
    bumped = _inputs(runtime__packages={"onnxruntime": "1.21.0", "numpy": "2.4.6"})
    assert input_changes(ref, bumped) == ["custom: onnxruntime 1.20.1 → 1.21.0"] and stack_changed(ref, bumped)
    model = _inputs(model__sha256="41ab" * 16)
    assert input_changes(ref, model) == ["resnet50: model sha256 9f2c9f2c… → 41ab41ab…"]
    assert input_changes(ref, _inputs(serving__instances=2)) == ["serving instances 1 → 2"]
    loadgen = _inputs(loadgen__sha256="3" * 64)  # the generator alone: reported, not the stack's change
    assert input_changes(ref, loadgen) == ["load generator changed"] and not stack_changed(ref, loadgen)
    moved = _inputs()
    moved["model"]["artifact"] = {"model": "resnet50", "path": "/another/host/cache/model.onnx"}
    assert inputs_sha(moved) == inputs_sha(ref)  # where a file lies is not what it is


def _row(run_id: str, date: str, inputs: dict, **extra) -> dict:
    return {"model": "resnet50", "format": "onnx", "server": "custom", "launcher": "process", "device": "cpu",
            "batch_size": 1, "mode": "concurrency", "load": 2.0, "config_id": "default", "protocol": "kserve_v2_rest",
            "cpu_model": "EPYC", "cpu_count": 2, "gpu_name": None, "status": "ok", "run_id": run_id,
            "logical_date": date, "inputs": json.dumps(inputs), "inputs_sha": inputs_sha(inputs), **extra}


def test_each_cell_is_compared_with_its_newest_accepted_night():
    old, new = _inputs(), _inputs(model__sha256="41ab" * 16)
    history = [_row("n1", "2026-01-01", old), _row("n2", "2026-01-02", old), _row("n3", "2026-01-03", new)]
    judged_n3 = {"n3": [{**{k: history[2][k] for k in ("model", "format", "server", "launcher", "device",
                                                        "batch_size", "mode", "load", "config_id", "protocol")},
                         "host": "EPYC|2|None", "verdict": "regression"}]}
    (ref,) = find_references([_row("tonight", "2026-01-04", new)], history, judged_n3)
    assert ref.state == "changed" and ref.reference["run_id"] == "n2"  # n3 was a regression: not accepted
    (ref,) = find_references([_row("tonight", "2026-01-04", new)], history, {})
    assert ref.state == "no_change" and ref.reference["run_id"] == "n3"
    (ref,) = find_references([_row("tonight", "2026-01-04", new, cpu_model="Xeon")], history, {})
    assert ref.state == "no_history"  # another host is never a reference
    legacy = [{**history[0], "inputs": None, "inputs_sha": None}]
    (ref,) = find_references([_row("tonight", "2026-01-04", new)], legacy, {})
    assert ref.state == "no_inputs"


@pytest.mark.integration
def test_a_reference_is_rebuilt_from_the_store_after_its_cache_entry_is_removed(embedded_s3, bucket, tmp_path,
                                                                                 monkeypatch):
    """The runtime folder a reference served with is kept in the store; on a host whose cache lost it (or never had
    it), the folder comes back from the store, checked by its hash, and its venv is built again from it with
    the same packages the reference recorded."""
    from tasks.runtimes.venvs import ensure_runtime, files_sha256, runtime_packages
    from tasks.store.runtimes import fetch_runtime, publish_runtime, snapshot_dir
    from tasks.store.s3 import S3Store

    monkeypatch.setenv("SERVING_EVAL_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "tinyrt"
    folder.mkdir()
    (folder / "requirements.txt").write_text("six==1.17.0\n")
    (folder / "app.py").write_text("print('the reference night's entry script')\n")
    sha = files_sha256(folder)
    store = S3Store(bucket, "eval", embedded_s3.connection("serving_eval_s3"))
    assert publish_runtime(store, "tinyrt", folder, sha) and not publish_runtime(store, "tinyrt", folder, sha)
    recorded = runtime_packages(ensure_runtime("tinyrt", requirements=fetch_runtime(store, "tinyrt", sha)
                                               / "requirements.txt", log=lambda _: None))
    shutil.rmtree(tmp_path / "cache")  # the cache lost the snapshot and the venv
    restored = fetch_runtime(store, "tinyrt", sha)
    assert restored == snapshot_dir("tinyrt", sha) and files_sha256(restored) == sha
    assert (restored / "app.py").read_text() == (folder / "app.py").read_text()
    env = ensure_runtime("tinyrt", requirements=restored / "requirements.txt", log=lambda _: None)
    assert env.built_now and runtime_packages(env) == recorded and recorded["six"] == "1.17.0"
    with pytest.raises(Exception, match="cannot be rebuilt"):
        fetch_runtime(store, "tinyrt", "0" * 64)
