"""Clusters and their jobs: list, health, overview, test, trust a host key; queue, history, efficiency, partitions,
cancel, resubmit, extend.

Reads a person makes outside a chat run as that person's own tool calls in the cluster's desk
session (``desk-<cluster>``), so they pass the same policy and land in the action log.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tornado import web

from ..cluster.jobs import job_id
from ..errors import BettyError, HostKeyError
from .base import BettyHandler, approver, refused

if TYPE_CHECKING:
    from ..agent.loop import AgentSession
    from ..cluster.profiles import ClusterProfile
    from ..transport.ssh import SSHTarget
    from .models import ClusterCheck

CLUSTER = r"/betty/api/clusters/(?P<name>[^/]+)"


async def check_cluster(profile: "ClusterProfile") -> "ClusterCheck":
    """Can Betty reach ``profile``'s cluster and run Slurm there? An unknown host key carries its fingerprint."""
    from ..cluster.commands import cluster_check  # lazy: the Slurm client; the server's extension loads without it

    try:
        return {"ok": True, "message": await cluster_check(profile)}
    except HostKeyError as error:
        return {"ok": False, "message": str(error), "fingerprint": error.fingerprint}
    except BettyError as error:
        return {"ok": False, "message": str(error)}


def recorded_fingerprints(target: "SSHTarget") -> list[str]:
    """The fingerprints known_hosts already holds for ``target`` (none when the file is missing)."""
    # lazy: paramiko is heavy; the server's extension loads without it
    from ..transport import paramiko_lib
    from ..transport.ssh import fingerprint

    paramiko_lib.load()  # paramiko without invoke
    import paramiko  # lazy: paramiko is heavy; the server's extension loads without it

    try:
        keys = paramiko.HostKeys(target.known_hosts)
    except OSError:
        return []
    found = keys.lookup(target.known_hosts_name)
    return [fingerprint(found[kind]) for kind in found.keys()] if found else []


async def login_name(session: "AgentSession") -> str:
    """The person's login name on the session's cluster, asked now (the session could not learn it when it opened);
    the link's own error, naming its cause, when the cluster cannot be reached."""
    who = await session.context.slurm.transport.run(["id", "-un"], 30.0)
    name = who.stdout.strip()
    if not who.ok or not name:
        said = who.stderr.strip().splitlines()
        raise refused(502, f"`id -un` on {session.context.profile.name} failed: "
                           f"{said[-1][:200] if said else f'exit code {who.exit_code}'}")
    return name


class ClustersHandler(BettyHandler):
    """``GET clusters``: the configured clusters."""

    @web.authenticated
    def get(self) -> None:
        """``{clusters: [{name, transport, host, default}]}``, as the configuration files say now."""
        self.services.current_config()
        self.answer({"clusters": self.assistant.clusters()})


class ClusterHealthHandler(BettyHandler):
    """``GET clusters/{name}/health``: reachable, host key known, Slurm answers? (a read, kept a few seconds)."""

    @web.authenticated
    async def get(self, name: str) -> None:
        """``{cluster, ok, message, problem, checked_at, fingerprint?}``."""
        health = await self.services.health(self.cluster_name(name))
        self.answer(health.as_dict())


class ClusterOverviewHandler(BettyHandler):
    """``GET clusters/{name}/overview``: what the cluster is doing (``cluster_overview``), kept 10 s for everyone."""

    @web.authenticated
    async def get(self, name: str) -> None:
        """``{cluster, ok, message, overview}``; ``overview`` is null when the cluster could not be read."""
        self.answer(await self.services.overview(self.cluster_name(name), self.person))


class ClusterTestHandler(BettyHandler):
    """``POST clusters/{name}/test``: connect, run Slurm's commands, report latency."""

    @web.authenticated
    async def post(self, name: str) -> None:
        """``{ok, message, fingerprint?}``."""
        self.answer(await check_cluster(self.betty_config.profile(self.cluster_name(name))))


