"""The report's templates: autoescaped, their layout breaks dropped, stylesheets as they are."""

from __future__ import annotations

from markupsafe import Markup

from tasks.report.templating import TEMPLATES, render, stylesheet


def test_every_template_renders_escaped_markup_and_a_value_is_never_markup_by_accident() -> None:
    html = render("validation.html", success=False, failed=["<script>alert(1)</script> on a\"b"])
    assert isinstance(html, Markup)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; on a&#34;b" in html


def test_layout_breaks_between_tags_are_dropped_and_stylesheets_are_read_as_they_are() -> None:
    page = str(render("validation.html", success=False, failed=["x", "y"]))
    assert ">\n" not in page  # a template's line break between two tags is layout, not page
    css = stylesheet("report.css")
    assert str(css) == (TEMPLATES / "report.css").read_text(encoding="utf-8").rstrip("\n")
