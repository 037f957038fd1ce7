"""``GET /betty/api/docs/NAME``: one of Betty's pages, for a panel that links to it (the chat without a model)."""

from __future__ import annotations

from typing import Any

from tornado import web

from .base import BettyHandler, refused
from .model_setup import docs_page


class DocsHandler(BettyHandler):
    """``GET /betty/api/docs/NAME``: one of Betty's pages as plain text (markdown)."""

    @web.authenticated
    def get(self, name: str) -> None:
        """The page's text; 404 for a page Betty does not serve or this installation lacks."""
        path = docs_page(name)
        if path is None:
            raise refused(404, f"Betty serves no page called {name[:40]!r} here")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.finish(path.read_bytes())


handlers: list[tuple[str, type[Any]]] = [(r"/betty/api/docs/([a-z]{1,40})", DocsHandler)]
