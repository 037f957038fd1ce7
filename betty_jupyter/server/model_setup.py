"""What a server without a chat model tells the panel: the setting, the file it belongs in, the restart, the page.

The page is served by ``GET /betty/api/docs/llm`` (:mod:`.docs`), from the wheel
(``betty_jupyter/docs``, ``force-include`` in ``pyproject.toml``) or from a source checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config import user_llm_file

if TYPE_CHECKING:
    from .models import ModelSetup

_PACKAGE = Path(__file__).resolve().parents[1]
DOCS_LOCATIONS = (_PACKAGE / "docs", _PACKAGE.parent / "docs")
"""Where Betty's pages are looked for: inside an installed wheel, then in a source checkout."""
SERVED_PAGES = {"llm": "llm.md"}
"""The pages ``GET /betty/api/docs/NAME`` serves, by name."""
EXAMPLE_SETTING = '{"BettyConfig": {"llm": {"base_url": "http://localhost:11434/v1", "model": "qwen2.5:14b"}}}'
"""A whole setting to start from (Ollama's address and a model it serves)."""


def no_model_setup() -> "ModelSetup":
    """How to configure a chat model on this server: the person's own ``betty_llm.json``; JupyterLab reads it when
    it starts."""
    return {"setting": EXAMPLE_SETTING, "config_file": str(user_llm_file()), "restart": True,
            "docs": "docs/llm.md", "docs_url": "betty/api/docs/llm"}


def docs_page(name: str) -> Path | None:
    """The file of Betty's page ``name`` (one of :data:`SERVED_PAGES`), or None when this installation lacks it."""
    file = SERVED_PAGES.get(name)
    if file is None:
        return None
    return next((base / file for base in DOCS_LOCATIONS if (base / file).is_file()), None)
