r"""The report's templates: Jinja2, autoescaped, loaded from `tasks/report/templates/` beside this module.

Markup and prose live in the templates; numbers and decisions are made in Python and handed to them. The
templates are laid out for reading, the page is not: a line break with the indentation after it is dropped between
two tags (`>` then `<`) and next to a template tag or expression (after `}`, before `{`); anywhere else (prose
wrapped, a word after a tag) it is one space, as a browser would read it. A space that must stand where a line
breaks next to a template tag is written `{{ " " }}`, a line break of the page `{{ "\n" }}`. Stylesheets (`*.css`)
are read as they are.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from tasks.report import formatting

TEMPLATES = Path(__file__).parent / "templates"
_LAYOUT_BREAK = re.compile(r"(?<=\})\n[ \t]*|\n[ \t]*(?=\{)|(?<=>)\n[ \t]*(?=<)")
_WORD_BREAK = re.compile(r"\n[ \t]*")
GLOBALS = {"label": formatting.label, "unit": formatting.unit}  # a metric's name and unit, from METRICS


class _LayoutLoader(FileSystemLoader):
    """Templates with their layout breaks dropped (see the module's docstring)."""

    def get_source(self, environment: Environment, template: str):
        source, filename, uptodate = super().get_source(environment, template)
        return _WORD_BREAK.sub(" ", _LAYOUT_BREAK.sub("", source.rstrip("\n"))), filename, uptodate


_ENVIRONMENT = Environment(loader=_LayoutLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined)
_ENVIRONMENT.globals.update(GLOBALS)


def render(template: str, **context: object) -> Markup:
    """The template filled with `context`: markup, placed as it is into another template."""
    return Markup(_ENVIRONMENT.get_template(template).render(**context))


def stylesheet(name: str) -> Markup:
    """A stylesheet of the templates folder, as it is."""
    return Markup((TEMPLATES / name).read_text(encoding="utf-8").rstrip("\n"))
