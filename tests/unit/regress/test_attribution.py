"""Taking a change apart (tasks/regress/attribution.py) without servers: the parts two inputs records differ in, the
hybrid runtime folders made of them, and the cause read off synthetic and recorded duets of each part: one part,
several, undecided parts named with their pairs, and "interaction" only where every part is ruled out or the parts
do not add up."""

from __future__ import annotations

import pytest

from tasks.plan.cells import Plan
from tasks.regress.attribution import (
    attribute,
    attribute_point,
    attributed_metrics,
    attribution_tests,
    cause_of,
    change_parts,
    hybrid_inputs,
    make_hybrid_folder,
    mixed_requirements,
    requirement_lines,
)
from tasks.regress.clock import WorkClock
from tasks.regress.duet_verdict import DuetThresholds, decided
from tasks.regress.sides import Night
from tests.recorded_duets import Replay, equal_pairs, planned, trial
from tests.unit.regress.test_duet_verdict import pairs_of

REFERENCE_REQUIREMENTS = "# the custom runtime\nonnxruntime==1.32.0\nfastapi==0.115.0  # the app\n"


def inputs(model_sha: str = "a" * 64, packages: dict | None = None, files: str = "f" * 64,
           serving: dict | None = None) -> dict:
    return {"model": {"sha256": model_sha, "artifact": {"model": "mlp"}, "spec": {"name": "mlp"}},
            "runtime": {"name": "custom", "launcher": "process", "files_sha256": files,
                        "packages": packages or {"onnxruntime": "1.32.0", "fastapi": "0.115.0"}},
            "server": {"version": "custom 1"}, "serving": serving or {"instances": 1}, "loadgen": {}}


def runtime(tmp_path, name: str, requirements: str, app: str = "print('app')\n"):
    folder = tmp_path / name / "custom"
    folder.mkdir(parents=True)
    (folder / "requirements.txt").write_text(requirements)
    (folder / "app.py").write_text(app)
    return folder


def test_a_model_and_an_added_package_are_two_parts_and_each_hybrid_takes_one(tmp_path):
    ref_folder = runtime(tmp_path, "ref", REFERENCE_REQUIREMENTS)
    cur_folder = runtime(tmp_path, "cur", REFERENCE_REQUIREMENTS + "se-inert @ file:///wheels/se_inert-1.0.whl\n")
    reference = inputs()
    candidate = inputs("b" * 64, {"onnxruntime": "1.32.0", "fastapi": "0.115.0", "se-inert": "1.0"}, "e" * 64)
    parts, notes = change_parts(reference, candidate, ref_folder, cur_folder)
    # the runtime changed in one line only: its hybrid is tonight's runtime whole (no mixed venv to build)
    assert [p.kind for p in parts] == ["model", "runtime"] and notes == []
    model, package = parts
    assert package.name == "custom: (none) → se-inert @ file:///wheels/se_inert-1.0.whl"
    assert any("se-inert (none) → 1.0" in c for c in package.changes), package.changes
    hybrid = hybrid_inputs(reference, candidate, model)
    assert hybrid["model"]["sha256"] == "b" * 64 and hybrid["runtime"] == reference["runtime"]
    hybrid = hybrid_inputs(reference, candidate, package)
    assert hybrid["model"] == reference["model"] and hybrid["runtime"] == candidate["runtime"]


def test_two_changed_lines_are_two_parts_each_hybrid_folder_with_one_of_them(tmp_path):
    ref_folder = runtime(tmp_path, "ref", REFERENCE_REQUIREMENTS)
    cur_text = REFERENCE_REQUIREMENTS.replace("1.32.0", "1.22.1") + "six==1.16.0\n"
    cur_folder = runtime(tmp_path, "cur", cur_text)
    candidate = inputs(packages={"onnxruntime": "1.22.1", "fastapi": "0.115.0", "six": "1.16.0"}, files="e" * 64)
    parts, _ = change_parts(inputs(), candidate, ref_folder, cur_folder)
    assert [(p.kind, p.package) for p in parts] == [("requirement", "onnxruntime"), ("requirement", "six")]
    folder = make_hybrid_folder(parts[1], ref_folder, cur_folder, tmp_path / "hybrid")
    assert requirement_lines((folder / "requirements.txt").read_text()) == {
        "onnxruntime": "onnxruntime==1.32.0", "fastapi": "fastapi==0.115.0", "six": "six==1.16.0"}
    hybrid = hybrid_inputs(inputs(), candidate, parts[1], folder)
    assert hybrid["runtime"]["folder"] == str(folder) and hybrid["runtime"]["packages"]["onnxruntime"] == "1.32.0"


