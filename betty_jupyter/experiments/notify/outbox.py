"""Which ended job each target has been told about, kept in the experiment ledger, and the loop that tells them.

Every job's end is a row of the ledger's ``job_ends``, written in the same transaction as its state
(:meth:`~..ledger.Ledger.record_states`). For each target a delivery row says what became of that end:

* ``sending``: claimed by one process (``owner``, until ``lease_until``), in one ``BEGIN IMMEDIATE``
  transaction, so two servers on one workspace never both send it;
* ``sent``: it arrived; never sent again;
* ``waiting``: it failed and is tried again at ``next_try`` (30 s, 1 min, 2 min … up to an hour apart);
* ``gave_up``: it failed :data:`ATTEMPTS` times; ``betty notify list`` shows the last reason.

A target hears of the jobs that ended after it was added, however long the server was down meanwhile:
an end the watcher records on its first tick after a restart is delivered then, once. A process that
dies in the middle of a send leaves its row ``sending``; another tries it again when the lease ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...errors import BettyError
from ...storage import connect
from ..ledger import Ledger
from .message import Notice, notice
from .send import TIMEOUT, send
from .targets import Relay, Target, TargetBook, relay_from

if TYPE_CHECKING:
    from ..watcher import JobWatcher

log = logging.getLogger("betty_jupyter.notify")

ATTEMPTS = 10
"""How many times one notification is tried before Betty gives up on it."""
LEASE = 120.0
"""Seconds a claimed delivery stays its process's (a send takes at most ``send.TIMEOUT``)."""
BATCH = 50
"""The most ended jobs one pass takes per target."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    end_id INTEGER NOT NULL,
    target TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try REAL NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    error TEXT,
    sent REAL,
    PRIMARY KEY (end_id, target)
)
"""


@dataclass(frozen=True)
class Delivery:
    """One ended job for one target: what a pass sends."""

    end_id: int
    target: Target
    notice: Notice
    attempts: int


@dataclass(frozen=True)
class Outcome:
    """What became of a delivery: ``error`` is empty when it arrived."""

    delivery: Delivery
    error: str = ""
    retry_in: float | None = None

    def line(self) -> str:
        """One line for a person, without a secret."""
        what = f"job {self.delivery.notice.job_id} {self.delivery.notice.state} to {self.delivery.target.name} " \
               f"({self.delivery.target.where()})"
        if not self.error:
            return f"notified {what}"
        then = f"trying again in {self.retry_in:.0f} s" if self.retry_in is not None else "gave up"
        return f"could not notify {what}: {self.error}; {then}"


def backoff(attempts: int) -> float:
    """Seconds before try ``attempts + 1``: 30 s, doubling, at most an hour."""
    return min(30.0 * float(2 ** max(attempts - 1, 0)), 3600.0)


