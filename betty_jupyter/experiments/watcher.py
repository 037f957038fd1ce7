"""``JobWatcher``: keeps every recorded experiment's page and notebook current as its job runs.

One batched ``sacct`` per cluster per tick for all the jobs it holds; leases with heartbeats
in the ledger so a restarted or second watcher takes over exactly the jobs a dead one held.

The pace: a new submission or a change is checked again after ``min_interval`` (2 s), then
4 s, 8 s … doubling up to ``max_interval`` (60 s), the longest a job's end goes unnoticed
(four times that while Slurm errs). A watcher waiting between ticks looks at the local
ledger every ``min_interval`` for a new submission, so a one-second job is seen within
seconds, not a minute later.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection

from ..cluster.sync import run_sync
from ..config import load_config
from ..errors import BettyError, ExperimentError, WikiError
from ..wiki import WikiStore
from ..wiki.files import Batch, written_together
from . import content
from .editors import OpenNotebooks
from .ledger import Experiment, Ledger, StateChange, Tracked
from .refresh import failure_log, write_page
from .status_cell import Outcome, StatusCheck, catch_up, write_status
from .workspace import Workspace

if TYPE_CHECKING:
    from ..cluster.jobs import Job
    from ..cluster.slurm import SlurmClient, Snapshot
    from ..config import BettyConfig


@dataclass(frozen=True)
class JobUpdate:
    """A watched job changed state (what subscribers receive)."""

    experiment: Experiment
    previous: str
    state: str
    job: "Job"
    written: tuple[str, ...] = ()
    """What the watcher rewrote for it: ``"page"``, ``"notebook"`` (either is skipped when missing)."""
    notebook_open: bool = False
    """The notebook was open in JupyterLab, so its file was left alone (the panel puts the status in)."""

    def line(self) -> str:
        """One line for a person: ``job 42 (llama3-lora): RUNNING → COMPLETED; page and notebook updated``."""
        done = f"{' and '.join(self.written)} updated" if self.written else \
            "no page or notebook to update (`betty experiments repair` writes them)"
        if self.notebook_open:
            done = ("page updated; " if self.written else "") + (
                "the notebook is open in JupyterLab: Betty's panel puts the status in it, your next save writes it")
        return f"job {self.experiment.job_id} ({self.experiment.slug}): {self.previous} → {self.state}; {done}"

    def record(self) -> dict[str, Any]:
        """The same as data, for ``--json``."""
        return {"job_id": self.experiment.job_id, "experiment": self.experiment.slug,
                "cluster": self.experiment.cluster, "previous": self.previous, "state": self.state,
                "page": f"wiki/{self.experiment.page}", "notebook": self.experiment.notebook,
                "updated": list(self.written), "notebook_open": self.notebook_open}


class JobWatcher:
    """Watches the unfinished experiments of one workspace."""

    def __init__(self, workspace: Workspace, client_for: Callable[[str], "SlurmClient"], *,
                 lease_seconds: float = 60.0, min_interval: float = 2.0, max_interval: float = 60.0) -> None:
        self.workspace = workspace
        self.ledger = Ledger(workspace.ledger_path)
        self.open_notebooks = OpenNotebooks(workspace.ledger_path)
        self.client_for = client_for
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.min_interval = min_interval
        self.max_interval = max_interval
        self.interval = min_interval
        self.subscribers: list[Callable[[JobUpdate], None]] = []
        self._written_subscribers: list[Callable[[StatusCheck], None]] = []
        self._tick_subscribers: list[Callable[[list[Tracked]], None]] = []
        self.settle_seconds = 60.0
        """How long an ended job may wait for accounting's exit code before it is recorded without one."""
        self._unsettled: dict[str, float] = {}
        self._wiki: WikiStore | None = None
        self._latest = 0
        """The ledger's :meth:`~.Ledger.latest` at the last tick: a greater one means a new submission."""

    def subscribe(self, callback: Callable[[JobUpdate], None]) -> None:
        """Call ``callback`` with every :class:`JobUpdate`."""
        self.subscribers.append(callback)

    def subscribe_tick(self, callback: Callable[[list[Tracked]], None]) -> None:
        """Call ``callback`` after every tick with the experiments it held (a search proposes its next round)."""
        self._tick_subscribers.append(callback)

    def subscribe_written(self, callback: Callable[[StatusCheck], None]) -> None:
        """Call ``callback`` with every notebook whose status :meth:`run` wrote once it was closed."""
        self._written_subscribers.append(callback)

    async def tick(self) -> list[JobUpdate]:
        """Claim the free jobs, ask each cluster once, apply what changed; adjusts the interval."""
        held = self.ledger.claim(self.owner, self.lease_seconds)
        latest, self._latest = self._latest, self.ledger.latest()
        submitted = bool(held) and self._latest > latest
        by_cluster: dict[str, list[Tracked]] = defaultdict(list)
        for tracked in held:
            by_cluster[tracked.experiment.cluster].append(tracked)
        updates: list[JobUpdate] = []
        troubled = False
        for cluster, tracked_jobs in by_cluster.items():
            try:
                updates += await self._check_cluster(self.client_for(cluster), tracked_jobs)
            except BettyError:
                troubled = True  # the link or Slurm erred: try again later, more slowly
        self._adjust_interval(changed=bool(updates) or submitted, troubled=troubled)
        for callback in self._tick_subscribers:
            callback(held)
        return updates

    def _adjust_interval(self, changed: bool, troubled: bool) -> None:
        if troubled:
            self.interval = min(self.max_interval * 4, self.interval * 4)
        elif changed:
            self.interval = self.min_interval
        else:
            self.interval = min(self.max_interval, self.interval * 2)

    async def _check_cluster(self, slurm: "SlurmClient", tracked_jobs: list[Tracked]) -> list[JobUpdate]:
        snapshot = await slurm.snapshot([ident for t in tracked_jobs for ident in _arrays(t.experiment)])
        chains = _read_chains(await _with_outputs(slurm, tracked_jobs, snapshot), snapshot)
        changed = [(chains.get(tracked.experiment.slug, tracked), job) for tracked in tracked_jobs
                   if (job := _followed(chains.get(tracked.experiment.slug, tracked).experiment, snapshot)) is not None
                   and (job.state.value != tracked.state or _chain_moved(tracked, chains))
                   and not self._unsettled_end(tracked, job)]
        logs = {tracked.experiment.slug: await failure_log(slurm, job)
                for tracked, job in changed if job.state.value in content.FAILED_STATES}
        changed, efficiency = self._with_efficiency(snapshot, changed)
        changed, compared = await _with_comparisons(slurm, changed)
        changed, peaks = await _with_peaks(slurm, changed)
        written: dict[str, tuple[tuple[str, ...], Outcome, str]] = {}
        batch: Batch | None = None
        with self.ledger.kept_open():  # a thousand jobs that ended at once: one connection, one transaction
            try:
                # Every page and notebook of the pass reaches the disk in one flush, before the ledger records it.
                with written_together() as batch:
                    batch.before_renames(self._opened_since)
                    open_now = self.open_notebooks.open_now()
                    for tracked, job in changed:
                        files = self._write_files(tracked, job, logs.get(tracked.experiment.slug), open_now)
                        if files is not None:
                            written[tracked.experiment.slug] = files
            except OSError as exc:  # a file could not be put in place; the others were
                raise ExperimentError(f"cannot write {exc.filename}: {exc.strerror or exc}") from exc
            finally:  # what was written is recorded even when a page could not be
                if batch is not None:
                    written = self._in_place([tracked.experiment for tracked, _ in changed], written, batch)
                recorded = self.ledger.record_states(self.owner, [
                    StateChange(tracked.experiment.slug, job.state.value, job.state.finished, written[slug][2],
                                behind=written[slug][1] is not Outcome.WRITTEN, efficiency=efficiency.get(slug),
                                sweep_tasks=compared.get(slug), chain=tracked.experiment.chain, ended_job=job.job_id,
                                gpu_peak=peaks.get(slug),
                                runtime=job.elapsed.total_seconds() if job.elapsed is not None else None)
                    for tracked, job in changed if (slug := tracked.experiment.slug) in written])
        updates = []
        for tracked, job in changed:
            if tracked.experiment.slug in recorded:
                page, notebook, _ = written[tracked.experiment.slug]
                updates.append(JobUpdate(tracked.experiment, tracked.state, job.state.value, job,
                                         page + (("notebook",) if notebook is Outcome.WRITTEN else ()),
                                         notebook_open=notebook is Outcome.OPEN))
        for update in updates:
            for callback in self.subscribers:
                callback(update)
        return updates

    def _with_efficiency(self, snapshot: "Snapshot", changed: list[tuple[Tracked, "Job"]]
                         ) -> tuple[list[tuple[Tracked, "Job"]], dict[str, dict[str, Any]]]:
        """The ended jobs' experiments with their efficiency, read from the tick's one ``sacct`` call (as they were
        when accounting has no figures for them: the page shows the rest), and those figures by slug, which the
        ledger records with the states."""
        ended = [tracked.experiment for tracked, job in changed if job.state.finished]
        if not ended:
            return changed, {}
        # lazy: the advisor; a tick in which no job ended needs none of it
        from .efficiency import efficiency_records

        records = efficiency_records(self.ledger, ended, snapshot.efficiency())
        return [(replace(tracked, experiment=replace(tracked.experiment, efficiency=records[slug]))
                 if (slug := tracked.experiment.slug) in records else tracked, job)
                for tracked, job in changed], records

    def _unsettled_end(self, tracked: Tracked, job: "Job") -> bool:
        """An ended job whose exit code accounting has not recorded yet: wait for it (a while)."""
        slug = tracked.experiment.slug
        if not job.state.finished or job.exit_code:
            self._unsettled.pop(slug, None)
            return False
        first = self._unsettled.setdefault(slug, time.monotonic())
        return time.monotonic() - first < self.settle_seconds

    def _opened_since(self, paths: list[Path]) -> set[Path]:
        """Which of the notebooks about to be renamed into place a person opened meanwhile (they stay as they are)."""
        return {self.workspace.root / notebook for notebook in self.open_notebooks.open_now()} & set(paths)

    def _in_place(self, experiments: list[Experiment], written: dict[str, tuple[tuple[str, ...], Outcome, str]],
                  batch: Batch) -> dict[str, tuple[tuple[str, ...], Outcome, str]]:
        """What ``batch`` put in place of ``written``: without the experiments one of whose files it could not
        write (the next tick writes them again); a notebook opened before its rename counts as open."""
        if not batch.failed and not batch.skipped:
            return written
        by_slug = {experiment.slug: experiment for experiment in experiments}
        wiki = WikiStore(self.workspace.wiki) if batch.failed and self.workspace.wiki.is_dir() else None
        kept = {}
        for slug, (page, notebook, line) in written.items():
            experiment = by_slug[slug]
            notebook_path = self.workspace.root / experiment.notebook
            if notebook_path in batch.failed or (wiki is not None and wiki.path(experiment.page) in batch.failed):
                continue
            kept[slug] = (page, Outcome.OPEN if notebook_path in batch.skipped else notebook, line)
        return kept

    def _write_files(self, tracked: Tracked, job: "Job", log: str | None,
                     open_now: Collection[str]) -> tuple[tuple[str, ...], Outcome, str] | None:
        """Write the page's auto region and the notebook's status (lease permitting); the caller records the state.

        Returns whether the page was written (``("page",)`` or ``()``), what became of the notebook's status and
        its line, or None when the lease was lost. A notebook open in JupyterLab (or not there yet: the submission's
        record is still being written) is left alone; the ledger marks it behind and :meth:`catch_up` writes it
        later."""
        experiment, state = tracked.experiment, job.state.value
        if not self.ledger.holds(experiment.slug, self.owner):
            return None
        page: tuple[str, ...] = ("page",) if self._write_page(experiment, job, state, log) else ()
        line = content.status_text(experiment, job, state)
        try:
            notebook = write_status(self.workspace, experiment, line, open_now)
        except ExperimentError:
            notebook = Outcome.MISSING  # a damaged file stays as it is, behind; `betty experiments repair` says why
        return page, notebook, line

    def _write_page(self, experiment: Experiment, job: "Job", state: str, log: str | None) -> bool:
        if self._wiki is None and self.workspace.wiki.is_dir():
            self._wiki = WikiStore(self.workspace.wiki)  # one for every page: its root is resolved once
        try:
            write_page(self.workspace, experiment, job, log, self._wiki)
        except WikiError:
            if (self.workspace.wiki / experiment.page).exists():
                raise
            return False  # the record was never written (see `betty experiments repair`); the ledger keeps the state
        return True

    def catch_up(self) -> list[StatusCheck]:
        """Write the status of notebooks that were open when their job changed, once closed; those still open."""
        return catch_up(self.workspace, self.ledger)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set, renewing leases between ticks; releases them at the end."""
        try:
            while not stop.is_set():
                await self.tick()
                for check in self.catch_up():
                    for callback in self._written_subscribers if check.outcome is Outcome.WRITTEN else ():
                        callback(check)
                await self._wait(stop)
        finally:
            self.ledger.release(self.owner)

    async def _wait(self, stop: asyncio.Event) -> None:
        """Until the next tick is due, a new experiment is recorded, or ``stop``; renewing leases meanwhile."""
        deadline = time.monotonic() + self.interval
        heartbeat = time.monotonic() + self.lease_seconds / 3
        while not stop.is_set() and time.monotonic() < deadline:
            wait = min(self.min_interval, heartbeat - time.monotonic(), deadline - time.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(wait, 0.01))
            except asyncio.TimeoutError:
                pass
            if self.ledger.latest() > self._latest:
                return  # a new submission: its first checks come fast
            if time.monotonic() >= heartbeat:
                self.ledger.claim(self.owner, self.lease_seconds)
                heartbeat = time.monotonic() + self.lease_seconds / 3


def _arrays(experiment: Experiment) -> list[str]:
    """The job ids a tick asks about for ``experiment``: its job, a chain's segments, a sweep's resubmitted arrays."""
    if experiment.chain:
        return [str(ident) for ident in experiment.chain.get("jobs") or [experiment.job_id]]
    if not experiment.sweep:
        return [experiment.job_id]
    # lazy: the sweep's record; a tick without a sweep needs none of it
    from .sweep_page import array_ids

    return array_ids(experiment)


async def _with_outputs(slurm: "SlurmClient", tracked_jobs: list[Tracked], snapshot: "Snapshot") -> list[Tracked]:
    """``tracked_jobs`` with the outputs of each pipeline step that just ended looked for on the cluster (a missing
    one stops the steps after it: ``experiments/pipeline.py``)."""
    chains = [t.experiment.chain or {} for t in tracked_jobs]
    if not any(chain.get("kind") == "pipeline" and any(s.get("outputs") for s in chain.get("steps") or [])
               for chain in chains):
        return tracked_jobs
    # lazy: the pipeline's outputs; a tick without one needs none of it
    from .pipeline import check_outputs

    return [replace(t, experiment=await check_outputs(slurm, t.experiment, snapshot.jobs))
            if (t.experiment.chain or {}).get("kind") == "pipeline" else t for t in tracked_jobs]


def _read_chains(tracked_jobs: list[Tracked], snapshot: "Snapshot") -> dict[str, Tracked]:
    """The continuation chains among ``tracked_jobs`` with their segments as the tick read them, by slug."""
    if not any(tracked.experiment.chain for tracked in tracked_jobs):
        return {}
    # lazy: the chain's reading; a tick without a chain needs none of it
    from .chain import followed

    return {tracked.experiment.slug: replace(tracked, experiment=followed(tracked.experiment, snapshot)[0])
            for tracked in tracked_jobs if tracked.experiment.chain}


def _chain_moved(tracked: Tracked, chains: dict[str, Tracked]) -> bool:
    """Whether a chain's segments changed since the ledger recorded them (a segment ending as the next starts)."""
    if tracked.experiment.slug not in chains:
        return False
    # lazy: as in _read_chains
    from .chain import moved

    return moved(tracked.experiment, chains[tracked.experiment.slug].experiment)


