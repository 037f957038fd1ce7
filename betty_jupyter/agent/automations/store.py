"""The automation store: definitions, webhook secrets and runs with leases, in SQLite under ``.betty/``.

Like the experiment ledger, every call opens its own connection, so two processes can share
the file. A run is ``queued`` until a runner claims it: then it is ``running`` with an owner
and a lease the owner's heartbeat extends. A lease that ran out means its server died: the
sweeper (:meth:`AutomationStore.sweep`) puts the run back in the queue, so the next runner
resumes it. A run ends ``done``, ``failed``, ``breaker`` (a circuit breaker tripped; ``code``
says which) or ``killed``; runs that fail or trip a breaker ``max_failures`` times in a row
suspend their automation (``error-suspended``) until a person resumes it.

Webhook secrets are kept only as a salted SHA-256 hash and compared in constant time. A
delivery id is unique per automation: the same delivery arriving twice is one run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Iterator

from ...storage import connect
from .definitions import DIGEST, DIGEST_ID, Automation, AutomationSpec, Run, new_id, session_id_of

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS automations (
        id TEXT PRIMARY KEY,
        spec TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'idle',
        failures INTEGER NOT NULL DEFAULT 0,
        secret_salt BLOB,
        secret_hash BLOB,
        next_due REAL,
        created REAL NOT NULL,
        updated REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS runs (
        id TEXT PRIMARY KEY,
        automation TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'queued',
        trigger TEXT NOT NULL,
        delivery_id TEXT,
        payload TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        owner TEXT,
        lease_until REAL NOT NULL DEFAULT 0,
        heartbeat REAL,
        tokens INTEGER NOT NULL DEFAULT 0,
        iterations INTEGER NOT NULL DEFAULT 0,
        seconds REAL NOT NULL DEFAULT 0,
        code TEXT,
        result TEXT NOT NULL DEFAULT '',
        kill_requested INTEGER NOT NULL DEFAULT 0,
        created REAL NOT NULL,
        started REAL,
        ended REAL,
        UNIQUE (automation, delivery_id)
    )""",
    "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_AUTOMATION = "id, spec, status, failures, secret_hash IS NOT NULL, next_due, created, updated"
_RUN = ("id, automation, status, trigger, delivery_id, payload, attempts, owner, lease_until, heartbeat, tokens, "
        "iterations, seconds, code, result, kill_requested, created, started, ended")
_DUMMY_SALT = b"\0" * 16


def store_path(state: Path) -> Path:
    """The store's file under a workspace's ``.betty/``."""
    return state / "automations.sqlite"


