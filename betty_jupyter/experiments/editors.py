"""Experiment notebooks a person has open in JupyterLab: Betty never rewrites their files meanwhile.

The side panel says which notebooks its JupyterLab has open, every few seconds and whenever one
opens or closes; each answer holds a short lease (:data:`LEASE_SECONDS`) in the ledger's
database, so every process that writes notebooks (the server's watcher, ``betty watch``,
``betty experiments repair``) sees it. A JupyterLab that went away without a word lets its
leases run out. While a notebook is open, Betty's status goes into the open document through
the panel, and the person's next save writes it together with their own edits.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Iterable

from ..storage import connect

LEASE_SECONDS = 30.0
"""How long one word from the panel keeps a notebook open (the panel renews it every 10 s)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS open_notebooks (
    notebook TEXT NOT NULL,
    holder TEXT NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (notebook, holder)
)
"""


class OpenNotebooks:
    """The leases of open notebooks, by their path relative to the workspace root (``notebooks/experiments/….ipynb``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(_SCHEMA)

    def _connect(self) -> "AbstractContextManager[sqlite3.Connection]":
        return connect(self.path)

    def hold(self, holder: str, notebooks: Iterable[str], seconds: float = LEASE_SECONDS) -> None:
        """``holder`` (one JupyterLab page) has exactly ``notebooks`` open now: renew their leases, drop its others."""
        until = time.time() + seconds
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM open_notebooks WHERE holder = ? OR until < ?", (holder, time.time()))
            db.executemany("INSERT OR REPLACE INTO open_notebooks (notebook, holder, until) VALUES (?, ?, ?)",
                           [(notebook, holder, until) for notebook in set(notebooks)])
            db.execute("COMMIT")

    def open_now(self) -> set[str]:
        """Every notebook some JupyterLab holds open now."""
        with self._connect() as db:
            rows = db.execute("SELECT DISTINCT notebook FROM open_notebooks WHERE until >= ?", (time.time(),)).fetchall()
        return {row[0] for row in rows}

    def is_open(self, notebook: str) -> bool:
        """Whether any JupyterLab holds ``notebook`` open now."""
        with self._connect() as db:
            row = db.execute("SELECT 1 FROM open_notebooks WHERE notebook = ? AND until >= ?",
                             (notebook, time.time())).fetchone()
        return row is not None