def _followed(experiment: Experiment, snapshot: "Snapshot") -> "Job | None":
    """The experiment's job as the tick saw it: a chain's current or deciding segment; a sweep's tasks each at its
    latest attempt."""
    if experiment.chain:
        # lazy: as in _read_chains
        from .chain import followed

        return followed(experiment, snapshot)[1]
    if not experiment.sweep:
        return snapshot.jobs.get(experiment.job_id)
    # lazy: the sweep's comparison; a tick without a sweep needs none of it
    from .comparison import followed_job

    return followed_job(experiment, snapshot)


async def _with_comparisons(slurm: "SlurmClient", changed: list[tuple[Tracked, "Job"]]
                            ) -> tuple[list[tuple[Tracked, "Job"]], dict[str, list[dict[str, Any]]]]:
    """The sweeps among ``changed`` with their comparison read now (each task's state, runtime, metrics), and those
    comparisons by slug for the ledger; a sweep whose comparison could not be read keeps its last one."""
    if not any(tracked.experiment.sweep for tracked, _ in changed):
        return changed, {}
    # lazy: the sweep's comparison; a tick without a sweep needs none of it
    from .comparison import read_comparison, task_records, with_tasks

    compared: dict[str, list[dict[str, Any]]] = {}
    followed = []
    for tracked, job in changed:
        if tracked.experiment.sweep:
            try:
                comparison = await read_comparison(slurm, tracked.experiment)
            except BettyError:
                comparison = None
            if comparison is not None:
                compared[tracked.experiment.slug] = task_records(comparison)
                tracked = replace(tracked, experiment=with_tasks(tracked.experiment, comparison))
        followed.append((tracked, job))
    return followed, compared


