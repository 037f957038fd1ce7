"""``Cluster``: one configured cluster as this process reaches it, and the process's one of each.

A :class:`Cluster` is built from a :class:`~betty_jupyter.cluster.profiles.ClusterProfile` by its
one constructor and holds the one link to the cluster (:class:`~betty_jupyter.transport.link.Link`)
and the one :class:`~betty_jupyter.cluster.slurm.SlurmClient` configured from the whole profile
(``work_dir``, ``job_env``, ``readable_roots``). It reads the person's login name and the
partitions once and keeps them (:meth:`Cluster.facts`).

:func:`shared_cluster` hands every part of the process the same ``Cluster`` for a profile: chat,
desk, notebook and automation sessions, the job watcher, the server's routes, a notebook kernel's
own Betty. So a site that asks for a second factor asks once per process, not once per session.
The process owns the link: a session never closes it; its host does as it stops
(:func:`close_clusters`: the server's stop, the kernel's Betty closing, a command's end).

Transports do their work in threads behind their own locks, so one ``Cluster`` serves every event
loop of the process (the server's, the notebook's background loop, a command's ``asyncio.run``);
only a read of the facts in progress belongs to the loop that started it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, TypeVar

from ..errors import BettyError
from ..transport.link import Link

if TYPE_CHECKING:
    import asyncio

    import pandas as pd

    from .slurm import SlurmClient

    from .profiles import ClusterProfile
    from ..transport.interface import Transport

T = TypeVar("T")

FACTS_SECONDS = 300.0
"""How long a cluster's partitions are kept before the next reader reads them again (five minutes): sessions
opened meanwhile share one ``sinfo``; a partition an administrator adds shows in a new session a few minutes later.
The login name is kept as long as the cluster: it cannot change while the profile does not."""


@dataclass(frozen=True)
class ClusterFacts:
    """What every session of a cluster is told: the person's login name and the partitions, each None when the
    cluster did not say."""

    user: str | None
    partitions: "pd.DataFrame | None"


class Cluster:
    """One configured cluster: its profile, its one link, its one Slurm client, its facts."""

    def __init__(self, profile: "ClusterProfile", transport: "Transport | None" = None, *,
                 shared: bool = False) -> None:
        """``profile``'s cluster, over a :class:`Link` to the transports the profile opens; over ``transport`` as it
        is when given (a test's scripted one). ``shared``: the process's, from :func:`shared_cluster`."""
        self.profile = profile
        self.link: "Transport" = transport if transport is not None else Link(profile.open_transport)
        self.shared = shared
        self._slurm: "SlurmClient | None" = None
        self.fact_reads = 0
        """How many times the facts were read from the cluster."""
        self._user: str | None = None
        self._partitions: tuple[float, "pd.DataFrame"] | None = None
        self._reading: dict[asyncio.AbstractEventLoop, asyncio.Task[ClusterFacts]] = {}
        self._lock = threading.Lock()

    @property
    def slurm(self) -> "SlurmClient":
        """The one Slurm client, configured from the whole profile (made on first use: a link starts logging in
        before the Slurm layer has loaded)."""
        with self._lock:
            if self._slurm is None:
                from .slurm import SlurmClient  # lazy: the Slurm layer loads while the link logs in

                profile = self.profile
                self._slurm = SlurmClient(self.link, work_dir=profile.work_dir, job_env=profile.job_env,
                                          readable_roots=profile.readable_roots)
            return self._slurm

    def __repr__(self) -> str:
        return f"Cluster({self.profile.name!r}, {self.profile.transport}{', shared' if self.shared else ''})"

    def open_early(self) -> None:
        """Start logging in to the cluster in the background (see :meth:`Link.open_early`), for a command that will
        read it once the rest of Betty is loaded; a test's own transport is left as it is."""
        if isinstance(self.link, Link):
            self.link.open_early()

    async def facts(self) -> ClusterFacts:
        """The login name and the partitions: kept ones (:data:`FACTS_SECONDS`), else read now, once for every reader
        that comes meanwhile on this loop. What the cluster did not answer is asked again by the next reader."""
        kept = self._kept()
        if kept is not None:
            return kept
        import asyncio  # lazy: the event loop's module loads while the link logs in

        loop = asyncio.get_running_loop()
        with self._lock:
            reading = self._reading.get(loop)
            if reading is None:
                reading = self._reading[loop] = loop.create_task(self._read())
                reading.add_done_callback(lambda done: self._done_reading(loop, done))
        return await asyncio.shield(reading)

    async def user(self) -> str | None:
        """The person's login name on the cluster (None when the cluster does not say): kept once read, else asked
        alone (``id -un``, no scheduler call)."""
        return await self._login_name()

    def _kept(self) -> ClusterFacts | None:
        partitions = self._partitions
        if self._user is None or partitions is None or time.monotonic() - partitions[0] >= FACTS_SECONDS:
            return None
        return ClusterFacts(self._user, partitions[1])

    def _done_reading(self, loop: asyncio.AbstractEventLoop, done: "asyncio.Task[ClusterFacts]") -> None:
        with self._lock:
            if self._reading.get(loop) is done:
                del self._reading[loop]

    async def _read(self) -> ClusterFacts:
        import asyncio  # lazy: the event loop's module loads while the link logs in

        self.fact_reads += 1
        user, partitions = await asyncio.gather(self._login_name(), self._read_partitions())
        return ClusterFacts(user, partitions)

    async def _login_name(self) -> str | None:
        if self._user is not None:
            return self._user
        try:
            who = (await self.slurm.transport.run(["id", "-un"], self.slurm.timeout)).stdout.strip()
        except BettyError:
            return None
        if who and who.isprintable() and len(who) <= 64 and " " not in who:
            self._user = who
            return who
        return None

    async def _read_partitions(self) -> "pd.DataFrame | None":
        began = time.monotonic()
        try:
            partitions = await self.slurm.partitions()
        except BettyError:
            return None
        self._partitions = (began, partitions)
        return partitions

    async def close(self) -> None:
        """Close the link (closing twice is fine; a later command opens it again)."""
        await self.link.close()


_clusters: dict[str, Cluster] = {}
_replaced: list[Cluster] = []
_registry_lock = threading.Lock()


def shared_cluster(profile: "ClusterProfile") -> Cluster:
    """The process's :class:`Cluster` for ``profile``: the same object for every caller while the profile stays as it
    is; a profile changed in the configuration gets a new one (the old one's link is closed with the others)."""
    with _registry_lock:
        known = _clusters.get(profile.name)
        if known is not None and known.profile == profile:
            return known
        if known is not None:
            _replaced.append(known)  # a session may still use it: it stays open until the process closes its links
        made = _clusters[profile.name] = Cluster(profile, shared=True)
        return made


def shared_clusters() -> list[Cluster]:
    """The clusters this process holds now."""
    with _registry_lock:
        return list(_clusters.values())


async def close_clusters() -> None:
    """Close every link the process holds and forget its clusters: the host calls this as it stops."""
    with _registry_lock:
        closing = [*_clusters.values(), *_replaced]
        _clusters.clear()
        _replaced.clear()
    for cluster in closing:
        with contextlib.suppress(BettyError):
            await cluster.close()


async def closing_clusters(work: Awaitable[T]) -> T:
    """Await ``work``, then close the process's links: for a command that does one thing and ends."""
    try:
        return await work
    finally:
        await close_clusters()
