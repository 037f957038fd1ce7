"""The workspace wiki: markdown pages with YAML frontmatter that Betty and a person share.

See ``docs/wiki.md`` for the page format, the auto markers and the rules for page names.

The names below load with their module on first use: a part that needs one module of the wiki (the action
log's durable appends in :mod:`.files`) does not load PyYAML and the page store with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .page import Page, parse_page
    from .regions import AUTO_END, AUTO_START
    from .schema import PAGE_TYPES, REQUIRED_FIELDS, check_frontmatter, lint
    from .seed import InitReport, init_workspace, seed_dir
    from .store import INDEX, LOG, WikiStore

_HOMES = {
    "Page": "page", "parse_page": "page", "AUTO_END": "regions", "AUTO_START": "regions", "PAGE_TYPES": "schema",
    "REQUIRED_FIELDS": "schema", "check_frontmatter": "schema", "lint": "schema", "InitReport": "seed",
    "init_workspace": "seed", "seed_dir": "seed", "INDEX": "store", "LOG": "store", "WikiStore": "store",
}
"""Which module of the wiki each of its public names comes from."""

__all__ = [
    "AUTO_END", "AUTO_START", "INDEX", "LOG", "PAGE_TYPES", "REQUIRED_FIELDS", "InitReport", "Page", "WikiStore",
    "check_frontmatter", "init_workspace", "lint", "parse_page", "seed_dir",
]


def __getattr__(name: str) -> Any:
    """A public name of the wiki, its module loaded on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
