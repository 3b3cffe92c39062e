"""The code's shape (issue 31): no function under tasks/, dags/ or plugins/ takes more than MAX_PARAMETERS
parameters (parameters that belong together are one small value or an existing object), and no file under tasks/
is longer than MAX_LINES lines (a file that grows past it holds more than one role), and no module-level function
of tasks/report/ is defined in two of its modules (one formatting module: a helper written again drifts apart)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_PARAMETERS = 8
MAX_LINES = 600


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def parameter_count(args: ast.arguments) -> int:
    """Every parameter but self/cls; *args and **kwargs count one each."""
    named = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return (len([n for n in named if n not in ("self", "cls")]) + (args.vararg is not None)
            + (args.kwarg is not None))


def wide_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {parameter_count(node.args)} parameters"
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and parameter_count(node.args) > MAX_PARAMETERS]


def test_the_walk_sees_the_code():
    assert len(python_files("tasks")) > 100
    sample = ast.parse("def f(self, a, b=1, *c, d, **e): pass").body[0]
    assert parameter_count(sample.args) == 5


def test_no_function_takes_more_than_eight_parameters():
    wide = [line for path in python_files("tasks", "dags", "plugins") for line in wide_functions(path)]
    assert not wide, f"functions with more than {MAX_PARAMETERS} parameters:\n" + "\n".join(wide)


def test_no_file_under_tasks_is_longer_than_600_lines():
    long = [f"{path.relative_to(REPO)}: {n} lines" for path in python_files("tasks")
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


def test_no_function_is_defined_twice_in_the_report_package():
    homes: dict[str, list[str]] = defaultdict(list)
    for path in python_files("tasks/report"):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                homes[node.name].append(path.name)
    twice = {name: files for name, files in homes.items() if len(files) > 1}
    assert not twice, f"functions defined in more than one module of tasks/report/: {twice}"
