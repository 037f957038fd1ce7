"""``GET /betty/api/docs/llm``: Betty's page about chat models, for the panel's chat without a model to link to."""

from __future__ import annotations

from typing import Any

from tornado import web

from .base import BettyHandler, refused
from .model_setup import docs_page


class DocsHandler(BettyHandler):
    """``GET /betty/api/docs/llm``: Betty's page about chat models as plain text (markdown)."""

    @web.authenticated
    def get(self) -> None:
        """The page's text; 404 where this installation lacks it."""
        path = docs_page("llm")
        if path is None:
            raise refused(404, "this installation of Betty lacks its page docs/llm.md")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.finish(path.read_bytes())


handlers: list[tuple[str, type[Any]]] = [(r"/betty/api/docs/llm", DocsHandler)]
