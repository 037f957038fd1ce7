"""How the widgets look: coloured states, preformatted and highlighted blocks, small tables.

Every value in them goes through :mod:`betty_jupyter.safe_text`, the one place where
untrusted text becomes HTML; this module only adds the presentation around it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Generic, Keyword, Name, Number, Operator, String, _TokenType

from ...gpu.report import render_estimate_record
from ...safe_text import html_text, visible

if TYPE_CHECKING:
    from ...agent.models import Preview

STATE_COLOURS = {
    "PENDING": "#b58900", "RUNNING": "#268bd2", "COMPLETING": "#268bd2", "COMPLETED": "#2e7d32",
    "FAILED": "#c62828", "OUT_OF_MEMORY": "#c62828", "TIMEOUT": "#c62828", "NODE_FAIL": "#c62828",
    "CANCELLED": "#757575", "PREEMPTED": "#ef6c00", "SUSPENDED": "#ef6c00",
}
"""The colour of each Slurm job state, everywhere Betty shows one."""


def pre_html(text: str, css_class: str = "betty-pre") -> str:
    """``text`` as a preformatted block."""
    return (f'<pre class="{html_text(css_class)}" style="white-space:pre-wrap;margin:2px 0">'
            f"{html_text(text)}</pre>")


_TOKEN_COLOURS = (
    (Comment, "var(--jp-mirror-editor-comment-color)"),
    (Keyword, "var(--jp-mirror-editor-keyword-color)"),
    (Name.Builtin, "var(--jp-mirror-editor-builtin-color)"),
    (Name.Variable, "var(--jp-mirror-editor-variable-2-color)"),
    (String, "var(--jp-mirror-editor-string-color)"),
    (Number, "var(--jp-mirror-editor-number-color)"),
    (Operator, "var(--jp-mirror-editor-operator-color)"),
    (Generic.Inserted, "var(--jp-success-color1)"),
    (Generic.Deleted, "var(--jp-error-color1)"),
    (Generic.Subheading, "var(--jp-ui-font-color2)"),
    (Generic.Heading, "var(--jp-ui-font-color2)"),
)
"""The colour of each kind of token: JupyterLab's editor colours, so the light and dark themes both read."""

CODE_BLOCK_STYLE = ("white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0;padding:4px 6px;"
                    "background:var(--jp-cell-editor-background);color:var(--jp-content-font-color1);"
                    "border:1px solid var(--jp-border-color2);font-family:var(--jp-code-font-family);"
                    "font-size:var(--jp-code-font-size)")
"""How a highlighted block looks: the theme's editor background and text colour."""


def _token_colour(kind: _TokenType) -> str | None:
    return next((colour for parent, colour in _TOKEN_COLOURS if kind in parent), None)


def highlighted_html(text: str, language: str) -> str:
    """``text`` with syntax colours from JupyterLab's theme variables (inline styles, so no stylesheet is
    needed, and the dark theme recolours them); ``language`` is a lexer name.

    Invisible control characters are written out first, so a script shows every character it holds.
    """
    spans = []
    for kind, value in get_lexer_by_name(language, stripnl=False, ensurenl=False).get_tokens(visible(text)):
        colour = _token_colour(kind)
        spans.append(f'<span style="color:{html_text(colour)}">{html_text(value)}</span>' if colour else html_text(value))
    return f'<pre class="betty-code" style="{CODE_BLOCK_STYLE}">{"".join(spans)}</pre>'


def state_badge_html(state: str) -> str:
    """A Slurm state as a coloured label."""
    colour = STATE_COLOURS.get(state.split()[0] if state else "", "#555")
    return (f'<span class="betty-state" style="color:white;background:{html_text(colour)};padding:1px 6px;'
            f'border-radius:3px;font-size:90%">{html_text(state)}</span>')


def details_table_html(details: Mapping[str, Any]) -> str:
    """A small two-column table of a preview's details (nested values as text, a GPU estimate as its breakdown)."""
    rows_html = "".join(f"<tr><th style='text-align:left;padding-right:8px;vertical-align:top'>{html_text(k)}</th>"
                        f"<td style='overflow-wrap:anywhere'>{_value_html(k, v)}</td></tr>" for k, v in details.items()
                        if v not in (None, "", {}, []))
    return f'<table class="betty-details" style="font-size:90%">{rows_html}</table>' if rows_html else ""


def facts_html(preview: "Preview") -> str:
    """A preview's facts as a two-column table: each label in words, its text line by line, a table as a table
    (a GPU estimate as its breakdown, in place of its one-line summary)."""
    estimate = preview.details.get("gpu_estimate")
    readable = isinstance(estimate, Mapping)
    estimate_html = (_fact_row_html("GPU memory", pre_html(render_estimate_record(estimate)))
                     if isinstance(estimate, Mapping) else "")
    rows_html = estimate_html + "".join(
        _fact_row_html(fact.label, _rows_html(fact.table) if fact.table else _lines_html(fact.text))
        for fact in preview.facts if not (readable and fact.label == "GPU memory"))
    return f'<table class="betty-details betty-facts" style="font-size:90%">{rows_html}</table>' if rows_html else ""


def _fact_row_html(label: str, value_html: str) -> str:
    return (f"<tr><th style='text-align:left;padding-right:8px;vertical-align:top'>{html_text(label)}</th>"
            f"<td style='overflow-wrap:anywhere'>{value_html}</td></tr>")


def _lines_html(text: str) -> str:
    return "<br>".join(html_text(line) for line in text.split("\n"))


def _rows_html(rows: list[list[str]]) -> str:
    """Rows as a small bordered table, the first the header."""
    cell = "style='border:1px solid var(--jp-border-color2,#ccc);padding:0 6px;text-align:left'"
    head = "".join(f"<th {cell}>{html_text(name)}</th>" for name in rows[0])
    body = "".join("<tr>" + "".join(f"<td {cell}>{html_text(value)}</td>" for value in row) + "</tr>"
                   for row in rows[1:])
    return f"<table class='betty-fact-table' style='border-collapse:collapse'><tr>{head}</tr>{body}</table>"


def _value_html(key: str, value: Any) -> str:
    if key == "gpu_estimate" and isinstance(value, Mapping):
        return pre_html(render_estimate_record(value))
    if isinstance(value, str) and "\n" in value:  # a cell's code, a list of lines: shown as its lines
        return pre_html(value)
    if isinstance(value, Mapping):
        return html_text(", ".join(f"{k}={v}" for k, v in value.items()))
    return html_text(value)
