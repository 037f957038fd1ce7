"""What Betty knows besides the queue: GPU memory estimates, the wiki, and the recorded experiments."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tornado import web

from .base import BettyHandler, refused
from .open_notebook import server_root, workspace_path

if TYPE_CHECKING:
    from ..experiments.ledger import Ledger, Tracked
    from ..wiki import WikiStore
    from .models import Experiment, NotebookStatus


def model_rows() -> list[dict[str, Any]]:
    """The built-in model catalog: each architecture's shape, its parameter count and published size."""
    from ..gpu import catalog  # lazy: the GPU catalog; the server's extension loads without it

    return [{**dataclasses.asdict(entry.architecture), "params": entry.architecture.params(),
             "published_params": entry.published_params, "source": entry.source, "aliases": list(entry.aliases)}
            for entry in catalog()]


def experiment_json(tracked: "Tracked") -> "Experiment":
    """One recorded experiment with the state its job was last seen in, its page and its notebook."""
    e = tracked.experiment
    found: "Experiment" = {
        "slug": e.slug, "job_id": e.job_id, "cluster": e.cluster, "submitted": e.submitted, "goal": e.goal,
        "script": e.script, "script_path": e.script_path, "partition": e.partition,
        "resources": dict(e.resources), "gpu_estimate": e.gpu_estimate, "state": tracked.state,
        "finished": tracked.finished, "page": f"wiki/{e.page}", "notebook": e.notebook}
    if e.chain:
        found["segments"] = [str(ident) for ident in e.chain.get("jobs") or []]
    return found


class ModelsHandler(BettyHandler):
    """``GET gpu/models``: the built-in model catalog."""

    @web.authenticated
    def get(self) -> None:
        """``{models: [...]}``."""
        self.answer({"models": model_rows()})


class EstimateHandler(BettyHandler):
    """``POST gpu/estimate``: peak GPU memory of one job (``gpu_estimate``)."""

    @web.authenticated
    async def post(self) -> None:
        """The Outcome; its data is the estimate as JSON."""
        await self.call_tool(await self.services.desk(), "gpu_estimate", self.body_object())


class AdviseHandler(BettyHandler):
    """``POST gpu/advise``: where a job fits, and what to change when it fits nowhere (``gpu_advise``)."""

    @web.authenticated
    async def post(self) -> None:
        """The Outcome; its data is the advice as JSON."""
        await self.call_tool(await self.services.desk(), "gpu_advise", self.body_object())


class WikiHandler(BettyHandler):
    """Base of the wiki routes: the workspace's wiki, or 404 when it has none."""

    def store(self) -> "WikiStore":
        """The workspace's wiki."""
        from ..wiki import WikiStore  # lazy: the wiki needs filelock; the server's extension loads without it

        workspace = self.services.workspace
        if not workspace.wiki.is_dir():
            raise refused(404, f"{workspace.root} has no wiki yet; create it with `betty init {workspace.root}`")
        return WikiStore(workspace.wiki)


class PagesHandler(WikiHandler):
    """``GET wiki``: every page."""

    @web.authenticated
    def get(self) -> None:
        """``{pages: [{name, title}]}``, sorted by name."""
        pages = self.store().list()
        self.answer({"pages": [{"name": p.name, "title": str(p.frontmatter.get("name") or p.name)} for p in pages]})


class PageHandler(WikiHandler):
    """``GET wiki/page?name=``: one page, as stored."""

    @web.authenticated
    def get(self) -> None:
        """``{name, text}``; 400 for a name the wiki refuses (one leaving it, say), 404 for a missing page."""
        name = self.query("name")
        if name is None:
            raise refused(400, "say which page: ?name=clusters/dev-cluster.md")
        store = self.store()
        if not store.path(name).is_file():
            raise refused(404, f"there is no wiki page {name[:100]!r}; GET wiki lists them")
        page = store.read(name)
        self.answer({"name": page.name, "text": page.text})


class SearchHandler(BettyHandler):
    """``GET wiki/search?q=``: pages holding every word (``wiki_search``)."""

    @web.authenticated
    async def get(self) -> None:
        """The Outcome of ``wiki_search``."""
        await self.call_tool(await self.services.desk(), "wiki_search", {"query": self.query("q", "")})