def test_one_runtime_part_alone_is_the_runtime_whole_and_entry_scripts_are_a_part_of_their_own(tmp_path):
    ref_folder = runtime(tmp_path, "ref", REFERENCE_REQUIREMENTS)
    bumped = REFERENCE_REQUIREMENTS.replace("1.32.0", "1.22.1")
    cur_folder = runtime(tmp_path, "cur", bumped)
    candidate = inputs(packages={"onnxruntime": "1.22.1", "fastapi": "0.115.0", "numpy": "2.0"}, files="e" * 64)
    parts, _ = change_parts(inputs(), candidate, ref_folder, cur_folder)
    assert [p.kind for p in parts] == ["runtime"]  # nothing to take apart: the whole runtime is tonight's
    edited = runtime(tmp_path, "edited", bumped, app="print('faster app')\n")
    parts, notes = change_parts(inputs(), candidate, ref_folder, edited)
    assert [p.kind for p in parts] == ["requirement", "runtime_files"]
    assert parts[0].came_with == ("numpy",) and "numpy" in notes[0]  # came with the bump, not told apart
    folder = make_hybrid_folder(parts[1], ref_folder, edited, tmp_path / "files-only")
    assert (folder / "requirements.txt").read_text() == REFERENCE_REQUIREMENTS
    assert (folder / "app.py").read_text() == "print('faster app')\n"


def test_mixed_requirements_replace_add_and_remove_one_line():
    lines = requirement_lines(REFERENCE_REQUIREMENTS)
    assert lines == {"onnxruntime": "onnxruntime==1.32.0", "fastapi": "fastapi==0.115.0"}
    parts, _ = change_parts(inputs(), inputs(serving={"instances": 2}))
    assert [p.kind for p in parts] == ["serving"]

    class Line:
        kind, package = "requirement", "onnxruntime"

    Line.line = "onnxruntime==1.22.1"
    assert "onnxruntime==1.22.1" in mixed_requirements(REFERENCE_REQUIREMENTS, Line)
    Line.line = None
    assert "onnxruntime" not in mixed_requirements(REFERENCE_REQUIREMENTS, Line)
    Line.package, Line.line = "six", "six==1.16.0"
    assert mixed_requirements(REFERENCE_REQUIREMENTS, Line).endswith("six==1.16.0\n")


THRESHOLDS = DuetThresholds.detector()


@pytest.mark.parametrize(("model", "package", "cause"), [
    (0.70, 1.00, "model"),  # the slower model alone; the package has no effect
    (0.80, 0.85, "several: model, package"),  # both slow it down
    (1.00, 1.00, "interaction"),  # neither alone: only together
])
def test_the_cause_is_the_part_whose_own_duet_shows_the_change(model, package, cause):
    whole = pairs_of(model * package if cause != "interaction" else 0.7, 0.005, 5)
    judged = attribute(whole, {"model": pairs_of(model, 0.005, 5), "package": pairs_of(package, 0.005, 5)},
                       THRESHOLDS, tests=4)
    throughput = judged["metrics"]["throughput_rps"]
    assert throughput["cause"].startswith(cause), throughput
    if cause == "model":
        assert throughput["parts"]["package"]["effect"] == "no_effect"
        assert judged["metrics"]["server_cpu_us_per_request"]["parts"]["package"]["effect"] == "no_effect"
    assert throughput["additive"]["holds"] is (cause != "interaction")


def test_a_part_whose_hybrid_could_not_be_served_is_unconfirmed_with_the_reason():
    judged = attribute(pairs_of(0.8, 0.005, 5), {"model": pairs_of(1.0, 0.005, 5),
                                                   "custom: x": "pip could not resolve the mixed pins"},
                       THRESHOLDS, tests=4)
    found = judged["metrics"]["throughput_rps"]
    assert found["parts"]["custom: x"] == {"effect": "unconfirmed", "reason": "pip could not resolve the mixed pins"}
    assert found["cause"].startswith("unconfirmed: custom: x (pip could not")


def test_a_part_duet_that_stops_as_decided_is_judged_decided():
    """The parts' duets stop adding pairs on the count of tests their parts are judged at (`attribution_tests`):
    an inert part's duet that stops is `no_effect`, never `undecided`. On the night's own, laxer count such a duet
    (its pairs as noisy as the p99's floor, so every metric decides at about the same count) stops too early."""
    early = 0
    for n in range(3, 61):
        package = pairs_of(1.0, 0.06, n)
        judged = attribute(pairs_of(0.7, 0.005, 6), {"model": pairs_of(0.7, 0.005, n), "package": package},
                           THRESHOLDS, tests=4)
        effect = judged["metrics"]["server_cpu_us_per_request"]["parts"]["package"]["effect"]
        if decided(package, THRESHOLDS, attribution_tests(4, 2)):
            assert effect == "no_effect", (n, judged["metrics"]["server_cpu_us_per_request"]["parts"]["package"])
        early += decided(package, THRESHOLDS, 4) and effect == "undecided"
    assert early, "the night's own count never stopped early on these pairs: the test shows nothing"


