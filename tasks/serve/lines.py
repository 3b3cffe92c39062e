"""How much the project writes to serve one model on a stack: the lines of configuration and code, counted from the
model layout `write_layout` generates and the runtime's serving code (`Server.serving_code`, files under its
docker/<runtime>/ folder).

Only lines that say something count: not blank lines, not comments (`#` in Python, text protos, YAML and properties
files; `<!-- -->` in XML) and not Python docstrings (as cloc counts them). A file's kind comes from its name:
Python is code, the configuration formats are config; anything else (the model's weights, ONNX or TorchScript files)
is not counted. A model archive (TorchServe's `.mar`, a zip) is counted by its members. A file whose content was
counted already (the runtime's model code copied into the layout) counts once. Files the project does not write
itself (the archiver's manifest) or that a layout carries for another deployment than the one served here
(`Server.uncounted_files`: Triton's native repository for NVIDIA's image, KServe's InferenceService manifest) are
left out, and named with their reason in the count's evidence.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import tokenize
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

CODE, CONFIG = "code", "config"
# file name suffix -> (kind, its line-comment prefixes)
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    ".py": (CODE, ("#",)),
    ".sh": (CODE, ("#",)),
    ".pbtxt": (CONFIG, ("#",)),
    ".config": (CONFIG, ("#",)),  # TF Serving's text protos
    ".properties": (CONFIG, ("#", "!")),
    ".yaml": (CONFIG, ("#",)),
    ".yml": (CONFIG, ("#",)),
    ".toml": (CONFIG, ("#",)),
    ".json": (CONFIG, ()),
    ".xml": (CONFIG, ()),  # comments: <!-- ... -->
}
ARCHIVES = (".mar",)  # zip files whose members are counted
MAX_TEXT_BYTES = 1 << 20  # a "config" file larger than this is data (a vocabulary), not something written by hand


@dataclass(frozen=True)
class CountedFile:
    path: str  # relative to the layout (`<archive>!<member>` inside an archive), or `runtime:<file>`
    kind: str  # CODE | CONFIG
    lines: int

    def to_dict(self) -> dict:
        return {"path": self.path, "kind": self.kind, "lines": self.lines}


@dataclass(frozen=True)
class LineCount:
    """The lines of config and code one stack's model layout and serving code hold, with the files counted."""

    config_lines: int
    code_lines: int
    files: tuple[CountedFile, ...] = ()
    left_out: tuple[str, ...] = ()  # "<file>: <why>" of the layout files not counted (`uncounted_files`)
    duplicates: tuple[str, ...] = field(default=())  # files whose content was counted under another name

    def to_dict(self) -> dict:
        return {"config_lines": self.config_lines, "code_lines": self.code_lines,
                "files": [f.to_dict() for f in self.files], "left_out": list(self.left_out),
                "duplicates": list(self.duplicates)}


def significant_lines(text: str, suffix: str) -> int:
    """Non-blank, non-comment lines of `text` in the format its file name `suffix` names (docstrings are comments)."""
    if suffix == ".py":
        return _python_lines(text)
    if suffix == ".xml":
        return _xml_lines(text)
    prefixes = KINDS[suffix][1]
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith(prefixes or ("\0",)))


def _python_lines(text: str) -> int:
    """Rows holding a token that is not a comment, a docstring (a string standing alone as a statement) or a line
    break."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _TRIVIA]
    except (tokenize.TokenError, SyntaxError):  # not Python after all: count what is not blank or '#'
        return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    rows: set[int] = set()
    for i, token in enumerate(tokens):
        starts_statement = i == 0 or tokens[i - 1].type in _STATEMENT_START
        ends_statement = i + 1 == len(tokens) or tokens[i + 1].type in (tokenize.NEWLINE, tokenize.ENDMARKER)
        if token.type == tokenize.STRING and starts_statement and ends_statement:
            continue  # a docstring
        if token.type not in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            rows.update(range(token.start[0], token.end[0] + 1))
    return len(rows)


_TRIVIA = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING)
_STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def _xml_lines(text: str) -> int:
    count, in_comment = 0, False
    for line in text.splitlines():
        rest, meaningful = line, False
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                    continue
                rest, in_comment = rest[end + 3:], False
            else:
                start = rest.find("<!--")
                meaningful |= bool((rest if start < 0 else rest[:start]).strip())
                if start < 0:
                    rest = ""
                else:
                    rest, in_comment = rest[start + 4:], True
        count += meaningful
    return count


def count_serving_lines(layout: Path, runtime_files: tuple[Path, ...] = (),
                        uncounted: dict[str, str] | None = None) -> LineCount:
    """The config and code lines of the layout under `layout` and of `runtime_files` (the runtime's serving code),
    each distinct content counted once. A layout file (or `<archive>!<member>`) matching a glob of `uncounted` is
    left out, with the glob's reason (a file another tool writes, or one for another deployment)."""
    files: list[CountedFile] = []
    seen: dict[str, str] = {}
    left_out: list[str] = []
    duplicates: list[str] = []
    uncounted = uncounted or {}

    def add(name: str, suffix: str, read) -> None:
        if suffix not in KINDS:  # the model's weights, an engine's file: nothing anyone wrote by hand
            return
        why = next((reason for pattern, reason in uncounted.items() if fnmatch.fnmatch(name, pattern)), None)
        if why is not None:
            left_out.append(f"{name}: {why}")
            return
        data = read()
        if data is None:
            return
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            duplicates.append(f"{name} (= {seen[digest]})")
            return
        seen[digest] = name
        files.append(CountedFile(name, KINDS[suffix][0], significant_lines(text, suffix)))

    def small(path: Path):
        return lambda: path.read_bytes() if path.stat().st_size <= MAX_TEXT_BYTES else None

    for path in sorted(runtime_files):
        add(f"runtime:{path.name}", path.suffix, small(path))
    for path in sorted(p for p in layout.rglob("*") if p.is_file() and not p.is_symlink()):
        relative = path.relative_to(layout).as_posix()
        if path.suffix in ARCHIVES and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for member in sorted(archive.namelist()):
                    if not member.endswith("/") and archive.getinfo(member).file_size <= MAX_TEXT_BYTES:
                        add(f"{relative}!{member}", Path(member).suffix, lambda m=member: archive.read(m))
            continue
        add(relative, path.suffix, small(path))
    return LineCount(sum(f.lines for f in files if f.kind == CONFIG), sum(f.lines for f in files if f.kind == CODE),
                     tuple(files), tuple(left_out), tuple(duplicates))
