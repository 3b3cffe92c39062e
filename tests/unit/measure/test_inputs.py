"""A cell's inputs fingerprint (tasks/measure/inputs.py): what changed between two nights, named."""

from __future__ import annotations

from tasks.measure.inputs import input_changes, inputs_sha, stack_changed


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


def test_the_switch_of_builder_is_named_and_alone_is_not_a_change_of_the_stack():
    """pip built the venvs before the switch (a record names no builder), uv after: the change is named; with the
    same packages (pip left out of them) the stack's identity is the same."""
    ref = _inputs()
    uv = _inputs(runtime__builder="uv 0.13.10")
    assert input_changes(ref, uv) == ["custom: venv built by pip → uv 0.13.10"] and not stack_changed(ref, uv)
    assert input_changes(uv, _inputs(runtime__builder="uv 0.14.0")) == []  # another uv release: the same builder
    seeded = _inputs(runtime__packages={"onnxruntime": "1.20.1", "numpy": "2.4.6", "pip": "26.3"})
    assert stack_changed(seeded, uv)  # a record of before the switch listed pip: its set differs


def test_package_names_compare_as_pep_503_spells_them():
    """pip's list kept dots ("zope.event"), the metadata reader writes dashes: one package, no change named."""
    dotted = _inputs(runtime__packages={"onnxruntime": "1.20.1", "numpy": "2.4.6", "zope.event": "6.2"})
    dashed = _inputs(runtime__packages={"onnxruntime": "1.20.1", "numpy": "2.4.6", "zope-event": "6.2"})
    assert input_changes(dotted, dashed) == []