class ExperimentsHandler(BettyHandler):
    """Base of the experiment routes: the workspace's ledger."""

    def ledger(self) -> "Ledger":
        """The ledger of recorded experiments."""
        from ..experiments.ledger import Ledger  # lazy: the ledger (SQLite); the server's extension loads without it

        return Ledger(self.services.workspace.ledger_path)


class ExperimentListHandler(ExperimentsHandler):
    """``GET experiments``: every recorded experiment, oldest first."""

    @web.authenticated
    def get(self) -> None:
        """``{experiments: [Experiment + {state, finished, page, notebook}]}``."""
        self.answer({"experiments": [experiment_json(t) for t in self.ledger().all()]})


class ExperimentHandler(ExperimentsHandler):
    """``GET experiments/{slug}``: one experiment (by slug or job id)."""

    @web.authenticated
    def get(self, slug: str) -> None:
        """The experiment, or 404."""
        tracked = self.ledger().get(slug)
        if tracked is None:
            raise refused(404, f"no experiment {slug[:80]!r} is recorded in {self.services.workspace.root}")
        self.answer(experiment_json(tracked))


class PipelineHandler(ExperimentsHandler):
    """``GET experiments/{slug}/pipeline``: a recorded pipeline's steps, states and edges, as the ledger has them."""

    @web.authenticated
    def get(self, slug: str) -> None:
        """The PipelineGraph, or 404 when no pipeline is recorded under ``slug``."""
        # lazy: the pipeline's record; the server's extension loads without it
        from ..experiments.chain_page import is_pipeline
        from ..experiments.pipeline import graph

        tracked = self.ledger().get(slug)
        if tracked is None or not is_pipeline(tracked.experiment):
            raise refused(404, f"no pipeline {slug[:80]!r} is recorded in {self.services.workspace.root}")
        self.answer(graph(tracked.experiment))


class OpenNotebooksHandler(ExperimentsHandler):
    """``PUT notebooks/open``: the notebooks one JupyterLab page has open, so Betty leaves their files alone."""

    @web.authenticated
    def put(self) -> None:
        """Hold a short lease on each (replacing the page's earlier ones); answer the status lines of the
        experiments' and hand over the approved cell changes waiting for them."""
        # lazy: the lease table and the status lines; the server's extension loads without them
        from ..experiments.editors import OpenNotebooks
        from ..experiments.notebook_changes import NotebookChanges
        from ..experiments.status_cell import expected_line
        from .models import CellChangeJson, OpenNotebooksRequest

        request = self.body(OpenNotebooksRequest)
        workspace = self.services.workspace
        root = server_root(self.settings, self.services)
        named = {workspace_path(root, workspace.root, path): path for path in request.notebooks}
        named.pop(None, None)
        OpenNotebooks(workspace.ledger_path).hold(request.holder, [name for name in named if name])
        ledger = self.ledger()
        statuses: list[NotebookStatus] = [
            {"path": named[t.experiment.notebook], "job_id": t.experiment.job_id, "cluster": t.experiment.cluster,
             "state": t.state, "status": expected_line(ledger, t)}
            for t in ledger.all() if t.experiment.notebook in named]
        taken = NotebookChanges(workspace.ledger_path).take(name for name in named if name)
        changes = [cast(CellChangeJson, change.as_json()) for change in taken]
        self.answer({"notebooks": statuses, "changes": changes})


handlers = [
    (r"/betty/api/gpu/models", ModelsHandler),
    (r"/betty/api/gpu/estimate", EstimateHandler),
    (r"/betty/api/gpu/advise", AdviseHandler),
    (r"/betty/api/wiki", PagesHandler),
    (r"/betty/api/wiki/page", PageHandler),
    (r"/betty/api/wiki/search", SearchHandler),
    (r"/betty/api/experiments", ExperimentListHandler),
    (r"/betty/api/notebooks/open", OpenNotebooksHandler),
    (r"/betty/api/experiments/(?P<slug>[^/]+)", ExperimentHandler),
    (r"/betty/api/experiments/(?P<slug>[^/]+)/pipeline", PipelineHandler),
]
"""The GPU, wiki and experiment routes."""
