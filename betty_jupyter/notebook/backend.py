"""Where a notebook's Betty runs: in the Jupyter server's extension, or in this kernel.

:func:`connect` looks for the Betty extension of the Jupyter server that started this
kernel (its ``jpserver-<pid>.json`` in Jupyter's runtime directory, matched by the
kernel's parent process, or ``$BETTY_SERVER_URL`` + ``$BETTY_SERVER_TOKEN``). When it
answers, the magics use it: the same sessions, approvals, watcher and action log as the
side panel (:class:`ServerBackend`). Otherwise the core runs here (:class:`LocalBackend`).
Both offer the same calls, so the magics and widgets never know which one they hold.
"""

from __future__ import annotations

import getpass
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from jupyter_core.paths import jupyter_runtime_dir

from ..agent.vocabulary import Face
from ..cluster.sync import run_sync, submit
from ..config import load_config
from ..errors import ApprovalError, BettyError, TransportError, UsageError
from ..experiments.workspace import Workspace, find_workspace

if TYPE_CHECKING:
    from ..agent.actions import ActionRecord
    from ..agent.assistant import Assistant
    from ..agent.events import AnyEvent, ApprovalRequest
    from ..agent.models import Preview, ToolOutcome
    from ..agent.site import SitePolicy
    from ..config import BettyConfig

Listener = Callable[["AnyEvent"], None]
POLL_SECONDS = 25
_TIMEOUT = 30.0


class Backend(Protocol):
    """What the magics and widgets need from Betty's core, wherever it runs."""

    where: str
    person: str
    shared: bool
    """Whether the side panel shares these sessions (and can answer approvals while a cell runs)."""

    def clusters(self) -> list[dict[str, Any]]:
        """The configured clusters: ``{name, transport, host, default}``."""
        ...

    def site(self) -> "SitePolicy":
        """What the site's policy decides of the modes (its file, the modes it allows)."""
        ...

    def policy(self, usage: bool = False) -> dict[str, Any]:
        """The site's policy in effect, as ``GET policy`` answers: ``{source, modes, mcp, fields}``; ``usage``: with
        the cost meter (``GET policy?usage=1``)."""
        ...

    def open_session(self, session_id: str, cluster: str | None, mode: str | None) -> dict[str, Any]:
        """Open (or resume) a session; its ``{session_id, cluster, mode, busy, last_seq, has_model}``."""
        ...

    def set_mode(self, session_id: str, mode: str) -> None:
        """Switch the session's agent mode."""
        ...

    def start_call(self, session_id: str, tool: str, args: Mapping[str, Any], call_id: str) -> "Future[ToolOutcome]":
        """Start a person's tool call; the future resolves once it ran, was refused or was denied."""
        ...

    def ask(self, session_id: str, prompt: str) -> None:
        """Start the agent on ``prompt``; its events arrive through :meth:`subscribe`."""
        ...

    def stop(self, session_id: str) -> bool:
        """Stop the agent's answer."""
        ...

    def subscribe(self, session_id: str, listener: Listener, after: int) -> Callable[[], None]:
        """Send the session's events after ``after`` to ``listener`` (from another thread); returns unsubscribe."""
        ...

    def respond(self, approval_id: str, decision: str, args: Mapping[str, Any] | None = None,
                digest: str | None = None) -> None:
        """Answer an approval as this person (``digest``: the card they saw; another card's is refused)."""
        ...

    def repreview(self, approval_id: str, args: Mapping[str, Any]) -> "Preview":
        """The preview of a person's edit of an open card, checked as the model's call is; BettyError when refused."""
        ...

    def start_estimate(self, approval_id: str) -> str:
        """When and where an open submission card's job would start, one line ("" for a card that submits nothing)."""
        ...

    def actions(self, session_id: str | None, limit: int) -> list["ActionRecord"]:
        """The newest action-log records, oldest first."""
        ...

    def pending(self) -> list["ApprovalRequest"]:
        """Every approval waiting for a person, whoever asked (automations, other sessions), oldest first."""
        ...

    def project(self) -> Path | None:
        """The project folder this Betty works in (where a cell run is staged); None when it does not say."""
        ...


def connect(workspace_dir: Path | None = None, parent_pid: int | None = None) -> Backend:
    """The Betty extension of this kernel's Jupyter server when it answers, else the core in this kernel."""
    found = find_server(parent_pid)
    if found is not None:
        return ServerBackend(*found)
    return LocalBackend(find_workspace(workspace_dir or Path.cwd()))


