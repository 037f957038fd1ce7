"""Where a researcher's project keeps its wiki, experiment notebooks and Betty's own state."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Workspace:
    """A project directory: ``wiki/``, ``notebooks/experiments/`` and ``.betty/``."""

    root: Path

    @classmethod
    def at(cls, root: str | Path) -> "Workspace":
        """The workspace at ``root`` (made absolute)."""
        return cls(Path(root).expanduser().absolute())

    @property
    def wiki(self) -> Path:
        """The wiki's root directory."""
        return self.root / "wiki"

    @property
    def notebooks(self) -> Path:
        """Where experiment notebooks live."""
        return self.root / "notebooks" / "experiments"

    @property
    def state(self) -> Path:
        """Betty's own state (the watcher's database, the action log)."""
        return self.root / ".betty"

    @property
    def ledger_path(self) -> Path:
        """The SQLite database of recorded experiments and watched jobs."""
        return self.state / "experiments.sqlite"

    def notebook_path(self, slug: str) -> Path:
        """The notebook of the experiment called ``slug``."""
        return self.notebooks / f"{slug}.ipynb"

    @staticmethod
    def page_name(slug: str) -> str:
        """The wiki page of the experiment called ``slug``."""
        return f"experiments/{slug}.md"


def project_holding(start: Path) -> Path | None:
    """The project directory holding ``start``: the nearest one with ``wiki/index.md`` or ``.betty/``; None outside."""
    start = start.absolute()
    for folder in (start, *start.parents):
        if (folder / "wiki" / "index.md").exists() or (folder / ".betty").is_dir():
            return folder
    return None


def find_workspace(start: Path) -> Path:
    """The project directory holding ``start`` (:func:`project_holding`), else ``start``."""
    return project_holding(start) or start.absolute()