async def _with_peaks(slurm: "SlurmClient", changed: list[tuple[Tracked, "Job"]]
                      ) -> tuple[list[tuple[Tracked, "Job"]], dict[str, dict[str, Any]]]:
    """The ended jobs that measured their GPU peak with it read from their sampler's file, and a measured chain's
    segments as each ends (``gpu_peak.py``)."""
    if not any((job.state.finished or tracked.experiment.chain) and (tracked.experiment.gpu_peak or {}).get("sampled")
               for tracked, job in changed):
        return changed, {}
    # lazy: the peak file's reader; a tick in which no measured job ended needs none of it
    from .gpu_peak import with_peaks

    return await with_peaks(slurm, changed)


class ClusterClients:
    """What a watcher asks with: the Slurm client of the process's shared cluster of each configured cluster
    (its link opened on first use, and closed by the process, not by the watcher)."""

    def __init__(self, config: "BettyConfig") -> None:
        self.config = config

    def __call__(self, cluster: str) -> "SlurmClient":
        """The client of ``cluster`` (ConfigError when it is not configured)."""
        # lazy: the Slurm client; the server's start builds the watcher without it
        from ..cluster.shared import shared_cluster

        return shared_cluster(self.config.profile(cluster)).slurm


def watcher_for_config(workspace: Workspace, **options: Any) -> tuple[JobWatcher, Callable[[], None]]:
    """A watcher whose clusters come from Betty's configuration, and a function closing the process's links."""
    # lazy: the shared clusters load the Slurm client; the server's start builds the watcher without it
    from ..cluster.shared import close_clusters

    return JobWatcher(workspace, ClusterClients(load_config()), **options), lambda: run_sync(close_clusters())
