"""The side panel's node kernels (``%betty kernel``): the person's running allocations, and their Stop button.

``GET node-kernels?cluster=`` lists the node kernels this project started on the cluster whose
allocations have not ended, each read with ``node_kernel_status`` (its state, its end, its line).
``POST node-kernels/{token}/stop {job_id, cluster?}`` is the person's own click on Stop: it runs
``node_kernel_stop`` as their call (a model is never offered it), which cancels only the job
recorded for that kernel.
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
]
"""The node kernels' routes."""
