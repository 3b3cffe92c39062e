"""Imports run one way: each stage package imports only from itself and the packages below it, and no module of
the project imports itself back through others (no circle), lazy imports included.

The order (README, "Layout"), bottom to top:

    core -> runtimes -> store -> validate -> convert -> serve -> loadgen -> plan -> measure -> regress -> report
    -> pipeline.py -> cli

A function-local `tasks.*` import hides an edge from a reader of the file's head; one stays only where it buys
something measurable, with a `# lazy: <why>` comment on its line or the line above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
LAYERS = ("core", "runtimes", "store", "validate", "convert", "serve", "loadgen", "plan", "measure", "regress",
          "report", "pipeline", "cli")
MAX_TOP_LEVEL_MODULES = 2  # tasks/__init__.py (the map) and tasks/pipeline.py (the spine)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(TASKS.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    """The stage package of a `tasks.*` module (None: the root package `tasks`, which imports nothing)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def face_exports(path: Path) -> dict[str, str]:
    """A package face's EXPORTS (name -> file): `from tasks.store import S3Store` imports tasks.store.s3."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def resolve(target: str, known: dict[str, Path]) -> str | None:
    """The project module an import names: the longest known prefix (`from a.b import c` may name a.b.c), and for
    a name a package face exports lazily, the file that defines it."""
    while target and target not in known:
        package, _, name = target.rpartition(".")
        if package in known and known[package].name == "__init__.py" and name in face_exports(known[package]):
            return f"{package}.{face_exports(known[package])[name]}"
        target = package
    return target or None


def imports_of(path: Path, known: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, function-local) of every `tasks.*` import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(node) for node in tree.body}
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        for name in names:
            if name == "tasks" or name.startswith("tasks."):
                target = resolve(name, known)
                if target and target != module_name(path):
                    found.append((target, node.lineno, id(node) not in top and not _in_type_checking(tree, node)))
    return found


def _in_type_checking(tree: ast.Module, node: ast.AST) -> bool:
    for block in tree.body:
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test):
            if any(child is node for child in ast.walk(block)):
                return True
    return False


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {target for target, _, _ in imports_of(path, known)} for name, path in known.items()}


def upward_imports() -> list[str]:
    known = modules()
    problems = []
    for name, path in known.items():
        layer = layer_of(name)
        for target, line, _ in imports_of(path, known):
            to = layer_of(target)
            if layer is None:
                problems.append(f"{path.relative_to(REPO)}:{line}: the root package imports {target}")
            elif to is not None and LAYERS.index(to) > LAYERS.index(layer):
                problems.append(f"{path.relative_to(REPO)}:{line}: {layer} imports {target}, which is above it "
                                f"({' -> '.join(LAYERS)})")
    return problems


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def unexplained_lazy_imports() -> list[str]:
    known = modules()
    problems = []
    for path in known.values():
        lines = path.read_text().splitlines()
        for target, line, local in imports_of(path, known):
            if not local:
                continue
            context = lines[line - 1] + (lines[line - 2] if line >= 2 else "")
            if "# lazy:" not in context:
                problems.append(f"{path.relative_to(REPO)}:{line}: function-local import of {target} without a "
                                "`# lazy: <why>` comment")
    return problems


def test_every_stage_package_is_in_the_order():
    packages = sorted(p.name for p in TASKS.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert set(packages) <= set(LAYERS), f"packages missing from LAYERS: {sorted(set(packages) - set(LAYERS))}"
    top_level = sorted(p.name for p in TASKS.glob("*.py"))
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, f"tasks/ should hold stage packages, not modules: {top_level}"


def test_no_import_runs_up_the_order():
    problems = upward_imports()
    assert not problems, "imports that run up the layer order:\n" + "\n".join(problems)


def test_no_import_circle():
    found = circles(import_graph())
    assert not found, "import circles (lazy imports included):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_function_local_imports_say_why():
    problems = unexplained_lazy_imports()
    assert not problems, "\n".join(problems)


def test_the_checks_catch_an_upward_import_and_a_circle(tmp_path: Path):
    """The checks themselves: an upward edge and a circle are found (so a passing run means something)."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    fake = TASKS / "core" / "_layer_probe.py"
    try:
        fake.write_text("from tasks.report.page import render_report  # an upward import, for this test only\n")
        assert any("_layer_probe.py:1: core imports tasks.report.page" in p for p in upward_imports())
    finally:
        fake.unlink()


@pytest.mark.parametrize("package", [p for p in LAYERS if p != "pipeline"])
def test_each_package_opens_with_a_face(package: str):
    """Each stage package's __init__.py is a face: a docstring that maps its files, and `__all__`."""
    init = TASKS / package / "__init__.py"
    tree = ast.parse(init.read_text())
    doc = ast.get_docstring(tree) or ""
    files = sorted(p.stem for p in (TASKS / package).glob("*.py") if p.stem not in ("__init__", "__main__"))
    missing = [f for f in files if f"{f}.py" not in doc and f"{f}/" not in doc]
    assert not missing, f"tasks/{package}/__init__.py's docstring does not map {missing}"
    subpackages = sorted(p.name for p in (TASKS / package).iterdir() if (p / "__init__.py").is_file())
    missing_dirs = [d for d in subpackages if f"{d}/" not in doc]
    assert not missing_dirs, f"tasks/{package}/__init__.py's docstring does not map {missing_dirs}"
    assert any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets)
               for n in tree.body), f"tasks/{package}/__init__.py has no __all__"