def open_cluster_early(parent_pid: int | None = None) -> None:
    """Where Betty will run in this kernel (no Jupyter server's Betty extension answers), start logging in to the
    default cluster in the background, so the login overlaps loading the agent for a first read; the server's
    extension holds its own links. Nothing runs on the cluster; a login that would ask the person waits for the
    command, and a profile that cannot be used is left for the command to report."""
    if find_server(parent_pid) is not None:
        return
    from ..cluster.shared import shared_cluster  # lazy: the Slurm client; only a kernel that reads a cluster needs it

    try:
        shared_cluster(load_config().profile(None)).open_early()
    except Exception:  # the command meets it again and reports it as it always has; starting early changes nothing
        pass


def find_server(parent_pid: int | None = None) -> tuple[str, str] | None:
    """``(base_url, token)`` of the Betty server extension of the server that started this kernel, if any."""
    url = os.environ.get("BETTY_SERVER_URL")
    if url:
        return url, os.environ.get("BETTY_SERVER_TOKEN", "")
    pid = parent_pid if parent_pid is not None else os.getppid()
    for path in sorted(Path(jupyter_runtime_dir()).glob("jpserver-*.json")):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if info.get("pid") == pid and _has_betty(str(info.get("url", "")), str(info.get("token", ""))):
            return str(info["url"]), str(info.get("token", ""))
    return None


def _has_betty(url: str, token: str) -> bool:
    try:
        return bool(_http("GET", url, token, "health", timeout=5.0).get("status") == "ok")
    except BettyError:
        return False


class LocalBackend:
    """Betty's core in this kernel: one :class:`Assistant` on Betty's background event loop."""

    def __init__(self, workspace_dir: Path, config: "BettyConfig | None" = None, watch: bool = True) -> None:
        # lazy: the agent (pydantic); a notebook served by the server's extension never needs it
        from ..agent.assistant import Assistant

        self.workspace = Workspace.at(workspace_dir)
        self.where = f"this kernel (project {self.workspace.root})"
        self.shared = False
        self.person = f"{getpass.getuser()} (notebook)"
        self.assistant: Assistant = Assistant(self.workspace, config or load_config())
        if watch:
            run_sync(_call_soon(self.assistant.watch))

    def _run(self, work: Any, timeout: float | None = None) -> Any:
        return run_sync(work, timeout)

    def clusters(self) -> list[dict[str, Any]]:
        """The configured clusters."""
        return self.assistant.clusters()

    def site(self) -> "SitePolicy":
        """The site's policy this kernel's Betty read."""
        return self.assistant.config.site

    def policy(self, usage: bool = False) -> dict[str, Any]:
        """The site's policy this kernel's Betty read, field by field (``usage``: with the cost meter)."""
        config = self.assistant.config
        if usage and config.site.budgets and config.cluster_names:
            # lazy: the accounting reads and the shared cluster; only the cost meter needs them
            from ..agent.site_gate import policy_with_use
            from ..cluster.shared import shared_cluster

            profile = config.profile(None)
            view: dict[str, Any] = self._run(policy_with_use(config.site, profile, shared_cluster(profile).slurm))
            return view
        return config.site.as_dict()

    def open_session(self, session_id: str, cluster: str | None, mode: str | None) -> dict[str, Any]:
        """Open or resume a session in this kernel."""
        session = self._run(self.assistant.session(session_id, cluster=cluster, mode=mode))
        return next(s.as_dict() for s in self.assistant.sessions() if s.session_id == session.session_id)

    def set_mode(self, session_id: str, mode: str) -> None:
        """Switch the session's agent mode."""
        self.assistant.set_mode(session_id, mode)

    def start_call(self, session_id: str, tool: str, args: Mapping[str, Any], call_id: str) -> "Future[ToolOutcome]":
        """Start a person's tool call on the background loop."""
        return submit(self.assistant.call(session_id, tool, args, self.person, call_id))

    def ask(self, session_id: str, prompt: str) -> None:
        """Start the agent."""
        self._run(_call_soon(lambda: self.assistant.ask(session_id, prompt)))

    def stop(self, session_id: str) -> bool:
        """Stop the agent's answer."""
        return bool(self._run(_call_soon(lambda: self.assistant.stop(session_id))))

    def subscribe(self, session_id: str, listener: Listener, after: int) -> Callable[[], None]:
        """Events straight from the session's stream."""
        return self.assistant.opened(session_id).stream.subscribe(listener, after=after)

    def respond(self, approval_id: str, decision: str, args: Mapping[str, Any] | None = None,
                digest: str | None = None) -> None:
        """Answer on the loop that owns the approval; an edit is checked first, and a refused one leaves it open."""
        if decision == "edited" and args is not None:
            self.repreview(approval_id, args)
        self._run(_call_soon(lambda: self.assistant.respond(approval_id, decision, self.person, args, digest)))

    def repreview(self, approval_id: str, args: Mapping[str, Any]) -> "Preview":
        """The edit checked and previewed by the session's own tool, on the loop that owns the approval."""
        preview: "Preview" = self._run(self.assistant.repreview(approval_id, args))
        return preview

    def start_estimate(self, approval_id: str) -> str:
        """When and where an open submission card's job would start (one line; "" for other cards)."""
        estimate: str = self._run(self.assistant.start_estimate(approval_id))
        return estimate

    def actions(self, session_id: str | None, limit: int) -> list["ActionRecord"]:
        """From the workspace's action log."""
        return self.assistant.history(session_id, limit)

    def pending(self) -> list["ApprovalRequest"]:
        """The open approvals of this kernel's Betty."""
        return list(self._run(_call_soon(self.assistant.pending)))

    def project(self) -> Path | None:
        """The project this kernel's Betty works in."""
        return self.workspace.root

    def close(self) -> None:
        """Stop the watcher and the sessions, then close the kernel's links to the clusters."""
        from ..cluster.shared import closing_clusters  # lazy: the Slurm client; a kernel that never reached one skips it

        self._run(closing_clusters(self.assistant.close()), timeout=30)