def test_interaction_only_when_every_part_is_ruled_out_or_the_parts_do_not_add_up():
    ruled_out = {"model": {"effect": "no_effect"}, "package": {"effect": "no_effect"}}
    assert cause_of(ruled_out, [], {"gap_pct": 1.0, "holds": True}) == "interaction"
    some_undecided = {"model": {"effect": "undecided", "pairs": 3, "pairs_needed": 4},
                      "package": {"effect": "undecided", "pairs": 3, "pairs_needed": 40}}
    assert cause_of(some_undecided, [], {"gap_pct": 1.0, "holds": True}, budget_pairs=6) == \
        "undecided: model (3 pairs), package (3 pairs; ruling it out needs about 40)"
    assert cause_of(some_undecided, [], {"gap_pct": 30.0, "holds": False}) == \
        "interaction (the parts' effects miss the whole by +30.0 %)"  # the additivity test rejects
    beside = {"model": {"effect": "effect"}, "custom: se-inert": {"effect": "undecided", "pairs": 6}}
    assert cause_of(beside, ["model"], None) == "model (custom: se-inert undecided)"
    assert cause_of({"model": {"effect": "effect"}, "x": {"effect": "unconfirmed", "reason": "pip"}}, ["model"],
                    None) == "model (x unconfirmed)"


def test_a_night_of_three_pairs_names_the_undecided_parts_and_the_pairs_they_need():
    """The night that named a slower model beside an unrelated package "interaction" with 3 pairs each: on recorded
    pairs (the whole and the model part a 30 % step of the light MLP, the package part a changed-but-equal night)
    the model is the cause and the package is undecided, with the pairs that would rule it out."""
    whole = trial("custom/onnx/light", "30")["pairs"][:3]
    judged = attribute(whole, {"model": whole, "custom: (none) → se-inert": equal_pairs("custom/onnx/light")[:3]},
                       THRESHOLDS, tests=4, looks=2, metrics=("server_cpu_us_per_request",), budget_pairs=6)
    cpu = judged["metrics"]["server_cpu_us_per_request"]
    package = cpu["parts"]["custom: (none) → se-inert"]
    assert cpu["parts"]["model"]["effect"] == "effect" and package["effect"] == "undecided"
    assert package["pairs_needed"] > 6
    assert cpu["cause"] == (f"model (custom: (none) → se-inert undecided: ruling it out needs about "
                            f"{package['pairs_needed']} pairs)")
    assert list(judged["metrics"]) == ["server_cpu_us_per_request"]  # only the metrics asked for


def test_only_metrics_whose_whole_change_was_decided_are_attributed():
    records = [{"metric": "server_cpu_us_per_request", "duet_verdict": "regression", "verdict": "regression"},
               {"metric": "throughput_rps", "duet_verdict": "regression", "verdict": "regression_uncertain"},
               {"metric": "latency_ms_p50", "duet_verdict": "undecided", "verdict": "regression"},
               {"metric": "latency_ms_p99", "duet_verdict": "regression", "verdict": "no_change"}]
    assert attributed_metrics(records) == ("server_cpu_us_per_request", "throughput_rps")


def test_each_part_is_measured_at_the_point_look_by_look_and_the_record_names_the_cause():
    """A model and a serving option changed (two parts, no runtime folder needed): each hybrid's duet at the point
    replays recorded pairs; the model's (a 30 % step) decides at its first look, the serving option's (an equal
    night) runs to its last, undecided in CPU per request."""
    model_part, serving_part = ("model", "serving options")
    reference, candidate = inputs(), inputs("b" * 64, serving={"instances": 2})
    point = {"batch_size": 1, "mode": "concurrency", "load": 2.0, "protocol": None}
    group = {"duet_id": "d", "points": [point], "reference": {"run_id": "n1", "inputs": reference},
             "candidate": {"inputs": candidate}}
    step, equal = trial("triton/onnx/light", "30")["pairs"], equal_pairs("custom/onnx/light")
    replay = Replay(pairs={"d.part0.0": step, "d.part1.0": equal})
    run = planned([])
    night = Night(run, Plan.from_dict(run).config, None, THRESHOLDS, 4, measure=replay.measure, build=replay.build,
                  clock=WorkClock(None, replay.now))
    records = [{"metric": m, **point, "duet_verdict": "regression", "duet_ratio": 1.9, "verdict": "regression"}
               for m in ("server_cpu_us_per_request",)]
    state = attribute_point(records, group, 0, night, {}, step[:3])
    assert [name for name in state["parts"]] == [model_part, serving_part]
    assert state["parts"][model_part]["pairs"] == 3 and state["parts"][serving_part]["pairs"] == 6
    assert state["done"] and [d["point"] for d in group["attribution"]["duets"]] == [0, 0]
    cause = records[0]["cause"]
    assert cause.startswith("model (serving options undecided"), cause
    assert records[0]["attribution"]["parts"][serving_part]["effect"] == "undecided"
