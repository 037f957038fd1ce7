"""The seed wiki Betty starts a workspace with, and ``betty init``'s work.

The seed lives in the repository's top-level ``wiki/`` folder. A wheel ships it as
``betty_jupyter/seed_wiki`` (``force-include`` in ``pyproject.toml``); an editable install
reads the repository's folder directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WikiError
from .store import WikiStore

_PACKAGE = Path(__file__).resolve().parents[1]
SEED_LOCATIONS = (_PACKAGE / "seed_wiki", _PACKAGE.parent / "wiki")
"""Where the seed is looked for: inside an installed wheel, then in a source checkout."""


def seed_dir() -> Path:
    """The folder holding the seed wiki's pages."""
    for candidate in SEED_LOCATIONS:
        if (candidate / "SCHEMA.md").is_file():
            return candidate
    raise WikiError("Betty's seed wiki is missing from this installation; reinstall betty-jupyter")


def seed_pages(source: Path | None = None) -> list[str]:
    """The names of the seed's pages (every ``.md`` file, hidden ones excluded), sorted."""
    source = source or seed_dir()
    return sorted(path.relative_to(source).as_posix() for path in source.rglob("*.md")
                  if not any(part.startswith(".") for part in path.relative_to(source).parts))


@dataclass(frozen=True)
class InitReport:
    """What ``betty init`` did: the workspace, the pages it added and those a person already had."""

    workspace: Path
    wiki: Path
    added: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def init_workspace(directory: str | Path) -> InitReport:
    """Give ``directory`` a wiki (seed pages it lacks; none overwritten), ``notebooks/experiments/`` and ``.betty/``."""
    workspace = Path(directory).absolute()
    source = seed_dir()
    try:
        (workspace / "wiki").mkdir(parents=True, exist_ok=True)
        (workspace / "notebooks" / "experiments").mkdir(parents=True, exist_ok=True)
        (workspace / ".betty").mkdir(exist_ok=True)
    except OSError as exc:
        raise WikiError(f"cannot set up a workspace in {workspace}: {exc.strerror or exc}") from exc
    store = WikiStore(workspace / "wiki")
    report = InitReport(workspace, workspace / "wiki")
    for name in seed_pages(source):
        text = (source / name).read_bytes().decode("utf-8")
        (report.added if store.add_missing(name, text) else report.kept).append(name)
    return report
