"""The hostile-input corpus (``tests/data/hostile/corpus.json``) and checks that none of it came out live.

``hostile("job_names")`` gives one category's payloads; ``live_html(markup)`` lists what in
some HTML would run a script or load something without a click, and every ``javascript:``
link; ``live_markdown(text)`` renders markdown as JupyterLab would (raw HTML kept) and does
the same; ``code_blocks(text)`` gives the code blocks a markdown document really holds.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "data" / "hostile" / "corpus.json"
EVIL_HOST = "evil.example"
"""The host every exfiltrating payload points at."""

# The tags Betty's own HTML uses; anything else in a rendering is someone else's markup come alive.
BETTY_TAGS = {"a", "b", "i", "em", "strong", "small", "br", "span", "div", "p", "pre", "code", "table", "thead",
              "tbody", "tr", "th", "td", "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "blockquote",
              "del", "style", "img", "sup", "section", "colgroup", "col", "details", "summary"}
_URL_ATTRIBUTES = {"href", "src", "xlink:href", "action", "formaction", "srcset", "background", "poster", "data"}


class AttackerHost(ThreadingHTTPServer):
    """Another host on 127.0.0.1 that answers every request and remembers every path it was asked for.

    Payloads point at :attr:`url`; a test that must leak nothing asserts :attr:`paths` stays
    empty (and, where it can, shows with a control request that a leak would be seen). ``answer``
    is the JSON body each request gets (none: ``204 No Content``).
    """

    def __init__(self, answer: Any = None) -> None:
        self.paths: list[str] = []
        self.answer = None if answer is None else json.dumps(answer).encode()
        super().__init__(("127.0.0.1", 0), _Recording)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="attacker-host", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving."""
        self.shutdown()
        self.server_close()
        self._thread.join(10)


class _Recording(BaseHTTPRequestHandler):
    server: AttackerHost

    def _record(self) -> None:
        self.server.paths.append(self.path)
        if self.server.answer is None:
            self.send_response(204)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.server.answer)))
        self.end_headers()
        self.wfile.write(self.server.answer)

    do_GET = do_POST = do_PUT = do_HEAD = do_OPTIONS = _record

    def log_message(self, format: str, *args: Any) -> None:
        pass


def hostile(*categories: str) -> list[str]:
    """The payloads of ``categories`` (every category when none is named), repeats expanded."""
    corpus: dict[str, Any] = json.loads(CORPUS.read_text())
    names = categories or [name for name in corpus if not name.startswith("_")]
    return [_expanded(item) for name in names for item in corpus[name]]


def _expanded(item: str | dict[str, Any]) -> str:
    return item if isinstance(item, str) else str(item["repeat"]) * int(item["times"])


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in BETTY_TAGS:
            self.problems.append(f"<{tag}> element")
        self._in_style = tag == "style"
        for name, value in attrs:
            self._attribute(tag, name.lower(), value or "")

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def _attribute(self, tag: str, name: str, value: str) -> None:
        if name.startswith("on"):
            self.problems.append(f"<{tag} {name}=…> event handler")
        if name == "style" and ("url(" in value.lower() or "expression(" in value.lower()):
            self.problems.append(f"<{tag} style> loading {value[:60]!r}")
        if name not in _URL_ATTRIBUTES:
            return
        url = "".join(value.split()).lower()
        scheme = url.split(":", 1)[0] if ":" in url.split("/", 1)[0] else ""
        if scheme and scheme not in ("http", "https", "mailto", "data"):
            self.problems.append(f"<{tag} {name}={value[:60]!r}> with a {scheme}: URL")
        if tag == "img" and not url.startswith("data:image/") and (scheme or url.startswith("//")):
            self.problems.append(f"<img src={value[:60]!r}>: a remote image")
        if EVIL_HOST in url and tag != "a":  # a link waits for a click and shows where it goes
            self.problems.append(f"<{tag} {name}={value[:60]!r}> pointing at {EVIL_HOST}")
        if scheme == "data" and not url.startswith("data:image/"):
            self.problems.append(f"<{tag} {name}={value[:60]!r}> with a data: document")

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_style and ("@import" in data or "url(" in data):
            self.problems.append(f"<style> loading {data[:60]!r}")


def live_html(markup: str) -> list[str]:
    """What in ``markup`` would run, load from another host or follow a script URL ([] when nothing)."""
    reader = _Reader()
    reader.feed(markup)
    reader.close()
    return reader.problems


def shown_text(markup: str) -> str:
    """The text a person reads in ``markup`` (tags dropped, entities decoded)."""
    reader = _Reader()
    reader.feed(markup)
    reader.close()
    return "".join(reader.text)


def live_markdown(text: str) -> list[str]:
    """What in markdown ``text``, rendered with its raw HTML kept (as JupyterLab does), would come alive."""
    import mistune

    return live_html(str(mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text)))


def code_blocks(text: str) -> list[str]:
    """The contents of every code block (fenced or indented) that markdown ``text`` really holds."""
    import mistune

    tokens = mistune.create_markdown(renderer=None, plugins=["table", "strikethrough"])(text)
    found: list[str] = []

    def walk(items: Any) -> None:
        for token in items:
            if token.get("type") == "block_code":
                found.append(str(token.get("raw", "")))
            walk(token.get("children") or [])

    walk(tokens)
    return found
