"""Betty's SQLite files (the experiment ledger, the automations): one way to open them."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode (transactions are explicit), WAL, waiting up to 30 s for a lock."""
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=30000")
        yield db
    finally:
        db.close()
