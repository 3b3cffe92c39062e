"""Lines of config and code: a layout of known content counts exactly; a real server's generated layout counts its
config and its runtime's serving code once, leaving out what another deployment reads."""

from __future__ import annotations

import json
import zipfile

from tasks.serve.lines import count_serving_lines, significant_lines
from tasks.serve.servers import get_server

PYTHON = '''"""A module docstring,
over two lines."""

import os  # a comment after code counts as code


def f(x):
    """A function's docstring."""
    # a comment line
    text = """a string that is
    assigned is code"""

    return x + len(text)
'''  # code rows: import, def, text = (2 rows), return -> 5
PBTXT = 'name: "m"\n# a comment\n\nmax_batch_size: 8\n  # indented comment\ninput [ ]\n'  # 3
XML = '<?xml version="1.0"?>\n<!-- a comment\nover lines -->\n<a>\n  <b/> <!-- trailing -->\n<!-- x --></a>\n'  # 4
PROPERTIES = "a=1\n! bang comment\n# hash comment\nb=2\n"  # 2


def test_a_layout_of_known_content_counts_exactly(tmp_path):
    layout = tmp_path / "layout"
    (layout / "repo" / "m" / "1").mkdir(parents=True)
    (layout / "repo" / "m" / "1" / "model.py").write_text(PYTHON)
    (layout / "repo" / "m" / "config.pbtxt").write_text(PBTXT)
    (layout / "log4j2.xml").write_text(XML)
    (layout / "server.properties").write_text(PROPERTIES)
    (layout / "model.onnx").write_bytes(b"\x08\x01binary weights\n" * 10)  # not counted: a model file
    (layout / "other").mkdir()
    (layout / "other" / "config.pbtxt").write_text("name: 'x'\n")  # left out with its reason
    with zipfile.ZipFile(layout / "m.mar", "w") as archive:
        archive.writestr("handler_config.json", json.dumps({"a": 1, "b": [1, 2]}, indent=1))  # 7 lines
        archive.writestr("MAR-INF/MANIFEST.json", "{}\n")  # left out
        archive.writestr("handler.py", PYTHON)  # the same content as repo/m/1/model.py: counted once, here (first)
    runtime = tmp_path / "runtime.py"
    runtime.write_text("x = 1\n\n# c\ny = 2\n")  # 2

    count = count_serving_lines(layout, (runtime,), {"other/*": "another deployment's",
                                                     "*.mar!MAR-INF/*": "the archiver's"})
    by_path = {f.path: (f.kind, f.lines) for f in count.files}
    assert by_path == {"runtime:runtime.py": ("code", 2), "m.mar!handler.py": ("code", 5),
                       "repo/m/config.pbtxt": ("config", 3), "log4j2.xml": ("config", 4),
                       "server.properties": ("config", 2), "m.mar!handler_config.json": ("config", 7)}
    assert (count.config_lines, count.code_lines) == (3 + 4 + 2 + 7, 2 + 5)
    assert count.left_out == ("m.mar!MAR-INF/MANIFEST.json: the archiver's", "other/config.pbtxt: another deployment's")
    assert count.duplicates == ("repo/m/1/model.py (= m.mar!handler.py)",)
    assert significant_lines("{\n\n}\n", ".json") == 2


def test_a_real_layout_counts_its_config_and_its_runtimes_serving_code_once(mlp_onnx, mlp_spec, tmp_path):
    triton = get_server("triton")
    layout = triton.write_layout(mlp_onnx, mlp_spec, tmp_path / "triton")
    count = triton.serving_lines(layout)
    paths = {f.path for f in count.files}
    model_code = triton.runtime_dir / "python_model.py"
    assert paths == {"runtime:python_model.py", f"python/{mlp_spec.name}/config.pbtxt"}
    assert count.code_lines == significant_lines(model_code.read_text(), ".py") > 0
    config = (layout / "python" / mlp_spec.name / "config.pbtxt").read_text()
    assert count.config_lines == significant_lines(config, ".pbtxt") > 0
    assert count.duplicates == (f"python/{mlp_spec.name}/1/model.py (= runtime:python_model.py)",)
    assert all(entry.startswith("native/") for entry in count.left_out) and count.left_out

    kserve = get_server("kserve")
    count = kserve.serving_lines(kserve.write_layout(mlp_onnx, mlp_spec, tmp_path / "kserve"))
    assert {f.path for f in count.files} == {"runtime:server.py", "model.json"}
    assert count.left_out == (f"inferenceservice.yaml: {kserve.uncounted_files['inferenceservice.yaml']}",)