class ClusterTrustHandler(BettyHandler):
    """``POST clusters/{name}/trust {fingerprint}``: record the host key the person confirmed."""

    @web.authenticated
    async def post(self, name: str) -> None:
        """``{trusted: true, fingerprint}``; 409 when the host presents (or has recorded) another key."""
        # lazy: paramiko and the pydantic request model; the server's extension loads without them
        from ..transport.ssh import trust_host_key
        from .models import TrustRequest

        confirmed = self.body(TrustRequest).fingerprint.strip()
        target = self.betty_config.profile(self.cluster_name(name)).ssh_target()
        recorded = await asyncio.to_thread(recorded_fingerprints, target)
        if recorded and confirmed not in recorded:
            raise refused(409, f"{target.known_hosts_name} already has another key in {target.known_hosts} "
                               f"({', '.join(recorded)}); remove that line first if the host key really changed")
        if not recorded:
            try:
                await asyncio.to_thread(trust_host_key, target, confirmed)
            except HostKeyError as error:
                raise refused(409, f"{target.known_hosts_name} presents {error.key_type} {error.fingerprint}, "
                                   f"not {confirmed}; nothing was added") from None
        self.answer({"trusted": True, "fingerprint": confirmed})


class JobsHandler(BettyHandler):
    """``GET jobs?cluster=&mine=1&state=S&partition=P``: the queue (``cluster_queue``)."""

    @web.authenticated
    async def get(self) -> None:
        """The Outcome; its data is the queue as a frame."""
        session = await self.services.desk(self.cluster_name(self.query("cluster")))
        args: dict[str, Any] = {}
        if self.query("mine", "0") not in ("0", "false", "no"):
            args["user"] = session.user or await login_name(session)
        states = [s.strip() for value in self.get_query_arguments("state") for s in value.split(",") if s.strip()]
        if states:
            args["states"] = states
        if self.query("partition"):
            args["partition"] = self.query("partition")
        await self.call_tool(session, "cluster_queue", args)


class HistoryHandler(BettyHandler):
    """``GET jobs/history?cluster=&since=&ids=1,2``: jobs from accounting (``cluster_history``)."""

    @web.authenticated
    async def get(self) -> None:
        """The Outcome; its data is the history as a frame."""
        await self.call_accounting("cluster_history")

    async def call_accounting(self, tool: str) -> None:
        """Call ``tool`` in the cluster's desk session with the query's ``ids`` and ``since``."""
        session = await self.services.desk(self.cluster_name(self.query("cluster")))
        args: dict[str, Any] = {}
        ids = [i.strip() for i in (self.query("ids") or "").split(",") if i.strip()]
        if ids:
            args["job_ids"] = ids
        if self.query("since"):
            args["since"] = self.query("since")
        await self.call_tool(session, tool, args)


class EfficiencyHandler(HistoryHandler):
    """``GET jobs/efficiency?cluster=&ids=1,2&since=7d``: what finished jobs used of what they asked for
    (``cluster_efficiency``: one sacct call for all of them)."""

    @web.authenticated
    async def get(self) -> None:
        """The Outcome; its data is ``{"jobs": [figures…]}``."""
        await self.call_accounting("cluster_efficiency")


