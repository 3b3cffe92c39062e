"""`python -m tasks.cli plan` (tasks/cli/runs.py): the cells of a suite, a bad field named; nothing run."""

from __future__ import annotations

import json

from tasks.cli.main import main


def test_plan_lists_the_cells_of_a_suite_and_names_a_bad_field(tmp_path, monkeypatch, capsys):
    import tasks.plan.suites

    (tmp_path / "tiny.yaml").write_text("models: [mlp]\nformats: [onnx]\nservers: [custom, triton]\n"
                                        "concurrencies: [1, 8]\n")
    (tmp_path / "broken.yaml").write_text("models: [mlp]\nconcurrencies: [0]\n")
    monkeypatch.setattr(tasks.plan.suites, "SUITES_DIR", tmp_path)
    assert main(["plan", "--suite", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "plan of suite tiny: 1 conversions, 2 server sessions, 4 cells (nothing run)" in out
    assert "mlp.onnx.triton.process.cpu.b1.concurrency8" in out
    assert main(["plan", "--suite", "tiny", "--conf", '{"concurrencies": [2]}', "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["suite"] == "tiny" and [c["load"] for s in plan["sessions"] for c in s["cells"]] == [2.0, 2.0]
    assert main(["plan", "--suite", "broken"]) == 2
    assert "concurrencies=0" in capsys.readouterr().err
    assert main(["plan", "--suite", "missing"]) == 2
    assert "suite='missing': must be one of ['broken', 'tiny']" in capsys.readouterr().err
    assert main(["plan", "--conf", '{"concurency": [1]}']) == 2
    assert "concurency=[1]: is not a Param" in capsys.readouterr().err
    assert main(["plan", "--conf", "{not json"]) == 2
