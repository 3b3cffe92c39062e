"""The README and docs/*.md link only to what exists: every relative link's file, and its #anchor's heading, and
every name in a code span that names a path, a module file, a dotted name under `tasks.` or an UPPER_CASE
constant (FOREIGN_CONSTANTS and GENERATED list the exceptions, each with its reason). The code
cites the docs the same way (`docs/design.md#outcomes` in a docstring): every such citation resolves too, no file
cites a design document outside the repository, and the README's documentation table lists every page.

Anchors follow GitHub's heading slugs: the heading's text (inline code, emphasis and link markup dropped),
lowercased, every character that is not a letter, digit, '-', '_' or space removed, each space made '-';
a repeated slug gets -1, -2, ... in order. Links with a scheme (http:, https:, mailto:) are not followed: the
test reads files only, no network.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
README_MAX_LINES = 350
DOC_FILES = [README, *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A code span: a run of backticks, then anything up to the same run, never across a blank line.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
# [text](target) and ![alt](target); the text may hold one level of brackets; an optional "title" after the target.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)", re.M)
ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")
LINE_ANCHOR = re.compile(r"^L\d+(?:-L\d+)?$")  # GitHub's line anchors on a non-Markdown file
CODE_FOLDERS = ("tasks", "dags", "plugins", "benchmarks", "tests")  # where code may cite a docs page
DOC_CITATION = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")
OUTSIDE_DESIGN = re.compile(r"(?<![\w/])DESIGN\.md")  # the design notes this repository never held: docs/design.md


def _blank(text: str) -> str:
    """The same text with every character but newlines made a space (offsets and line numbers stay)."""
    return re.sub(r"[^\n]", " ", text)


def without_fences(text: str) -> str:
    """`text` with fenced code blocks blanked: nothing inside one is a link or a heading."""
    out, fence = [], None
    for line in text.split("\n"):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            out.append(_blank(line))
        elif fence is not None:
            closing = FENCE.match(line)  # the same character, at least as many, nothing after it
            if closing and closing.group(1).startswith(fence) and not line.strip().lstrip(fence[0]):
                fence = None
            out.append(_blank(line))
        else:
            out.append(line)
    return "\n".join(out)


def heading_text(markdown: str) -> str:
    """A heading's text as GitHub renders it: images dropped, links by their text, code and HTML markup gone."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", markdown)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").strip()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase; punctuation but '-' and '_' dropped; each space a '-'."""
    return re.sub(r"[^\w\- ]", "", heading_text(heading).lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file has: its headings' slugs (repeats numbered -1, -2, ...) and HTML ids."""
    text = without_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for line in text.split("\n"):
        heading = ATX_HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every inline link, image and reference definition outside code."""
    text = CODE_SPAN.sub(lambda m: _blank(m.group(0)), without_fences(path.read_text(encoding="utf-8")))
    found = []
    for pattern in (INLINE_LINK, REFERENCE_DEFINITION):
        for match in pattern.finditer(text):
            target = match.group(1)
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            found.append((text.count("\n", 0, match.start()) + 1, target))
    return sorted(found)


def link_problem(source: Path, target: str) -> str | None:
    """Why `target`, linked from `source`, does not resolve; None when it does or is not a relative link."""
    if not target:
        return "the link is empty"
    if SCHEME.match(target):
        return None
    file_part, _, anchor = target.partition("#")
    file_part = unquote(file_part)
    if not file_part:
        resolved = source
    elif file_part.startswith("/"):
        resolved = REPO / file_part.lstrip("/")
    else:
        resolved = (source.parent / file_part).resolve()
    shown = resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else resolved
    if not resolved.exists():
        return f"{shown} does not exist (resolved relative to {source.relative_to(REPO)})"
    if not anchor:
        return None
    anchor = unquote(anchor)
    if resolved.suffix.lower() != ".md":
        if resolved.is_file() and LINE_ANCHOR.match(anchor):
            return None
        return f"#{anchor} points into {shown}, which is not a Markdown file"
    known = anchors(resolved)
    if anchor not in known:
        return f"no heading in {shown} makes the anchor #{anchor} (its anchors: {', '.join(sorted(known))})"
    return None


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path):
    problems = [f"{doc.relative_to(REPO)}:{line}: link ({target}): {why}"
                for line, target in links(doc) if (why := link_problem(doc, target))]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_readme_stays_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines, more than {README_MAX_LINES}: move topic "
                                       "detail to a page under docs/ and link it")


def test_docs_folder_has_pages():
    assert len(DOC_FILES) > 1, "docs/ holds no Markdown page"


@pytest.mark.parametrize("heading, expected", [
    ("When a row says `ok`", "when-a-row-says-ok"),
    ("Fair defaults, explained gaps", "fair-defaults-explained-gaps"),
    ("trend.json", "trendjson"),
    ("On paper: the KubernetesExecutor and KServe `InferenceService`",
     "on-paper-the-kubernetesexecutor-and-kserve-inferenceservice"),
    ("The DAG file's import time", "the-dag-files-import-time"),
    ("Each stack at its best — serving_configurations", "each-stack-at-its-best--serving_configurations"),
    ("A [linked](x.md) *word*", "a-linked-word"),
])
def test_slug_follows_github(heading, expected):
    assert slug(heading) == expected


def test_repeated_headings_are_numbered(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n## Notes\n```\n## not a heading\n```\n## Notes\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"title", "notes", "notes-1", "notes-2"}


def test_links_in_code_are_not_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [a](a.md) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d](<d e.md#x> \"title\")\n"
                    "[ref]: f.md\n", encoding="utf-8")
    assert links(page) == [(1, "a.md"), (5, "d e.md#x"), (6, "f.md")]


def code_files() -> list[Path]:
    return sorted(p for folder in CODE_FOLDERS for p in (REPO / folder).rglob("*.py"))


def test_code_citations_of_docs_resolve():
    problems = []
    for path in code_files():
        text = path.read_text(encoding="utf-8")
        for match in DOC_CITATION.finditer(text):
            page, anchor = match.groups()
            target = f"docs/{page}" + (f"#{anchor}" if anchor else "")
            why = link_problem(README, target)  # resolved from the repository root, as the README does
            if why:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path.relative_to(REPO)}:{line}: {target}: {why}")
    assert not problems, "citations of docs pages that do not resolve:\n" + "\n".join(problems)


def test_nothing_cites_a_design_document_outside_the_repository():
    cited = [f"{path.relative_to(REPO)}:{number}" for path in [*code_files(), *DOC_FILES]
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if OUTSIDE_DESIGN.search(line) and path != Path(__file__).resolve()]
    assert not cited, "cite docs/design.md by section instead of DESIGN.md: " + ", ".join(cited)


def documentation_table(readme: str) -> str:
    """The README's "Documentation" section: from its heading to the next second-level heading."""
    section = readme.split("\n## Documentation\n", 1)[-1]
    return section.split("\n## ", 1)[0]


def test_readme_lists_every_docs_page(tmp_path):
    table = tmp_path / "documentation.md"
    table.write_text(documentation_table(README.read_text(encoding="utf-8")), encoding="utf-8")
    listed = {target.partition("#")[0] for _, target in links(table)}
    missing = [f"docs/{p.name}" for p in DOC_FILES[1:] if f"docs/{p.name}" not in listed]
    assert not missing, f"README.md's documentation table does not link: {', '.join(missing)}"


def test_code_citation_pattern(tmp_path):
    text = "rules (docs/design.md#outcomes), the page docs/measuring.md, not docs/x.py#a"
    assert [m.groups() for m in DOC_CITATION.finditer(text)] == [("design.md", "outcomes"), ("measuring.md", None)]
    assert OUTSIDE_DESIGN.search("see DESIGN.md") and not OUTSIDE_DESIGN.search("docs/design.md")


# --- names in code spans: what a page names must be there ---------------------------------------------------------

TREE_ROOTS = ("tasks", "dags", "plugins", "benchmarks", "tests", "docs", "suites", "models", "docker", ".ci", "scripts",
              "templates", "deploy")
ROOTS = "|".join(re.escape(r) for r in TREE_ROOTS)
PATH_SPAN = re.compile(rf"^(?:\./)?((?:{ROOTS})/[\w./-]*)$")
FILE_SPAN = re.compile(r"^[\w-]+\.py$")  # a module named bare (a published object's name, `night.json`, is no file)
DOTTED_SPAN = re.compile(r"^tasks(?:\.\w+)+$")
CONSTANT_SPAN = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
CODE_FOR_NAMES = ("tasks", "dags", "plugins", "benchmarks", "tests", "docker", ".ci", "suites", "deploy")
# UPPER_CASE names a page may give that no file of ours defines, each with its reason
FOREIGN_CONSTANTS = {
    "AWS_ACCESS_KEY_ID": "the AWS SDK's environment variable", "AWS_SECRET_ACCESS_KEY": "the AWS SDK's",
    "AWS_DEFAULT_REGION": "the AWS SDK's", "AWS_ENDPOINT_URL": "the AWS SDK's",
    "CUDA_VISIBLE_DEVICES": "CUDA's", "OMP_NUM_THREADS": "OpenMP's", "PYTHONPATH": "Python's",
    "UPDATE_GOLDEN": "the golden-page tests' switch (an environment variable the tests read)",
}
# paths and files a page names that a command or a stack writes, not the repository
GENERATED = {"docker/compose.env": "written by `python -m tasks.cli images compose-env`",
             "service.py": "BentoML's service file, generated in the run's layout (docs/servers.md)"}
# names written with placeholders or shell patterns: not one file or name
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.")


def code_spans(path: Path) -> list[tuple[int, str]]:
    """(line number, content) of every inline code span outside fenced blocks."""
    text = without_fences(path.read_text(encoding="utf-8"))
    return [(text.count("\n", 0, m.start()) + 1, m.group(2).strip()) for m in CODE_SPAN.finditer(text)]


def _code_text() -> str:
    texts = []
    for folder in CODE_FOR_NAMES:
        root = REPO / folder
        if root.is_dir():
            texts += [p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*")
                      if p.is_file() and p.suffix in (".py", ".yaml", ".yml", ".sh", ".txt", ".toml", "")
                      and ".venv" not in p.parts and p != Path(__file__).resolve()]  # not this file's plants
    texts += [(REPO / "Makefile").read_text(encoding="utf-8")]
    return "\n".join(texts)


def name_problem(span: str, code: str, names: set[str]) -> str | None:
    """Why a name in a code span is not in the tree; None when it is, or when the span is not a name we check."""
    if PLACEHOLDER.search(span) or " " in span or span in GENERATED:
        return None
    path = PATH_SPAN.match(span)
    if path:
        target = path.group(1).split("#")[0].split(":")[0]
        return None if (REPO / target).exists() else f"{target} does not exist"
    if FILE_SPAN.match(span):
        return None if span in names else f"no file is named {span}"
    if DOTTED_SPAN.match(span):
        parts = span.split(".")
        for cut in range(len(parts), 0, -1):
            module = REPO.joinpath(*parts[:cut])
            source = module.with_suffix(".py") if module.with_suffix(".py").is_file() else module / "__init__.py"
            if source.is_file():
                rest = parts[cut:]
                if not rest:
                    return None
                defined = re.search(rf"^\s*(?:def|class|async def)\s+{rest[0]}\b|^\s*{rest[0]}\s*[:=]",
                                    source.read_text(encoding="utf-8"), re.M)
                return None if defined else f"{'.'.join(parts[:cut])} defines no {rest[0]}"
        return f"no module {span}"
    if CONSTANT_SPAN.match(span):
        if span in FOREIGN_CONSTANTS or re.search(rf"\b{span}\b", code):
            return None
        return f"no file of ours names {span}"
    return None


def test_names_in_the_docs_are_in_the_tree():
    code = _code_text()
    names = {p.name for p in REPO.rglob("*") if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts}
    problems = [f"{doc.relative_to(REPO)}:{line}: `{span}`: {why}" for doc in DOC_FILES
                for line, span in code_spans(doc) if (why := name_problem(span, code, names))]
    assert not problems, "names in the docs that are not in the tree:\n" + "\n".join(problems)


def test_a_planted_stale_name_fails(tmp_path):
    code = "DEFINED_HERE = 1\n"
    names = {"pipeline.py"}
    assert name_problem("OLD_LAYOUT_READ_UNTIL", code, names) == "no file of ours names OLD_LAYOUT_READ_UNTIL"
    assert name_problem("DEFINED_HERE", code, names) is None
    assert name_problem("tests/test_layers.py", code, names) == "tests/test_layers.py does not exist"
    assert name_problem("tests/unit/test_layers.py", code, names) is None
    assert name_problem("tasks.pipeline.run_pipeline", code, names) is None
    assert name_problem("tasks.pipeline.no_such_step", code, names) == "tasks.pipeline defines no no_such_step"
    assert name_problem("tasks.regress.duets", code, names) == "tasks.regress defines no duets"
    assert name_problem("hostload.py", code, names) == "no file is named hostload.py"
    assert name_problem("docs/<page>.md", code, names) is None  # a placeholder
