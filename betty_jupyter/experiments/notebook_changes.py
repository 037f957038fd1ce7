"""The notebook in front of the person, and the cell changes Betty was approved to make in it.

The side panel sends the active notebook with each chat message (in the context bulletin the
person sees); :class:`ActiveNotebooks` keeps it per chat session, so the agent's notebook tools
work on the notebook the person has in front of them and never on one the model names.

A change to a notebook JupyterLab holds open must reach the open document, not the file (the
person's unsaved typing would be lost at their next save, or would overwrite Betty's). Such a
change waits in :class:`NotebookChanges` until the panel takes it, with its next word about the
open notebooks, and applies it to the document; a notebook nobody has open is written directly.
Both tables live in the ledger's database, beside the open notebooks' leases, so every process
sees them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Literal

from ..errors import ExperimentError
from ..storage import connect

ChangeAction = Literal["insert", "replace", "run"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS active_notebooks (
    session TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    shown_path TEXT NOT NULL,
    cell INTEGER
);
CREATE TABLE IF NOT EXISTS notebook_changes (
    id TEXT PRIMARY KEY,
    notebook TEXT NOT NULL,
    change TEXT NOT NULL,
    added REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS notebook_change_results (
    id TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    added REAL NOT NULL
);
"""


@dataclass(frozen=True)
class ActiveNotebook:
    """The notebook a chat session's person had active when they last sent a message."""

    notebook: str
    """Its path relative to the workspace root (``analysis/train.ipynb``)."""
    shown_path: str
    """Its path as JupyterLab names it (from Jupyter's root): the panel finds its tab by it."""
    cell: int | None
    """The selected cell (0-based), when the panel said."""


@dataclass(frozen=True)
class CellChange:
    """One approved change for an open notebook: insert or replace a cell, or run one in the person's kernel.

    ``before`` is the cell's source the person was shown (replace and run): the panel changes the
    cell only while it still holds exactly that (and is of ``cell_type``), so nothing the person
    typed since is lost. ``sha256`` (run) is the digest of the approved code: the panel runs the
    cell only while its source has exactly that digest, so nothing but the approved code runs.
    """

    id: str
    path: str
    """The notebook as JupyterLab names it."""
    action: ChangeAction
    index: int
    source: str
    cell_type: str = "code"
    before: str | None = None
    sha256: str | None = None

    def as_json(self) -> dict[str, object]:
        """What the panel receives."""
        return asdict(self)


def source_digest(source: str) -> str:
    """The sha256 of a cell's source (its UTF-8 bytes), as the card shows it and the panel checks it."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def new_change_id() -> str:
    """A fresh name for one change."""
    return "change-" + uuid.uuid4().hex[:16]


class _Table:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> "AbstractContextManager[sqlite3.Connection]":
        return connect(self.path)


class ActiveNotebooks(_Table):
    """The active notebook of each chat session, as the panel last said (the ledger's database at ``path``)."""

    def set(self, session_id: str, active: ActiveNotebook | None) -> None:
        """``session_id``'s person now has ``active`` in front of them (None: no notebook, or they sent none)."""
        with self._connect() as db:
            db.execute("DELETE FROM active_notebooks WHERE session = ?", (session_id,))
            if active is not None:
                db.execute("INSERT INTO active_notebooks (session, notebook, shown_path, cell) VALUES (?, ?, ?, ?)",
                           (session_id, active.notebook, active.shown_path, active.cell))

    def get(self, session_id: str) -> ActiveNotebook:
        """The session's active notebook; ExperimentError saying how to give one when there is none."""
        with self._connect() as db:
            row = db.execute("SELECT notebook, shown_path, cell FROM active_notebooks WHERE session = ?",
                             (session_id,)).fetchone()
        if row is None:
            raise ExperimentError("no notebook is active in the panel: open the notebook, click into it, and send "
                                  "the message with its context chip")
        return ActiveNotebook(notebook=row[0], shown_path=row[1], cell=row[2])


class NotebookChanges(_Table):
    """Approved changes waiting for the panel that holds their notebook open (the ledger's database at ``path``)."""

    def add(self, notebook: str, change: CellChange) -> None:
        """Keep ``change`` for ``notebook`` (relative to the workspace root) until a panel takes it."""
        with self._connect() as db:
            db.execute("INSERT INTO notebook_changes (id, notebook, change, added) VALUES (?, ?, ?, ?)",
                       (change.id, notebook, json.dumps(change.as_json()), time.time()))

    def take(self, notebooks: Iterable[str]) -> list[CellChange]:
        """The changes waiting for any of ``notebooks``, oldest first; each is handed out once."""
        names = sorted(set(notebooks))
        if not names:
            return []
        marks = ",".join("?" * len(names))
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            rows = db.execute(f"SELECT id, change FROM notebook_changes WHERE notebook IN ({marks}) "
                              "ORDER BY added, rowid", names).fetchall()
            db.executemany("DELETE FROM notebook_changes WHERE id = ?", [(row[0],) for row in rows])
            db.execute("COMMIT")
        return [CellChange(**json.loads(row[1])) for row in rows]

    def waiting(self, change_id: str) -> bool:
        """Whether ``change_id`` still waits for a panel."""
        with self._connect() as db:
            return db.execute("SELECT 1 FROM notebook_changes WHERE id = ?", (change_id,)).fetchone() is not None

    def report(self, change_id: str, result: str) -> None:
        """The panel says how ``change_id`` went in the open document (``replaced``, ``not run: …``)."""
        with self._connect() as db:
            db.execute("DELETE FROM notebook_change_results WHERE added < ?", (time.time() - 3600,))
            db.execute("INSERT OR REPLACE INTO notebook_change_results (id, result, added) VALUES (?, ?, ?)",
                       (change_id, result, time.time()))

    def result(self, change_id: str) -> str | None:
        """What the panel said of ``change_id``, once it did (None before); said once."""
        with self._connect() as db:
            row = db.execute("SELECT result FROM notebook_change_results WHERE id = ?", (change_id,)).fetchone()
            if row is not None:
                db.execute("DELETE FROM notebook_change_results WHERE id = ?", (change_id,))
        return None if row is None else str(row[0])

    def withdraw(self, change_id: str) -> bool:
        """Take back a change no panel took; False when one already did."""
        with self._connect() as db:
            return db.execute("DELETE FROM notebook_changes WHERE id = ?", (change_id,)).rowcount > 0
