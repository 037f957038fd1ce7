"""Building an agent session from configuration (the one composition root every host uses), and keeping it."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BettyError, ConfigError, UsageError
from . import events as ev
from .loop import AgentSession, Limits

if TYPE_CHECKING:
    from ..config import BettyConfig
    from ..experiments.workspace import Workspace
    from .approvals import ApprovalBroker

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def new_session_id() -> str:
    """A fresh session id."""
    return f"s-{uuid.uuid4().hex[:12]}"


def sessions_dir(workspace: "Workspace") -> Path:
    """Where sessions are kept so ``--session ID`` can resume them."""
    return workspace.state / "sessions"


async def open_session(workspace: "Workspace", config: "BettyConfig", *, cluster: str | None = None,
                       mode: str = "confirm", session_id: str | None = None, broker: "ApprovalBroker | None" = None,
                       stream: ev.EventStream | None = None, require_model: bool = True) -> AgentSession:
    """Everything a session needs, from Betty's configuration; resumes ``session_id`` when it was kept.

    Without a configured chat model this raises ConfigError, unless ``require_model`` is
    False: then the session still runs a person's tool calls, and asking it explains how to
    configure a model.
    """
    from ..cluster.slurm import SlurmClient
    from .actions import ActionLog
    from .approvals import ApprovalBroker
    from .llm import ChatModel, LLMSettings
    from .policy import ApprovalPolicy, SessionGrants
    from .prompt import persona_text, system_prompt
    from .registry import default_registry
    from .tools.base import ToolContext

    ident = session_id or new_session_id()
    if not _SESSION_ID.match(ident):
        raise UsageError(f"{ident[:40]!r} is not a session id (letters, digits, - and _)")
    kept, tokens = _load(workspace, ident)  # before any connection opens: a damaged file leaks nothing
    try:
        model: ChatModel | None = ChatModel(LLMSettings.from_config(config.llm))
        no_model = ""
    except ConfigError as error:
        if require_model:
            raise
        model, no_model = None, str(error)
    profile = config.profile(cluster)
    slurm = SlurmClient(profile.open_transport(), work_dir=profile.work_dir, job_env=profile.job_env,
                        readable_roots=profile.readable_roots)
    scratchpad = workspace.state / "scratchpads" / f"{ident}.md"
    context = ToolContext(profile=profile, slurm=slurm, workspace=workspace, session_id=ident, scratchpad=scratchpad)
    registry = default_registry()
    partitions, user = await _cluster_facts(slurm)
    prompt = system_prompt(persona_text(workspace.wiki), registry, profile.policy(), profile.name, partitions)
    messages = [{"role": "system", "content": prompt}, *kept[1:]] if kept else None
    defaults = Limits()
    limits = Limits(max_iterations=int(config.llm.get("max_iterations", defaults.max_iterations)),
                    max_tokens=int(config.llm.get("max_tokens", defaults.max_tokens)),
                    history_chars=int(config.llm.get("history_chars", defaults.history_chars)))
    session = AgentSession(
        session_id=ident, model=model, no_model_reason=no_model, registry=registry, context=context,
        policy=ApprovalPolicy(mode, config.rules), grants=SessionGrants(), broker=broker or ApprovalBroker(),
        stream=stream or ev.EventStream(ident), actions=ActionLog(workspace.root), system_prompt=prompt,
        user=user, limits=limits, messages=messages,
    )
    session.tokens = tokens  # the token budget is per session, across resumes
    return session


async def _cluster_facts(slurm: Any) -> tuple[Any, str | None]:
    """The partitions and the login name, when the cluster answers (the prompt says 'unknown' otherwise)."""
    try:
        partitions = await slurm.partitions()
        who = await slurm.transport.run(["id", "-un"])
    except BettyError:
        return None, None
    return partitions, who.stdout.strip() or None


def save(session: AgentSession, workspace: "Workspace") -> Path:
    """Keep the session's messages so it can be resumed."""
    path = sessions_dir(workspace) / f"{session.session_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps({"messages": session.messages, "tokens": session.tokens}, default=str))
    os.replace(temp, path)
    return path


def _load(workspace: "Workspace", session_id: str) -> tuple[list[dict[str, Any]], int]:
    """A kept session's messages and the tokens it used (nothing when it was never kept)."""
    path = sessions_dir(workspace) / f"{session_id}.json"
    if not path.exists():
        return [], 0
    try:
        kept = json.loads(path.read_text())
        messages: list[dict[str, Any]] = kept["messages"]
        tokens = int(kept.get("tokens", 0))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"session {session_id} cannot be resumed: {path} is unreadable ({exc})") from exc
    return messages, tokens
