"""The notebook in front of the person: where the context chip's facts come from, and where a chat message's
active notebook is remembered for the agent's notebook tools.

Paths come from the panel, named from Jupyter's root; each is resolved where it really is
(symbolic links followed) and must lie inside the workspace, or it is not used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tornado import web

from .base import BettyHandler, refused
from .repository import branch as git_branch
from .repository import find_repository, has_changes

if TYPE_CHECKING:
    from ..agent.bulletin import ContextBulletin
    from .models import WorkingPlace
    from .services import BettyServices

def server_root(settings: dict[str, object], services: "BettyServices") -> Path:
    """Jupyter's root folder, where the panel's paths start."""
    return Path(str(settings.get("server_root_dir") or services.workspace.root)).expanduser()


def workspace_path(root: Path, workspace: Path, path: str) -> str | None:
    """``path`` (from Jupyter's ``root``) as the workspace names it, where it really is; None outside the workspace."""
    try:
        return (root / path).resolve().relative_to(workspace.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def remember_context(settings: dict[str, object], services: "BettyServices", session_id: str,
                     context: "ContextBulletin | None") -> None:
    """The session's active notebook is now the one ``context`` names (none when it names none, or none inside)."""
    # lazy: the table lives in the ledger's database (SQLite); the server's extension loads without it
    from ..experiments.notebook_changes import ActiveNotebook, ActiveNotebooks

    workspace = services.workspace
    active = None
    if context is not None and context.notebook is not None:
        inside = workspace_path(server_root(settings, services), workspace.root, context.notebook)
        if inside:
            active = ActiveNotebook(notebook=inside, shown_path=context.notebook, cell=context.cell)
    ActiveNotebooks(workspace.ledger_path).set(session_id, active)


class WorkingPlaceHandler(BettyHandler):
    """``GET notebooks/context?path=…``: a notebook's folder, and its git branch and whether it has uncommitted work."""

    @web.authenticated
    async def get(self) -> None:
        """``{directory, branch, dirty}``; 400 for a path outside the workspace."""
        path = self.query("path") or ""
        root = server_root(self.settings, self.services)
        inside = workspace_path(root, self.services.workspace.root, path)
        if inside is None or not path.endswith(".ipynb"):
            raise refused(400, f"{path[:200]!r} is not a notebook inside Betty's workspace")
        folder = (root / path).resolve().parent
        directory = Path(path).parent.as_posix()
        repository = find_repository(folder, self.services.workspace.root)
        branch = None if repository is None else git_branch(repository)
        dirty = None if repository is None or branch is None else await has_changes(repository)
        place: WorkingPlace = {"directory": "" if directory == "." else directory, "branch": branch, "dirty": dirty}
        self.answer(place)


class ChangeResultHandler(BettyHandler):
    """``POST notebooks/changes/{id}``: the panel says how it applied an approved cell change; the tool tells the model."""

    @web.authenticated
    def post(self, change_id: str) -> None:
        """``{}``; 400 for a body that is not ``{result}``."""
        # lazy: the table lives in the ledger's database (SQLite); the server's extension loads without it
        from ..experiments.notebook_changes import NotebookChanges
        from .models import ChangeResultRequest

        result = self.body(ChangeResultRequest).result
        NotebookChanges(self.services.workspace.ledger_path).report(change_id[:100], result)
        self.answer({})


handlers = [
    (r"/betty/api/notebooks/context", WorkingPlaceHandler),
    (r"/betty/api/notebooks/changes/(?P<change_id>[^/]+)", ChangeResultHandler),
]
"""The context chip's route, and the panel's word on an applied change."""