class CancelHandler(BettyHandler):
    """``POST jobs/{id}/cancel {session_id?, cluster?}``: ``cluster_cancel`` starts; its card arrives as an event."""

    @web.authenticated
    async def post(self, job: str) -> None:
        """202 ``{call_id, session_id}``."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import CancelRequest

        ident = job_id(job)
        request = self.body(CancelRequest)
        if request.session_id:
            session = self.session_of(request.session_id)
        else:
            session = await self.services.desk(self.cluster_name(request.cluster))
        call_id = self.services.start_call(session.session_id, "cluster_cancel", {"job_id": ident},
                                           approver(self.current_user, request.face))
        self.answer({"call_id": call_id, "session_id": session.session_id}, status=202)


class ExtendHandler(BettyHandler):
    """``POST jobs/{id}/extend {segments?, session_id?, cluster?}``: ``cluster_extend`` starts (continuations queued
    behind a running job Betty recorded); its card arrives as an event, and nothing is queued until a person
    approves it there."""

    @web.authenticated
    async def post(self, job: str) -> None:
        """202 ``{call_id, session_id}``."""
        # lazy: the request models are pydantic; the server's extension loads without them
        from .models import ExtendRequest

        ident = job_id(job)
        request = self.body(ExtendRequest)
        if request.session_id:
            session = self.session_of(request.session_id)
        else:
            session = await self.services.desk(self.cluster_name(request.cluster))
        call_id = self.services.start_call(session.session_id, "cluster_extend",
                                           {"job_id": ident, "segments": request.segments},
                                           approver(self.current_user, request.face))
        self.answer({"call_id": call_id, "session_id": session.session_id}, status=202)


class ResubmitHandler(BettyHandler):
    """``POST jobs/{id}/resubmit {session_id?, cluster?}``: ``cluster_submit`` of the script Betty recorded for the
    job, as a correction of it, starts; its card (the diff against the recorded script) arrives as an event, and
    nothing is submitted until a person approves it there."""

    @web.authenticated
    async def post(self, job: str) -> None:
        """202 ``{call_id, session_id}``; 404 when Betty recorded no experiment for the job."""
        # lazy: the tools and the pydantic request models; the server's extension loads without them
        from ..agent.tools.jobs import recorded_experiment
        from .models import ResubmitRequest

        ident = job_id(job)
        request = self.body(ResubmitRequest)
        if request.session_id:
            session = self.session_of(request.session_id)
        else:
            session = await self.services.desk(self.cluster_name(request.cluster))
        cluster = session.context.profile.name
        original = recorded_experiment(self.services.workspace, cluster, ident)
        if original is None:
            raise refused(404, f"job {ident} was not submitted through Betty on {cluster}: there is no recorded "
                               "script to resubmit")
        if request.partition:  # the move `cluster_why` named: the recorded script with only its placement changed
            from ..agent.tools.why import moved_resubmission  # lazy: the tool and the advisor's placements

            try:
                args = moved_resubmission(original, {"partition": request.partition, "gpu_type": request.gpu_type})
            except BettyError as error:
                raise refused(400, str(error)) from None
        else:
            args = {"script": original.script, "goal": original.goal or f"resubmit job {ident}", "replaces": ident}
        call_id = self.services.start_call(session.session_id, "cluster_submit", args,
                                           approver(self.current_user, request.face))
        self.answer({"call_id": call_id, "session_id": session.session_id}, status=202)


class WhyHandler(BettyHandler):
    """``GET clusters/{name}/jobs/{id}/why``: why one of the person's pending jobs waits (``cluster_why``)."""

    @web.authenticated
    async def get(self, name: str, job: str) -> None:
        """The Outcome; its data is the explanation (reason, priority factors, queue, fair-share, advice, lines)."""
        session = await self.services.desk(self.cluster_name(name))
        await self.call_tool(session, "cluster_why", {"job_id": job_id(job)})


class PartitionsHandler(BettyHandler):
    """``GET partitions?cluster=``: partitions, nodes and GPUs (``cluster_partitions``)."""

    @web.authenticated
    async def get(self) -> None:
        """The Outcome; its data is the partitions as a frame."""
        session = await self.services.desk(self.cluster_name(self.query("cluster")))
        await self.call_tool(session, "cluster_partitions", {})


handlers = [
    (r"/betty/api/clusters", ClustersHandler),
    (CLUSTER + r"/health", ClusterHealthHandler),
    (CLUSTER + r"/overview", ClusterOverviewHandler),
    (CLUSTER + r"/test", ClusterTestHandler),
    (CLUSTER + r"/trust", ClusterTrustHandler),
    (CLUSTER + r"/jobs/(?P<job>[^/]+)/why", WhyHandler),
    (r"/betty/api/jobs", JobsHandler),
    (r"/betty/api/jobs/history", HistoryHandler),
    (r"/betty/api/jobs/efficiency", EfficiencyHandler),
    (r"/betty/api/jobs/(?P<job>[^/]+)/cancel", CancelHandler),
    (r"/betty/api/jobs/(?P<job>[^/]+)/resubmit", ResubmitHandler),
    (r"/betty/api/jobs/(?P<job>[^/]+)/extend", ExtendHandler),
    (r"/betty/api/partitions", PartitionsHandler),
]
"""The cluster and job routes."""
