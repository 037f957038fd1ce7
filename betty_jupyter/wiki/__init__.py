"""The workspace wiki: markdown pages with YAML frontmatter that Betty and a person share.

See ``docs/wiki.md`` for the page format, the auto markers and the rules for page names.
"""

from __future__ import annotations

from .page import Page, parse_page
from .regions import AUTO_END, AUTO_START
from .schema import PAGE_TYPES, REQUIRED_FIELDS, check_frontmatter, lint
from .seed import InitReport, init_workspace, seed_dir
from .store import INDEX, LOG, WikiStore

__all__ = [
    "AUTO_END", "AUTO_START", "INDEX", "LOG", "PAGE_TYPES", "REQUIRED_FIELDS", "InitReport", "Page", "WikiStore",
    "check_frontmatter", "init_workspace", "lint", "parse_page", "seed_dir",
]