class AutomationStore:
    """SQLite access to automations and their runs."""

    def __init__(self, path: Path, *, max_failures: int = 3, max_attempts: int = 3) -> None:
        self.path = path
        self.max_failures = max_failures
        """Runs failing (or tripping a breaker) this many times in a row suspend the automation."""
        self.max_attempts = max_attempts
        """A run whose server died this many times is failed rather than resumed again."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    @classmethod
    def existing(cls, path: Path) -> "AutomationStore | None":
        """The store at ``path`` when its file exists (nothing is created otherwise)."""
        return cls(path) if path.is_file() else None

    def _connect(self) -> "AbstractContextManager[sqlite3.Connection]":
        return connect(self.path)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # ----- automations --------------------------------------------------------------------------
    def create(self, spec: AutomationSpec, ident: str | None = None,
               status: str = "idle") -> tuple[Automation, str | None]:
        """Store a new automation; its webhook secret (shown once) when its trigger is a webhook."""
        ident = ident or new_id(spec.name)
        secret, salt, digest = _new_secret() if spec.trigger.kind == "webhook" else (None, None, None)
        now = time.time()
        with self._connect() as db:
            db.execute("INSERT INTO automations (id, spec, status, secret_salt, secret_hash, created, updated) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", (ident, spec.model_dump_json(), status, salt, digest, now, now))
        return self._must(ident), secret

    def replace(self, ident: str, spec: AutomationSpec) -> tuple[Automation, str | None]:
        """A new definition for ``ident``; a secret when it just became a webhook (none is kept otherwise)."""
        with self._transaction() as db:
            row = db.execute("SELECT secret_hash IS NOT NULL FROM automations WHERE id = ?", (ident,)).fetchone()
            secret = None
            if spec.trigger.kind != "webhook":
                db.execute("UPDATE automations SET secret_salt = NULL, secret_hash = NULL WHERE id = ?", (ident,))
            elif row is not None and not row[0]:
                secret, salt, digest = _new_secret()
                db.execute("UPDATE automations SET secret_salt = ?, secret_hash = ? WHERE id = ?",
                           (salt, digest, ident))
            db.execute("UPDATE automations SET spec = ?, next_due = NULL, updated = ? WHERE id = ?",
                       (spec.model_dump_json(), time.time(), ident))
        return self._must(ident), secret

    def get(self, ident: str) -> Automation | None:
        """The automation ``ident``, or None."""
        with self._connect() as db:
            row = db.execute(f"SELECT {_AUTOMATION} FROM automations WHERE id = ?", (ident,)).fetchone()
        return _automation(row) if row else None

    def _must(self, ident: str) -> Automation:
        automation = self.get(ident)
        assert automation is not None, ident
        return automation

    def all(self) -> list[Automation]:
        """Every automation, oldest first."""
        with self._connect() as db:
            rows = db.execute(f"SELECT {_AUTOMATION} FROM automations ORDER BY created, id").fetchall()
        return [_automation(row) for row in rows]

    def delete(self, ident: str) -> bool:
        """Forget the automation and its runs; False when there was none."""
        with self._transaction() as db:
            gone = db.execute("DELETE FROM automations WHERE id = ?", (ident,)).rowcount == 1
            db.execute("DELETE FROM runs WHERE automation = ?", (ident,))
        return gone

    def pause(self, ident: str) -> Automation | None:
        """Hold the automation: its triggers stop firing and its running run waits before its next tool call."""
        with self._connect() as db:
            db.execute("UPDATE automations SET status = 'paused', updated = ? WHERE id = ?", (time.time(), ident))
        return self.get(ident)

    def resume(self, ident: str) -> Automation | None:
        """Let a paused or suspended automation run again (its failure count starts over)."""
        with self._connect() as db:
            db.execute("UPDATE automations SET failures = 0, updated = ?, status = CASE WHEN EXISTS (SELECT 1 FROM "
                       "runs WHERE automation = ? AND status = 'running') THEN 'active' ELSE 'idle' END WHERE id = ?",
                       (time.time(), ident, ident))
        return self.get(ident)

    def verify_secret(self, ident: str, secret: str) -> bool:
        """Whether ``secret`` is the webhook secret of ``ident``, compared in constant time (unknown ids too)."""
        with self._connect() as db:
            row = db.execute("SELECT secret_salt, secret_hash FROM automations WHERE id = ?", (ident,)).fetchone()
        salt, digest = (row[0], row[1]) if row and row[1] is not None else (_DUMMY_SALT, None)
        given = _hash(salt, secret)
        return hmac.compare_digest(given, digest or bytes(len(given))) and digest is not None

    def install_digest(self) -> None:
        """Add the daily digest, paused, the first time the store is used (never again once deleted)."""
        self.install_paused(DIGEST_ID, DIGEST, "digest_installed")

    def install_paused(self, ident: str, spec: AutomationSpec, key: str | None = None) -> None:
        """Add the built-in automation ``ident``, paused (off until a person resumes it), once: never again once
        deleted. ``key`` names the installation in the store's meta table (default ``installed:<ident>``)."""
        key = key or f"installed:{ident}"
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM meta WHERE key = ?", (key,)).fetchone():
                return
            db.execute("INSERT INTO meta (key, value) VALUES (?, '1')", (key,))
            if not db.execute("SELECT 1 FROM automations WHERE id = ?", (ident,)).fetchone():
                now = time.time()
                db.execute("INSERT INTO automations (id, spec, status, created, updated) VALUES (?, ?, 'paused', ?, ?)",
                           (ident, spec.model_dump_json(), now, now))

    def set_next_due(self, ident: str, when: float | None) -> None:
        """When the schedule of ``ident`` fires next."""
        with self._connect() as db:
            db.execute("UPDATE automations SET next_due = ? WHERE id = ?", (when, ident))

    # ----- runs ---------------------------------------------------------------------------------
    def enqueue(self, ident: str, trigger: str, payload: Any = None,
                delivery_id: str | None = None) -> tuple[Run, bool]:
        """Queue a run of ``ident``; (the run, True) — or (the earlier run, False) for a delivery id seen before."""
        run_id = f"r-{secrets.token_hex(6)}"
        with self._connect() as db:
            added = db.execute(
                "INSERT OR IGNORE INTO runs (id, automation, trigger, delivery_id, payload, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, ident, trigger, delivery_id, json.dumps(payload, default=str), time.time()),
            ).rowcount == 1
            if not added:
                row = db.execute(f"SELECT {_RUN} FROM runs WHERE automation = ? AND delivery_id = ?",
                                 (ident, delivery_id)).fetchone()
                return _run(row), False
        return self._must_run(run_id), True

    def run(self, run_id: str) -> Run | None:
        """One run, or None."""
        with self._connect() as db:
            row = db.execute(f"SELECT {_RUN} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def _must_run(self, run_id: str) -> Run:
        run = self.run(run_id)
        assert run is not None, run_id
        return run

    def runs(self, ident: str | None = None, status: str | None = None, limit: int = 100) -> list[Run]:
        """Runs (of one automation, in one status, when given), newest first."""
        where, args = _where(("automation", ident), ("status", status))
        with self._connect() as db:
            rows = db.execute(f"SELECT {_RUN} FROM runs {where} ORDER BY created DESC, rowid DESC LIMIT ?",
                              (*args, limit)).fetchall()
        return [_run(row) for row in rows]

    def claim(self, owner: str, lease_seconds: float) -> list[Run]:
        """Take the oldest queued run of each automation that may run now (not paused, none running)."""
        now = time.time()
        with self._transaction() as db:
            rows = db.execute(
                "SELECT r.id, r.automation FROM runs r JOIN automations a ON a.id = r.automation "
                "WHERE r.status = 'queued' AND a.status IN ('idle', 'active') AND NOT EXISTS "
                "(SELECT 1 FROM runs o WHERE o.automation = r.automation AND o.status = 'running') "
                "ORDER BY r.created, r.rowid").fetchall()
            chosen = list({automation: run_id for run_id, automation in reversed(rows)}.items())
            for automation, run_id in chosen:
                db.execute("UPDATE runs SET status = 'running', owner = ?, lease_until = ?, heartbeat = ?, "
                           "attempts = attempts + 1, started = COALESCE(started, ?) WHERE id = ?",
                           (owner, now + lease_seconds, now, now, run_id))
                db.execute("UPDATE automations SET status = 'active' WHERE id = ? AND status = 'idle'", (automation,))
        return [self._must_run(run_id) for _, run_id in chosen]

    def renew(self, run_id: str, owner: str, lease_seconds: float, usage: dict[str, float]) -> Run | None:
        """The owner's heartbeat: extend the lease, record what the run used; None when the lease was lost."""
        now = time.time()
        with self._connect() as db:
            held = db.execute(
                "UPDATE runs SET lease_until = ?, heartbeat = ?, tokens = ?, iterations = ?, seconds = ? "
                "WHERE id = ? AND owner = ? AND status = 'running'",
                (now + lease_seconds, now, int(usage["tokens"]), int(usage["iterations"]), usage["seconds"], run_id,
                 owner),
            ).rowcount == 1
        return self.run(run_id) if held else None

    def finish(self, run_id: str, owner: str, status: str, usage: dict[str, float], code: str | None = None,
               result: str = "") -> bool:
        """End a run the owner holds; the automation's failure count and status follow. False when it was lost."""
        with self._transaction() as db:
            row = db.execute("SELECT automation FROM runs WHERE id = ? AND owner = ? AND status = 'running'",
                             (run_id, owner)).fetchone()
            if row is None:
                return False
            db.execute("UPDATE runs SET status = ?, code = ?, result = ?, tokens = ?, iterations = ?, seconds = ?, "
                       "ended = ?, owner = NULL, lease_until = 0 WHERE id = ?",
                       (status, code, result, int(usage["tokens"]), int(usage["iterations"]), usage["seconds"],
                        time.time(), run_id))
            self._after_run(db, row[0], status)
        return True

    def _after_run(self, db: sqlite3.Connection, ident: str, status: str) -> None:
        if status == "done":
            db.execute("UPDATE automations SET failures = 0 WHERE id = ?", (ident,))
        elif status in ("failed", "breaker"):
            db.execute("UPDATE automations SET failures = failures + 1 WHERE id = ?", (ident,))
        db.execute("UPDATE automations SET status = CASE WHEN status IN ('paused', 'error-suspended') THEN status "
                   "WHEN failures >= ? THEN 'error-suspended' ELSE 'idle' END, updated = ? WHERE id = ?",
                   (self.max_failures, time.time(), ident))

    def release(self, owner: str) -> list[str]:
        """A clean stop: the runs ``owner`` holds go back to the queue, for the next runner to resume at once."""
        with self._transaction() as db:
            ids = [row[0] for row in db.execute("SELECT id FROM runs WHERE owner = ? AND status = 'running'", (owner,))]
            db.execute("UPDATE runs SET status = 'queued', owner = NULL, lease_until = 0 "
                       "WHERE owner = ? AND status = 'running'", (owner,))
        return ids

    def sweep(self, keep: str | None = None) -> list[str]:
        """Runs left ``running`` by a dead server (lease run out) go back to the queue; their ids.

        ``keep`` names the sweeper's own owner: its runs are alive, however late their heartbeat.
        A run killed meanwhile ends ``killed``; one whose server died ``max_attempts`` times ends
        ``failed`` rather than taking another server down with it.
        """
        now = time.time()
        with self._transaction() as db:
            rows = db.execute("SELECT id, automation, kill_requested, attempts FROM runs "
                              "WHERE status = 'running' AND lease_until < ? AND owner IS NOT ?",
                              (now, keep)).fetchall()
            for run_id, ident, killed, attempts in rows:
                if killed or attempts >= self.max_attempts:
                    status, code = ("killed", None) if killed else ("failed", "resumed_too_often")
                    db.execute("UPDATE runs SET status = ?, code = ?, ended = ?, owner = NULL, lease_until = 0, "
                               "result = ? WHERE id = ?", (status, code, now, _swept_result(status, attempts), run_id))
                    self._after_run(db, ident, status)
                else:
                    db.execute("UPDATE runs SET status = 'queued', owner = NULL, lease_until = 0 WHERE id = ?",
                               (run_id,))
        return [row[0] for row in rows]

    def request_kill(self, ident: str) -> list[str]:
        """The kill switch: queued runs of ``ident`` end ``killed`` now, running ones are marked; their ids."""
        now = time.time()
        with self._transaction() as db:
            ids = [row[0] for row in db.execute(
                "SELECT id FROM runs WHERE automation = ? AND status IN ('queued', 'running')", (ident,))]
            db.execute("UPDATE runs SET status = 'killed', ended = ?, result = 'killed before it started' "
                       "WHERE automation = ? AND status = 'queued'", (now, ident))
            db.execute("UPDATE runs SET kill_requested = 1 WHERE automation = ? AND status = 'running'", (ident,))
        return ids

    def status(self, ident: str) -> str | None:
        """The automation's status now (None once it is deleted)."""
        with self._connect() as db:
            row = db.execute("SELECT status FROM automations WHERE id = ?", (ident,)).fetchone()
        return str(row[0]) if row else None


def _new_secret() -> tuple[str, bytes, bytes]:
    secret = secrets.token_urlsafe(32)
    salt = os.urandom(16)
    return secret, salt, _hash(salt, secret)


def _hash(salt: bytes, secret: str) -> bytes:
    return hashlib.sha256(salt + secret.encode("utf-8", "surrogatepass")).digest()


def _swept_result(status: str, attempts: int) -> str:
    if status == "killed":
        return "killed while its server was down"
    return f"its server stopped {attempts} times during this run; it was not resumed again"


def _where(*pairs: tuple[str, str | None]) -> tuple[str, tuple[str, ...]]:
    given = [(column, value) for column, value in pairs if value is not None]
    if not given:
        return "", ()
    return "WHERE " + " AND ".join(f"{column} = ?" for column, _ in given), tuple(value for _, value in given)


def _automation(row: tuple[Any, ...]) -> Automation:
    ident, spec, status, failures, webhook, next_due, created, updated = row
    return Automation(**json.loads(spec), id=ident, status=status, failures=failures, webhook=bool(webhook),
                      next_due=next_due, created=created, updated=updated)


def _run(row: tuple[Any, ...]) -> Run:
    values = dict(zip((name.strip() for name in _RUN.split(",")), row))
    values["payload"] = json.loads(values["payload"]) if values["payload"] else None
    values["kill_requested"] = bool(values["kill_requested"])
    return Run(**values, session_id=session_id_of(values["id"]))
