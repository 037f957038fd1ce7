"""The side panel's node kernels (``%betty kernel``): the person's running allocations, and their Stop button.

``GET node-kernels?cluster=`` lists the node kernels this project started on the cluster whose
allocations have not ended, each read with ``node_kernel_status`` (its state, its end, its line).
``POST node-kernels/{token}/stop {job_id, cluster?}`` is the person's own click on Stop: it runs
``node_kernel_stop`` as their call (a model is never offered it), which cancels only the job
recorded for that kernel. ``POST node-kernels/{token}/forwards`` is the notebook's kernel asking for the node
kernel's ports to be forwarded over the connection this server already holds (no second login from the kernel):
their ports on 127.0.0.1 here; ``DELETE`` closes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tornado import web

from ..agent.vocabulary import Face
from .base import BettyHandler, approver, refused

_TOKEN = r"(?P<token>[^/]+)"  # checked by node_kernel_stop's arguments: 400 for anything but a token


class NodeKernelsHandler(BettyHandler):
    """``GET node-kernels?cluster=``: the project's node kernels on the cluster whose allocations have not ended."""

    @web.authenticated
    async def get(self) -> None:
        """``{cluster, kernels: [{kernel, job_id, state, line, ends, seconds_left, slug, notebook_kernel}]}``, newest first."""
        # lazy: the node kernel's files and the ledger; the server's extension loads without them
        from ..compute.node_kernel import recorded_kernels
        from ..experiments.ledger import Ledger

        session = await self.services.desk(self.cluster_name(self.query("cluster")))
        cluster = session.context.profile.name
        workspace = self.services.workspace
        ledger = Ledger(workspace.ledger_path)
        kernels: list[dict[str, Any]] = []
        for kernel in recorded_kernels(workspace.state):
            tracked = ledger.get(kernel.job_id) if kernel.cluster == cluster else None
            if tracked is None or tracked.finished or tracked.experiment.cluster != cluster:
                continue  # another cluster's, or one the watcher saw end
            outcome = await self.assistant.call(session.session_id, "node_kernel_status",
                                                {"kernel": kernel.token, "job_id": kernel.job_id}, self.person)
            data = outcome.data if outcome.ok and isinstance(outcome.data, dict) else None
            if data is None or data.get("finished"):
                continue
            kernels.append({"kernel": kernel.token, "job_id": kernel.job_id, "state": data["state"],
                            "line": data["line"], "ends": data.get("ends"), "seconds_left": _seconds_left(data),
                            "slug": tracked.experiment.slug, "notebook_kernel": kernel.notebook_kernel})
        self.answer({"cluster": cluster, "kernels": kernels})


class NodeKernelStopHandler(BettyHandler):
    """``POST node-kernels/{token}/stop {job_id, cluster?}``: the person's Stop: ``node_kernel_stop`` as their call."""

    @web.authenticated
    async def post(self, token: str) -> None:
        """The Outcome of ``node_kernel_stop`` (``cancelled job 12 …`` or ``job 12 already ended``)."""
        body = self.body_object()
        job, cluster = body.get("job_id"), body.get("cluster")
        if not isinstance(job, str) or (cluster is not None and not isinstance(cluster, str)):
            raise refused(400, "Stop needs the allocation's job_id (and optionally its cluster) as text")
        session = await self.services.desk(self.cluster_name(cluster))
        await self.call_tool(session, "node_kernel_stop", {"kernel": token, "job_id": job},
                             person=approver(self.current_user, Face.SIDE_PANEL))


class NodeKernelForwardsHandler(BettyHandler):
    """``POST|DELETE node-kernels/{token}/forwards``: the node kernel's ports, forwarded over this server's link."""

    @web.authenticated
    async def post(self, token: str) -> None:
        """``{ports: {shell_port: …, …}}`` on 127.0.0.1 (``ports`` is null when the cluster's nodes are reached
        directly); 409 while the kernel does not listen."""
        # lazy: the node kernel's files and forwards; the server's extension loads without them
        from ..compute.node_kernel import Ready, hold_forwards, recorded

        kernel = recorded(self.services.workspace.state, token)
        session = await self.services.desk(self.cluster_name(kernel.cluster))
        outcome = await self.assistant.call(session.session_id, "node_kernel_status",
                                            {"kernel": token, "job_id": kernel.job_id}, self.person)
        data = outcome.data if outcome.ok and isinstance(outcome.data, dict) else {}
        where = data.get("ready")
        if not where or data.get("finished"):
            raise refused(409, f"node kernel job {kernel.job_id} is not listening: {outcome.summary.strip()[:200]}")
        cluster = session.context.cluster
        link = cluster.link if cluster is not None else session.context.slurm.transport
        ready = Ready(str(where["ip"]), {name: int(port) for name, port in where["ports"].items()}, str(where["host"]),
                      str(where.get("checked", "")))
        self.answer({"ports": hold_forwards(token, link, ready)})

    @web.authenticated
    async def delete(self, token: str) -> None:
        """Close the forwards held for the node kernel (none is fine): ``{}``."""
        from ..compute.node_kernel import kernel_files, release_forwards  # lazy: as above

        kernel_files(self.services.workspace.state, token)  # a one-line 400 for anything but a token
        release_forwards(token)
        self.answer({})


def _seconds_left(status: dict[str, Any]) -> float | None:
    """Seconds until the allocation's end, read with the cluster's clock as ``node_kernel_status`` wrote it."""
    try:
        end = datetime.fromisoformat(str(status["ends"]))
    except (KeyError, TypeError, ValueError):
        return None
    return max((end - datetime.now(end.tzinfo)).total_seconds(), 0.0)


handlers = [
    (r"/betty/api/node-kernels", NodeKernelsHandler),
    (r"/betty/api/node-kernels/" + _TOKEN + r"/stop", NodeKernelStopHandler),
    (r"/betty/api/node-kernels/" + _TOKEN + r"/forwards", NodeKernelForwardsHandler),
]
"""The node kernels' routes."""