class Outbox:
    """The deliveries of one workspace's ledger."""

    def __init__(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path
        Ledger(ledger_path)  # its tables, job_ends among them
        with connect(ledger_path) as db:
            db.execute(_SCHEMA)

    def claim(self, targets: list[Target], owner: str) -> list[Delivery]:
        """Take every delivery that is due to ``targets``, in one transaction."""
        now = time.time()
        claimed = []
        with connect(self.ledger_path) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                for target in targets:
                    rows = db.execute(
                        "SELECT e.id, e.job_id, e.cluster, e.state, e.runtime, x.record, coalesce(d.attempts, 0) "
                        "FROM job_ends e JOIN experiments x ON x.slug = e.slug "
                        "LEFT JOIN deliveries d ON d.end_id = e.id AND d.target = ? "
                        "WHERE e.ended >= ? AND (d.end_id IS NULL OR (d.status = 'waiting' AND d.next_try <= ?) "
                        "OR (d.status = 'sending' AND d.lease_until < ?)) ORDER BY e.id LIMIT ?",
                        (target.name, target.added, now, now, BATCH)).fetchall()
                    for end_id, job_id, cluster, state, runtime, record, attempts in rows:
                        db.execute(
                            "INSERT INTO deliveries (end_id, target, status, attempts, owner, lease_until) "
                            "VALUES (?, ?, 'sending', ?, ?, ?) ON CONFLICT (end_id, target) DO UPDATE SET "
                            "status = 'sending', attempts = excluded.attempts, owner = excluded.owner, "
                            "lease_until = excluded.lease_until",
                            (end_id, target.name, attempts + 1, owner, now + LEASE))
                        diagnosis = _diagnosis(record)
                        claimed.append(Delivery(end_id, target, notice(job_id, cluster, state, runtime, diagnosis),
                                                attempts + 1))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return claimed

    def settle(self, outcomes: list[Outcome], owner: str) -> None:
        """Record what became of claimed deliveries, in one transaction (a lost claim records nothing)."""
        now = time.time()
        with connect(self.ledger_path) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                for outcome in outcomes:
                    status = "sent" if not outcome.error else "waiting" if outcome.retry_in is not None else "gave_up"
                    db.execute(
                        "UPDATE deliveries SET status = ?, next_try = ?, error = ?, sent = ?, owner = NULL, "
                        "lease_until = 0 WHERE end_id = ? AND target = ? AND owner = ?",
                        (status, now + (outcome.retry_in or 0), outcome.error or None, now if not outcome.error
                         else None, outcome.delivery.end_id, outcome.delivery.target.name, owner))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def standing(self, target: str) -> dict[str, Any]:
        """How ``target`` has fared: counts of sent, waiting and given-up deliveries, and the last error."""
        with connect(self.ledger_path) as db:
            counts = dict(db.execute("SELECT status, count(*) FROM deliveries WHERE target = ? GROUP BY status",
                                     (target,)).fetchall())
            last = db.execute("SELECT error FROM deliveries WHERE target = ? AND error IS NOT NULL "
                              "ORDER BY rowid DESC LIMIT 1", (target,)).fetchone()
        return {"sent": counts.get("sent", 0), "waiting": counts.get("waiting", 0) + counts.get("sending", 0),
                "gave_up": counts.get("gave_up", 0), "last_error": last[0] if last else None}

    def forget(self, target: str) -> None:
        """Drop a removed target's deliveries (a target added again by that name starts afresh)."""
        with connect(self.ledger_path) as db:
            db.execute("DELETE FROM deliveries WHERE target = ?", (target,))


def _diagnosis(record: str) -> Mapping[str, Any] | None:
    try:
        found = json.loads(record).get("diagnosis")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


class Notifier:
    """Delivers every ended job of a workspace to the person's targets, once each, retrying failures."""

    def __init__(self, ledger_path: Path, settings: Mapping[str, Any] | None = None, *,
                 book: TargetBook | None = None, report: Callable[[str], None] | None = None,
                 retry_after: Callable[[int], float] = backoff, timeout: float = TIMEOUT) -> None:
        self.outbox = Outbox(ledger_path)
        self.settings = dict(settings or {})
        self.book = book or TargetBook()
        self.report = report or log.warning
        """Where a failure's one line goes (the server's log)."""
        self.retry_after, self.timeout = retry_after, timeout
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wake = asyncio.Event()
        self._said = ""

    def wake(self, *_: object) -> None:
        """Look for something to deliver now (a job just ended)."""
        self._wake.set()

    def relay(self) -> Relay | None:
        """The site's mail relay, as configured."""
        return relay_from(self.settings)

    async def deliver(self) -> list[Outcome]:
        """One pass: claim what is due, send each (at once, each with its timeout), record what became of it."""
        try:
            targets = self.book.listed()
            relay = self.relay() if any(found.kind == "email" for found in targets) else None
        except BettyError as error:
            line = f"Betty sends no notifications: {error}"
            if line != self._said:  # said once, not every pass, until it changes
                self.report(line)
            self._said = line
            return []
        self._said = ""
        if not targets:
            return []
        claimed = await asyncio.to_thread(self.outbox.claim, targets, self.owner)
        if not claimed:
            return []
        outcomes = list(await asyncio.gather(*(self._send(delivery, relay) for delivery in claimed)))
        await asyncio.to_thread(self.outbox.settle, outcomes, self.owner)
        for outcome in outcomes:
            if outcome.error:
                self.report(outcome.line())
        return outcomes

    async def _send(self, delivery: Delivery, relay: Relay | None) -> Outcome:
        try:
            await asyncio.to_thread(send, delivery.target, delivery.notice, relay, self.timeout)
        except BettyError as error:
            retry = self.retry_after(delivery.attempts) if delivery.attempts < ATTEMPTS else None
            return Outcome(delivery, str(error), retry)
        return Outcome(delivery)

    async def run(self, stop: asyncio.Event, every: float = 30.0) -> None:
        """Deliver until ``stop``: when woken (a job ended), and every ``every`` seconds for retries and ends
        another process recorded. A failure is a line in the log, never the end of the loop."""
        while not stop.is_set():
            self._wake.clear()
            try:
                await self.deliver()
            except Exception:  # a damaged ledger or a bug: said once per pass, the watcher goes on
                log.exception("Betty's notifications failed")
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waits, timeout=every, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()



async def notify_ends(watcher: "JobWatcher", settings: Mapping[str, Any], stop: asyncio.Event) -> None:
    """Deliver the ends ``watcher`` records until ``stop``: at once when one of its jobs ends, and every half
    minute for retries (the server's and ``betty watch``'s companion to :meth:`JobWatcher.run`)."""
    notifier = Notifier(watcher.ledger.path, settings)
    watcher.subscribe(lambda update: notifier.wake() if update.job.state.finished else None)
    await notifier.run(stop)