async def _call_soon(work: Callable[[], Any]) -> Any:
    """Run a plain function on the background loop (what touches the loop's objects must)."""
    return work()


class ServerBackend:
    """The Betty extension of the Jupyter server, over its REST API (docs/server-api.md)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self._token = url.rstrip("/") + "/", token
        self.where = f"the Jupyter server's Betty extension at {self.url}"
        self.shared = True
        self.person = f"{getpass.getuser()} (notebook)"
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="betty-server")

    def _call(self, method: str, route: str, body: Any = None, timeout: float = _TIMEOUT,
              **query: Any) -> dict[str, Any]:
        return _http(method, self.url, self._token, route, body, timeout, query)

    def node_kernel_forwards(self, token: str) -> dict[str, int] | None:
        """POST node-kernels/{token}/forwards: the node kernel's ports on 127.0.0.1, forwarded over the connection
        the server holds (None when the server reaches the node directly)."""
        ports = self._call("POST", f"node-kernels/{token}/forwards", {}).get("ports")
        return {str(name): int(port) for name, port in ports.items()} if isinstance(ports, dict) else None

    def release_node_kernel_forwards(self, token: str) -> None:
        """DELETE node-kernels/{token}/forwards."""
        self._call("DELETE", f"node-kernels/{token}/forwards")

    def clusters(self) -> list[dict[str, Any]]:
        """GET clusters."""
        clusters: list[dict[str, Any]] = self._call("GET", "clusters")["clusters"]
        return clusters

    def policy(self, usage: bool = False) -> dict[str, Any]:
        """GET policy (``?usage=1``: with the cost meter)."""
        answer: dict[str, Any] = self._call("GET", "policy", usage="1") if usage else self._call("GET", "policy")
        return answer

    def site(self) -> "SitePolicy":
        """GET policy: the server's site policy, as far as the modes go."""
        from ..agent.site import SitePolicy  # lazy: only a mode switch asks

        answer = self.policy()
        source = answer.get("source")
        return SitePolicy(source=Path(source) if isinstance(source, str) else None,
                          modes=tuple(str(mode) for mode in answer.get("modes") or ()) or SitePolicy().modes)

    def open_session(self, session_id: str, cluster: str | None, mode: str | None) -> dict[str, Any]:
        """POST sessions."""
        return self._call("POST", "sessions", {"session_id": session_id, "cluster": cluster, "mode": mode})

    def set_mode(self, session_id: str, mode: str) -> None:
        """PUT sessions/{id}/mode."""
        self._call("PUT", f"sessions/{_quote(session_id)}/mode", {"mode": mode})

    def start_call(self, session_id: str, tool: str, args: Mapping[str, Any], call_id: str) -> "Future[ToolOutcome]":
        """POST sessions/{id}/tools/{tool}, waiting for the outcome in a worker thread."""

        def call() -> "ToolOutcome":
            answer = self._call("POST", f"sessions/{_quote(session_id)}/tools/{_quote(tool)}",
                                {"args": dict(args), "wait": True, "call_id": call_id, "face": Face.NOTEBOOK},
                                timeout=3600)
            # lazy: pydantic and pandas; `%load_ext` and connecting to the server never need them
            from ..agent.wire import outcome_from_json

            return outcome_from_json(answer)

        future = self._pool.submit(call)
        # lazy: the same modules, loaded here while the request is on its way (one import, whichever thread asks first)
        from ..agent import wire  # noqa: F401

        return future

    def ask(self, session_id: str, prompt: str) -> None:
        """POST sessions/{id}/ask."""
        self._call("POST", f"sessions/{_quote(session_id)}/ask", {"prompt": prompt})

    def stop(self, session_id: str) -> bool:
        """POST sessions/{id}/stop."""
        return bool(self._call("POST", f"sessions/{_quote(session_id)}/stop", {}).get("stopped"))

    def subscribe(self, session_id: str, listener: Listener, after: int) -> Callable[[], None]:
        """Long-polls GET sessions/{id}/events in a thread, handing each event to ``listener``."""
        stop = threading.Event()

        def poll() -> None:
            # lazy: pydantic, loaded by this thread while the cell that opened the session goes on
            from ..agent.events import parse_event

            seq = after
            while not stop.is_set():
                try:
                    answer = self._call("GET", f"sessions/{_quote(session_id)}/events", timeout=POLL_SECONDS + 10,
                                        after=seq, wait=POLL_SECONDS)
                except BettyError:
                    stop.wait(2.0)  # the server restarts or the link drops: try again shortly
                    continue
                for data in answer.get("events", []):
                    event = parse_event(data)
                    if event.seq > seq and not stop.is_set():
                        seq = event.seq
                        listener(event)

        threading.Thread(target=poll, name=f"betty-events-{session_id}", daemon=True).start()
        return stop.set

    def respond(self, approval_id: str, decision: str, args: Mapping[str, Any] | None = None,
                digest: str | None = None) -> None:
        """POST approvals/{id}, as the notebook (the action log names the face after the person)."""
        body: dict[str, Any] = {"decision": decision, "face": Face.NOTEBOOK}
        if args is not None:
            body["args"] = dict(args)
        if digest:
            body["digest"] = digest
        self._call("POST", f"approvals/{_quote(approval_id)}", body)

    def repreview(self, approval_id: str, args: Mapping[str, Any]) -> "Preview":
        """POST approvals/{id}/preview: the server checks the edit with the session's own tool."""
        from ..agent.models import Preview  # lazy: pydantic; `%load_ext` and connecting to the server never need it

        answer = self._call("POST", f"approvals/{_quote(approval_id)}/preview", {"args": dict(args)})
        return Preview.model_validate(answer["preview"])

    def start_estimate(self, approval_id: str) -> str:
        """GET approvals/{id}/start: when and where an open submission card's job would start."""
        return str(self._call("GET", f"approvals/{_quote(approval_id)}/start", timeout=60)["estimate"])

    def actions(self, session_id: str | None, limit: int) -> list["ActionRecord"]:
        """GET actions."""
        # lazy: pydantic; `%load_ext` and connecting to the server never need it
        from ..agent.actions import ActionRecord

        query: dict[str, Any] = {"limit": limit}
        if session_id:
            query["session"] = session_id
        return [ActionRecord.model_validate(item) for item in self._call("GET", "actions", **query)["actions"]]

    def pending(self) -> list["ApprovalRequest"]:
        """GET approvals: those of every session on the server, automations' included."""
        # lazy: pydantic; `%load_ext` and connecting to the server never need it
        from ..agent.events import WaitingApproval

        return [WaitingApproval.model_validate(item) for item in self._call("GET", "approvals")["approvals"]]

    def project(self) -> Path | None:
        """GET health's ``project``: the folder the server works in (None from a server that does not say)."""
        said = self._call("GET", "health").get("project")
        return Path(said) if isinstance(said, str) and said else None


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _http(method: str, base: str, token: str, route: str, body: Any = None, timeout: float = _TIMEOUT,
          query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One JSON request to ``base`` + ``betty/api/`` + ``route``; Betty's errors for the error answers."""
    url = base.rstrip("/") + "/betty/api/" + route
    if query:
        url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            text = answer.read()
    except urllib.error.HTTPError as error:
        with error:  # it holds the connection open until closed
            body = error.read()
        raise _error(error.code, body) from None
    except (urllib.error.URLError, OSError) as error:
        raise TransportError(f"Betty's server at {base} does not answer ({error})") from None
    parsed = json.loads(text) if text else {}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _error(status: int, body: bytes) -> BettyError:
    try:
        message = str(json.loads(body).get("error") or json.loads(body).get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    message = message or f"Betty's server answered {status}"
    if status == 409:
        return ApprovalError(message)
    if status >= 500:
        return TransportError(message)
    return UsageError(message)
