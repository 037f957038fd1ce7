"""Untrusted text into HTML and markdown: the one place where that happens, for every Python face.

Job names, comments, log lines, file names, model replies and wiki pages come from outside
Betty's own code; any of them may carry ``<img src=x onerror=…>``, a remote image that
reports a secret to another host, or a line that closes a code fence. Everything that
builds HTML or markdown from such values calls these functions:

- :func:`html_text` — text inside an HTML element or a quoted attribute;
- :func:`markdown_html` — markdown rendered to HTML: raw HTML is shown as text, remote images
  are not loaded (they become links showing their URL), links other than http(s)/mailto become text;
- :func:`markdown_text` — text placed in a markdown document Betty writes, shown exactly as written
  (nothing in it renders as HTML, an image, a link, a heading or a table cell border);
- :func:`table_cell` — a value in a cell of a markdown table;
- :func:`fenced` — text in a code fence it cannot close.
- :func:`terminal_line` — a value in a table the ``betty`` command prints.
- :func:`quoted_lines` — text the model reads as quoted data (a notebook's cells, the context bulletin).

Invisible control characters (terminal escapes, bidirectional overrides such as U+202E) are
shown as ``\\x1b`` / ``\\u202e`` wherever text is shown rather than kept verbatim, so what a
person reads is what the text holds.

This module imports nothing of Jupyter; the core may use it.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    from mistune import Markdown

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
"""The schemes a rendered link may keep; a link with any other scheme is shown as its text."""

IMAGE_DATA = ("data:image/png;", "data:image/gif;", "data:image/jpeg;", "data:image/webp;")
"""Inline images that load nothing from anywhere."""

_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_URL_NOISE = re.compile(r"[\x00-\x20\x7f]+")
_MARKDOWN_INLINE = re.compile(r"([\\`*\[\]!|~$])")
# An underscore between two letters or digits (OUT_OF_MEMORY, oom_kill) can never emphasise: left as it is.
_LONE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# What opens a block at the start of a line: a heading, a list item, a setext or thematic rule.
_MARKDOWN_LINE_START = re.compile(r"^([ \t]*)(#{1,6}(?=[ \t]|$)|[-+](?=[ \t]|$)|-+(?=[ \t]*$)|=+(?=[ \t]*$)"
                                  r"|\d{1,9}[.)](?=[ \t]|$))", re.M)
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(:)(?=//)|(?<=www)(\.)")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+.\-]*")


def visible(text: str) -> str:
    """``text`` with invisible control characters written out (``\\x1b``, ``\\u202e``); newlines and tabs kept."""
    return _INVISIBLE.sub(_escape_code, text)


def terminal_line(text: object) -> str:
    """``text`` as one line of a terminal table: control characters and line breaks written out (``\\x1b``, ``\\n``).

    A job name carrying a terminal escape sequence could otherwise rewrite what a person's
    terminal shows; a line break could forge a row.
    """
    return visible(str(text)).replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def quoted_lines(text: str, mark: str = "| ") -> str:
    """``text`` as quoted lines for the model: each line starts with ``mark``, control characters written out.

    Nothing in ``text`` can then end the quotation or pass for Betty's own words: every line the
    model reads between Betty's delimiters starts with the mark, whatever the text holds.
    """
    return "\n".join(mark + line for line in visible(text.replace("\r\n", "\n")).replace("\r", "\\r").split("\n"))


def _escape_code(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def html_text(text: object) -> str:
    """``text`` (``str()`` of any value) safe inside an HTML element or a quoted attribute value."""
    return html.escape(visible(str(text)), quote=True)


def markdown_html(text: str) -> str:
    """Markdown as HTML that runs and loads nothing: raw HTML shown as text, remote images as links."""
    return str(_renderer()(visible(text)))


def markdown_text(text: object) -> str:
    """``text`` as plain text inside a markdown document: it renders as exactly these characters.

    Nothing in it becomes HTML, an image, a link, emphasis, a heading, a list, a table border
    or math, and it cannot carry the wiki's region markers (``<`` is written as ``&lt;``).
    """
    escaped = html.escape(visible(str(text)), quote=False)
    escaped = _MARKDOWN_INLINE.sub(r"\\\1", escaped)
    escaped = _LONE_UNDERSCORE.sub(r"\\_", escaped)
    escaped = _AUTOLINK.sub(lambda m: "\\" + m.group(), escaped)
    return _MARKDOWN_LINE_START.sub(_escape_line_start, escaped)


def _escape_line_start(match: re.Match[str]) -> str:
    indent, marker = match.group(1), match.group(2)
    if marker[0].isdigit():
        return f"{indent}{marker[:-1]}\\{marker[-1]}"
    return f"{indent}\\{marker}"


def table_cell(value: object) -> str:
    """``value`` as one cell of a markdown table: one line, its pipes escaped, shown as written."""
    return markdown_text(" ".join(str(value).splitlines()).strip())


def fenced(text: str, language: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks in it, so nothing in it can close the fence.

    ``language`` is the fence's info string (``bash``, ``text``): its leading letters, digits and
    ``_+.-``, nothing after them. The text is kept byte for byte, less trailing line breaks.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    info = _LANGUAGE.match(language.strip())
    body = text.rstrip("\r\n")
    return f"{fence}{info.group() if info else ''}\n{body}\n{fence}"


def url_scheme(url: str) -> str | None:
    """The scheme a browser would see in ``url`` (lower case), or None for a relative URL.

    Control characters and spaces are dropped first, as browsers drop some of them, and a
    percent-encoded form is looked at too: either way, the stricter answer wins.
    """
    for candidate in (url, unquote(unquote(url))):
        found = _SCHEME.match(_URL_NOISE.sub("", candidate))
        if found:
            return found.group(1).lower()
    return None


def link_allowed(url: str) -> bool:
    """Whether a rendered link may point at ``url``: http(s), mailto, or relative."""
    scheme = url_scheme(url)
    return scheme is None or scheme in LINK_SCHEMES


def image_loads_nothing_remote(url: str) -> bool:
    """Whether an image at ``url`` may be shown: an inline ``data:image/…`` or a path on the same server."""
    cleaned = _URL_NOISE.sub("", url)
    if cleaned.lower().startswith(IMAGE_DATA):
        return True
    return url_scheme(url) is None and not cleaned.startswith(("//", "\\", "/\\"))


@lru_cache(maxsize=1)
def _renderer() -> "Markdown":
    # lazy: mistune renders markdown; `betty --help`, `%load_ext` and the server's start load this module
    import mistune
    from mistune.renderers.html import HTMLRenderer
    from mistune.util import striptags

    class SafeRenderer(HTMLRenderer):
        """mistune's HTML renderer (raw HTML escaped) with Betty's policy for links and images."""

        def link(self, text: str, url: str, title: str | None = None) -> str:
            """A link only to http(s), mailto or a relative URL; otherwise its text alone."""
            if not link_allowed(url):
                return text
            titled = f' title="{html_text(title)}"' if title else ""
            return f'<a href="{html_text(url)}"{titled} rel="noopener noreferrer" target="_blank">{text}</a>'

        def image(self, text: str, url: str, title: str | None = None) -> str:
            """An inline image; a remote one is a link showing its URL, never loaded."""
            alt = html_text(html.unescape(striptags(text)))
            if image_loads_nothing_remote(url):
                return f'<img src="{html_text(url)}" alt="{alt}">'
            label = f"image {alt}: " if alt else "image: "
            shown = self.link(html_text(url), url)
            return f'<span class="betty-image-link">[{label}{shown}]</span>'

    return mistune.create_markdown(renderer=SafeRenderer(escape=True), plugins=["table", "strikethrough"])
