"""How the report writes a value: escaped for HTML, a figure for people, a metric's label and unit.

Every module of `tasks.report` formats through here, so one value reads the same in every section. Escaping is
markupsafe's, the one Jinja's autoescaping applies: a fragment built here and one a template writes escape alike.
"""

from __future__ import annotations

from markupsafe import escape as _markup_escape


def escape(value: object) -> str:
    """`value` as HTML text: &, <, >, ' and " escaped (markupsafe's `escape`)."""
    return str(_markup_escape(value))
