"""Safe HTML for widgets: text escaped, scripts highlighted, markdown without raw HTML."""

from __future__ import annotations

import html
from typing import Any, Mapping

STATE_COLOURS = {
    "PENDING": "#b58900", "RUNNING": "#268bd2", "COMPLETING": "#268bd2", "COMPLETED": "#2e7d32",
    "FAILED": "#c62828", "OUT_OF_MEMORY": "#c62828", "TIMEOUT": "#c62828", "NODE_FAIL": "#c62828",
    "CANCELLED": "#757575", "PREEMPTED": "#ef6c00", "SUSPENDED": "#ef6c00",
}
"""The colour of each Slurm job state, everywhere Betty shows one."""


def escaped(text: str) -> str:
    """``text`` safe inside HTML."""
    return html.escape(text, quote=True)


def pre(text: str, css_class: str = "betty-pre") -> str:
    """``text`` as a preformatted block."""
    return f'<pre class="{css_class}" style="white-space:pre-wrap;margin:2px 0">{escaped(text)}</pre>'


def highlighted(text: str, language: str) -> str:
    """``text`` with syntax colours (inline styles, so no stylesheet is needed); ``language`` is a lexer name."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name

    formatter = HtmlFormatter(noclasses=True, nowrap=False, style="default")
    return str(highlight(text, get_lexer_by_name(language), formatter))


def markdown(text: str) -> str:
    """Markdown as HTML; raw HTML in it is shown as text, never run."""
    import mistune

    render = mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])
    return str(render(text))


def state_badge(state: str) -> str:
    """A Slurm state as a coloured label."""
    colour = STATE_COLOURS.get(state.split()[0] if state else "", "#555")
    return (f'<span class="betty-state" style="color:white;background:{colour};padding:1px 6px;'
            f'border-radius:3px;font-size:90%">{escaped(state)}</span>')


def details_table(details: Mapping[str, Any]) -> str:
    """A small two-column table of a preview's details (nested values as text)."""
    rows = "".join(f"<tr><th style='text-align:left;padding-right:8px'>{escaped(str(k))}</th>"
                   f"<td>{escaped(_text(v))}</td></tr>" for k, v in details.items() if v not in (None, "", {}, []))
    return f'<table class="betty-details" style="font-size:90%">{rows}</table>' if rows else ""


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
