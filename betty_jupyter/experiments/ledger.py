"""The ledger: recorded experiments and the watcher's leases, in SQLite under ``.betty/``.

It holds everything needed to rebuild an experiment's page and notebook, so a record whose
files could not be written after ``sbatch`` succeeded can be repaired, and a watcher that
died can be taken over: each unfinished job has an owner and a lease that the owner's
heartbeat extends; a lease that ran out may be claimed by the next watcher.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

from ..storage import connect

_SCHEMA = """
BEGIN;
CREATE TABLE IF NOT EXISTS experiments (
    slug TEXT PRIMARY KEY,
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    record TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'PENDING',
    finished INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    updated REAL NOT NULL,
    UNIQUE (cluster, job_id)
);
CREATE TABLE IF NOT EXISTS notebook_status (
    slug TEXT PRIMARY KEY,
    line TEXT NOT NULL,
    behind INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS job_ends (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL,
    job_id TEXT NOT NULL,
    cluster TEXT NOT NULL,
    state TEXT NOT NULL,
    runtime REAL,
    ended REAL NOT NULL,
    UNIQUE (slug, job_id, state)
);
CREATE TABLE IF NOT EXISTS segments (
    cluster TEXT NOT NULL,
    job_id TEXT NOT NULL,
    slug TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (cluster, job_id)
);
CREATE INDEX IF NOT EXISTS experiments_by_job ON experiments (job_id);
CREATE INDEX IF NOT EXISTS job_ends_by_time ON job_ends (ended);
CREATE INDEX IF NOT EXISTS experiments_unfinished ON experiments (owner) WHERE finished = 0;
CREATE INDEX IF NOT EXISTS notebooks_behind ON notebook_status (slug) WHERE behind = 1;
COMMIT
"""
# The indexes keep every query as quick with thousands of experiments as with one: a job id looked up
# (``get``), the unfinished jobs claimed every tick (``claim``), the notebooks behind their job (``catch_up``).
# ``job_ends``: each job's end once, recorded with its state, from which notifications go out
# (``experiments/notify/outbox.py``). A ledger written before they existed gets them the next time it is opened. One transaction: a new ledger
# reaches the disk once, not once per statement.

_SET_NOTEBOOK_STATUS = ("INSERT INTO notebook_status (slug, line, behind) VALUES (?, ?, ?) "
                        "ON CONFLICT (slug) DO UPDATE SET line = excluded.line, behind = excluded.behind")

REBUILT = "REBUILT"
"""The state of an experiment whose files were rebuilt, until the watcher looks at its job again."""
RESUBMITTED = "RESUBMITTED"
"""The state of a sweep some of whose tasks were just resubmitted, until the watcher looks at them."""


@dataclass(frozen=True)
class Experiment:
    """One submission as recorded: enough to rebuild its page and notebook."""

    slug: str
    job_id: str
    cluster: str
    submitted: str
    goal: str
    script: str
    script_path: str
    partition: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    gpu_estimate: dict[str, Any] | None = None
    gpu_peak: dict[str, Any] | None = None
    """A job marked to measure its GPU peak (``gpu/measured.py``): ``{"sampled": true}`` at submission, then what its
    sampler's file said when it ended (``peak_mib``, ``samples``) or why nothing was read (``note``)."""
    diagnosis: dict[str, Any] | None = None
    """Why the job failed and what became of the correction (the job babysitter's, ``diagnosis.py``)."""
    efficiency: dict[str, Any] | None = None
    """What the job used of its request, and the right-sizing for the next run, recorded when it ended
    (``experiments/efficiency.py``)."""
    replaces: dict[str, str] | None = None
    """The recorded experiment this one corrects: its ``slug`` and ``job_id`` (its page links that one's)."""
    sweep: dict[str, Any] | None = None
    """A sweep's grid (``grid``: ``["lr=1e-4,3e-4", …]``) and ``at_once``; its job is the array that runs every
    point (``experiments/sweep.py``)."""
    chain: dict[str, Any] | None = None
    """A continuation chain's plan, its segments' jobs and what became of each (``experiments/chain.py``); its
    ``job_id`` is the first segment's."""
    node_cells: dict[str, Any] | None = None
    """A node kernel's allocation (``%betty kernel``): how many cells ran on it, when, and the latest ones' first
    lines and digests (``experiments/node_cells.py``)."""
    preemption: dict[str, Any] | None = None
    """A job Slurm kept preempting: how often, the partition Betty proposed moving it to and what became of the
    proposal (the job babysitter's, ``agent/automations/preempted.py``)."""

    @property
    def page(self) -> str:
        """The wiki page's name."""
        return f"experiments/{self.slug}.md"

    @property
    def notebook(self) -> str:
        """The notebook's path, relative to the workspace root."""
        return f"notebooks/experiments/{self.slug}.ipynb"


class StateChange(NamedTuple):
    """A job's new state as the watcher saw it, and the line its notebook's status cell should say."""

    slug: str
    state: str
    finished: bool
    status_line: str
    behind: bool
    """The notebook's file does not say ``status_line`` yet (open in JupyterLab, or not written yet)."""
    efficiency: dict[str, Any] | None = None
    """What the ended job used and the right-sizing drawn from its series (``experiments/efficiency.py``), recorded
    on the experiment with its state."""
    sweep_tasks: list[dict[str, Any]] | None = None
    """A sweep's comparison as the watcher read it with this state (``experiments/comparison.py``), recorded on the
    experiment with its state."""
    ended_job: str | None = None
    """The id of the job that ended (with ``finished``): its end is recorded once, for notifications."""
    runtime: float | None = None
    """Seconds the ended job ran, as accounting says (None: not known)."""
    chain: dict[str, Any] | None = None
    """A continuation chain's segments as the watcher read them (``experiments/chain.py``)."""
    gpu_peak: dict[str, Any] | None = None
    """The GPU peak the ended job's sampler measured (``gpu/measured.py``), recorded on the experiment with its state."""


@dataclass(frozen=True)
class Tracked:
    """An experiment with the state the watcher last recorded for it."""

    experiment: Experiment
    state: str
    finished: bool


class Ledger:
    """SQLite access; every call opens its own connection (see :meth:`kept_open`), so processes share the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._open: sqlite3.Connection | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> "AbstractContextManager[sqlite3.Connection]":
        return nullcontext(self._open) if self._open is not None else connect(self.path)

    @contextmanager
    def kept_open(self) -> Iterator[None]:
        """Every call inside uses one connection: many small writes in a row (a watcher's tick) without
        opening the file, and checkpointing its write-ahead log on close, once per write. Not across an ``await``."""
        if self._open is not None:
            yield
            return
        with connect(self.path) as db:
            self._open = db
            try:
                yield
            finally:
                self._open = None

    def add(self, experiment: Experiment) -> None:
        """Record a new experiment (its job not yet watched by anyone)."""
        with self._connect() as db:
            db.execute(
                "INSERT INTO experiments (slug, cluster, job_id, record, updated) VALUES (?, ?, ?, ?, ?)",
                (experiment.slug, experiment.cluster, experiment.job_id, json.dumps(asdict(experiment)), time.time()),
            )
            for position, ident in enumerate((experiment.chain or {}).get("jobs") or []):
                db.execute("INSERT OR REPLACE INTO segments (cluster, job_id, slug, position) VALUES (?, ?, ?, ?)",
                           (experiment.cluster, str(ident), experiment.slug, position))

    def slugs_from(self, base: str) -> set[str]:
        """The recorded slugs that are ``base`` or ``base-…`` (``base-2``, ``base-3``…)."""
        with self._connect() as db:
            rows = db.execute("SELECT slug FROM experiments WHERE slug = ? OR (slug > ? AND slug < ?)",
                              (base, f"{base}-", f"{base}.")).fetchall()  # "." sorts right after "-"
        return {row[0] for row in rows}

    def latest(self) -> int:
        """A number that grows with every experiment recorded (0: none yet)."""
        with self._connect() as db:
            return int(db.execute("SELECT coalesce(max(rowid), 0) FROM experiments").fetchone()[0])

    def all(self) -> list[Tracked]:
        """Every experiment, oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT record, state, finished FROM experiments ORDER BY rowid").fetchall()
        return [_tracked(row) for row in rows]

    def series(self, experiments: list[Experiment]) -> dict[str, list[Experiment]]:
        """Each experiment's series, by slug: the runs of the same ``--job-name`` on the same cluster that finished
        (``experiments`` themselves counted as finished), oldest first. What right-sizing learns from; the ledger
        is read once for all."""
        # lazy: the script parser; opening the ledger (every watcher tick) needs none of it
        from ..advisor.rightsizing import job_name

        asked = {experiment.slug for experiment in experiments}  # ended now, though not recorded as ended yet
        finished: dict[tuple[str, str], list[Experiment]] = {}
        for tracked in self.all():
            ended = tracked.finished or tracked.experiment.slug in asked
            name = job_name(tracked.experiment.script) if ended else None
            if name is not None:
                finished.setdefault((tracked.experiment.cluster, name), []).append(tracked.experiment)
        found: dict[str, list[Experiment]] = {}
        for experiment in experiments:
            name = job_name(experiment.script)
            runs = finished.get((experiment.cluster, name or ""), [])
            found[experiment.slug] = runs if name is not None and runs else [experiment]
        return found

    def get(self, slug_or_job: str) -> Tracked | None:
        """The experiment with this slug, or whose job id this is."""
        with self._connect() as db:
            row = db.execute(
                "SELECT record, state, finished FROM experiments WHERE slug = ? OR job_id = ? ORDER BY rowid DESC",
                (slug_or_job, slug_or_job),
            ).fetchone()
        return _tracked(row) if row else None

    def of_segment(self, cluster: str, job: str) -> Tracked | None:
        """The chain experiment one of whose segments is ``job`` on ``cluster`` (None: no chain has it)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT e.record, e.state, e.finished FROM segments s CROSS JOIN experiments e ON e.slug = s.slug "
                "WHERE s.cluster = ? AND s.job_id = ?", (cluster, job)).fetchone()
        return _tracked(row) if row else None

    def claim(self, owner: str, lease_seconds: float) -> list[Tracked]:
        """Take the lease of every unfinished job that is free, expired, or already ours."""
        now = time.time()
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "UPDATE experiments SET owner = ?, lease_until = ? "
                "WHERE finished = 0 AND (owner IS NULL OR owner = ? OR lease_until < ?)",
                (owner, now + lease_seconds, owner, now),
            )
            rows = db.execute(
                "SELECT record, state, finished FROM experiments WHERE finished = 0 AND owner = ? ORDER BY rowid",
                (owner,),
            ).fetchall()
            db.execute("COMMIT")
        return [_tracked(row) for row in rows]

    def holds(self, slug: str, owner: str) -> bool:
        """Whether ``owner`` holds a live lease on the experiment."""
        with self._connect() as db:
            row = db.execute("SELECT 1 FROM experiments WHERE slug = ? AND owner = ? AND lease_until >= ?",
                             (slug, owner, time.time())).fetchone()
        return row is not None

    def reopen(self, slug: str) -> None:
        """Have the watcher look at this experiment again (after its files were rebuilt)."""
        with self._connect() as db:
            db.execute("UPDATE experiments SET state = ?, finished = 0 WHERE slug = ?", (REBUILT, slug))

    def set_state(self, slug: str, owner: str, state: str, finished: bool) -> bool:
        """Record a new state, only while ``owner`` holds the lease; False if it was lost."""
        with self._connect() as db:
            cursor = db.execute(
                "UPDATE experiments SET state = ?, finished = ?, updated = ? "
                "WHERE slug = ? AND owner = ? AND lease_until >= ?",
                (state, int(finished), time.time(), slug, owner, time.time()),
            )
            return cursor.rowcount == 1

    def record_states(self, owner: str, changes: list[StateChange]) -> set[str]:
        """Record many jobs' new states, status lines and efficiency in one transaction (a watcher's tick).

        Each state is recorded only while ``owner`` holds that experiment's lease; the status line
        always. Returns the slugs whose state was recorded.
        """
        recorded = set()
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                for change in changes:
                    cursor = db.execute(
                        "UPDATE experiments SET state = ?, finished = ?, updated = ? "
                        "WHERE slug = ? AND owner = ? AND lease_until >= ?",
                        (change.state, int(change.finished), time.time(), change.slug, owner, time.time()))
                    if cursor.rowcount == 1:
                        recorded.add(change.slug)
                        if change.efficiency is not None or change.sweep_tasks is not None or change.chain is not None \
                                or change.gpu_peak is not None:
                            _record_read(db, change)  # a diagnosis or a resubmission written meanwhile is kept
                        if change.finished and change.ended_job:
                            db.execute(_RECORD_END, (change.slug, change.ended_job, _cluster(db, change.slug),
                                                     change.state, change.runtime, time.time()))
                    db.execute(_SET_NOTEBOOK_STATUS, (change.slug, change.status_line, int(change.behind)))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return recorded

    def change_diagnosis(self, slug: str,
                         change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Experiment | None:
        """Rewrite the experiment's diagnosis in one transaction, so two servers never both act on one.

        ``change`` gets the current diagnosis (None: none yet) and returns the new one, or None to
        leave it as it is. Returns the experiment as changed, or None when nothing changed.
        """
        return self._change(slug, "diagnosis", change)

    def change_sweep(self, slug: str,
                     change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Experiment | None:
        """Rewrite a sweep's record (its grid, resubmissions, comparison) in one transaction, as
        :meth:`change_diagnosis`; a sweep changed this way is watched again (state ``RESUBMITTED``) until its
        tasks have ended."""
        changed = self._change(slug, "sweep", change)
        if changed is not None:
            with self._connect() as db:
                # The lease is taken back too: a tick that read the sweep before this change records nothing of it.
                db.execute("UPDATE experiments SET state = ?, finished = 0, owner = NULL, lease_until = 0 "
                           "WHERE slug = ?", (RESUBMITTED, slug))
        return changed

    def extend_chain(self, slug: str, chain: dict[str, Any]) -> Experiment | None:
        """Make the experiment a continuation chain with ``chain`` (its jobs, old and new, in order), record its
        segments' jobs, and have the watcher follow it again until the chain has ended."""
        changed = self._change(slug, "chain", lambda _: chain)
        if changed is not None:
            with self._connect() as db:
                for position, ident in enumerate(chain.get("jobs") or []):
                    db.execute("INSERT OR REPLACE INTO segments (cluster, job_id, slug, position) VALUES (?, ?, ?, ?)",
                               (changed.cluster, str(ident), slug, position))
                db.execute("UPDATE experiments SET finished = 0, owner = NULL, lease_until = 0 WHERE slug = ?",
                           (slug,))
        return changed

    def change_preemption(self, slug: str,
                          change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Experiment | None:
        """Rewrite the record of a job Slurm kept preempting in one transaction, as :meth:`change_diagnosis`."""
        return self._change(slug, "preemption", change)

    def change_node_cells(self, slug: str,
                          change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Experiment | None:
        """Rewrite a node kernel's record of its cells in one transaction, as :meth:`change_diagnosis`."""
        return self._change(slug, "node_cells", change)

    def _change(self, slug: str, name: str,
                change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> Experiment | None:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT record FROM experiments WHERE slug = ?", (slug,)).fetchone()
                record = json.loads(row[0]) if row else None
                new = change(record.get(name)) if record is not None else None
                if record is not None and new is not None:
                    record[name] = new
                    db.execute("UPDATE experiments SET record = ? WHERE slug = ?", (json.dumps(record), slug))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return Experiment(**record) if record is not None and new is not None else None

    def set_notebook_status(self, slug: str, line: str, behind: bool) -> None:
        """What Betty's status cell of the experiment's notebook should say, and whether its file says it yet."""
        with self._connect() as db:
            db.execute(_SET_NOTEBOOK_STATUS, (slug, line, int(behind)))

    def notebook_status(self, slug: str) -> str | None:
        """The line Betty's status cell should say (None: the watcher has written none yet)."""
        with self._connect() as db:
            row = db.execute("SELECT line FROM notebook_status WHERE slug = ?", (slug,)).fetchone()
        return row[0] if row else None

    def notebooks_behind(self) -> list[tuple[Tracked, str]]:
        """The experiments whose notebook file still lacks the status line Betty last wanted it to say, with it."""
        with self._connect() as db:
            # CROSS JOIN: from the few notebooks behind to their experiments, never a walk through every experiment
            rows = db.execute(
                "SELECT e.record, e.state, e.finished, n.line FROM notebook_status n CROSS JOIN experiments e "
                "ON e.slug = n.slug WHERE n.behind = 1 ORDER BY e.rowid").fetchall()
        return [(_tracked(row[:3]), row[3]) for row in rows]

    def release(self, owner: str) -> None:
        """Give up every lease ``owner`` holds (a clean stop)."""
        with self._connect() as db:
            db.execute("UPDATE experiments SET owner = NULL, lease_until = 0 WHERE owner = ?", (owner,))


_RECORD_END = ("INSERT OR IGNORE INTO job_ends (slug, job_id, cluster, state, runtime, ended) "
               "VALUES (?, ?, ?, ?, ?, ?)")


def _cluster(db: sqlite3.Connection, slug: str) -> str:
    return str(db.execute("SELECT cluster FROM experiments WHERE slug = ?", (slug,)).fetchone()[0])


def _record_read(db: sqlite3.Connection, change: StateChange) -> None:
    """Put what the watcher read with a state (efficiency, a sweep's comparison) into the experiment's record."""
    row = db.execute("SELECT record FROM experiments WHERE slug = ?", (change.slug,)).fetchone()
    record = json.loads(row[0])
    if change.efficiency is not None:
        record["efficiency"] = change.efficiency
    if change.sweep_tasks is not None and isinstance(record.get("sweep"), dict):
        record["sweep"] = {**record["sweep"], "tasks": change.sweep_tasks}
    if change.chain is not None:
        record["chain"] = change.chain
    if change.gpu_peak is not None:
        record["gpu_peak"] = change.gpu_peak
    db.execute("UPDATE experiments SET record = ? WHERE slug = ?", (json.dumps(record), change.slug))


def _tracked(row: tuple[str, str, int]) -> Tracked:
    record = json.loads(row[0])
    return Tracked(Experiment(**record), state=row[1], finished=bool(row[2]))
