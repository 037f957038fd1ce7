"""Building an agent session from one spec and Betty's configuration (the one builder every host uses), and keeping it.

A host says what it wants of a session in a :class:`SessionSpec` (its cluster, mode, broker,
action log, task, tools, limits, gate) and :func:`open_session` builds the session once,
complete: nothing patches a session afterwards (its parts are read-only).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, SiteRefusal, UsageError
from . import events as ev
from .actions import ActionLog
from .approvals import ApprovalBroker
from .llm import ChatModel, LLMSettings, uses_demo_model
from .loop import AgentSession, Gate, Limits, SessionParts
from .policy import ApprovalPolicy, SessionGrants
from .offer import FIRST_REQUEST_TOKENS, MIN_CONTEXT, ToolOffer
from .prompt import allowlist_text, persona_text, system_prompt
from .vocabulary import Mode

if TYPE_CHECKING:
    from ..transport.interface import Transport
    from ..config import BettyConfig
    from ..experiments.workspace import Workspace
    from .approvals import Approver

_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MIN_HISTORY_CHARS = 6000


@dataclass(frozen=True)
class SessionSpec:
    """What a host asks of a session; :func:`open_session` builds it from this and Betty's configuration."""

    session_id: str | None = None
    """Resume this session when it was kept (default: a new one)."""
    cluster: str | None = None
    """The cluster profile (default: the active one)."""
    mode: str | None = None
    """How much its agent may do without asking: off, propose, confirm or auto (default: confirm, or the site's
    default mode where its policy does not allow confirm)."""
    broker: "Approver | None" = None
    """Where its approval cards wait (default: a broker of its own)."""
    actions: "ActionLog | None" = None
    """The action log its calls are written to (default: the workspace's)."""
    stream: ev.EventStream | None = None
    """Its event stream (default: a new one)."""
    listeners: tuple[ev.Subscriber, ...] = ()
    """Subscribed to its stream before it is built (an automation run's transcript and control)."""
    task: str | None = None
    """What it works on for someone else (an automation): shown on its cards."""
    tools: tuple[str, ...] | None = None
    """Only these of Betty's tools (default: every tool); the system prompt lists them all."""
    limits: Limits | None = None
    """Its breakers and context budget (default: :func:`configured_limits`)."""
    gate: Gate | None = None
    """Awaited before each tool call (an automation's pause and kill switch)."""
    require_model: bool = True
    """Without a configured chat model: False still builds it (a person's calls run, asking explains the fix)."""
    transport: "Transport | None" = None
    """Its own link to the cluster, closed with it (default: the process's shared cluster of the profile, which the
    session never closes); a fast test passes Betty's :class:`~betty_jupyter.cluster.scripted.ScriptedTransport`."""
    reads_cluster_facts: bool = True
    """False: the prompt's partitions and login name are not asked (a session that only runs one person's call)."""
    prompts_model: bool = True
    """False: no system prompt is written, the persona page is not read (a session that only runs one person's call
    and never asks the model)."""


def new_session_id() -> str:
    """A fresh session id."""
    return f"s-{uuid.uuid4().hex[:12]}"


def sessions_dir(workspace: "Workspace") -> Path:
    """Where sessions are kept so ``--session ID`` can resume them."""
    return workspace.state / "sessions"


def configured_limits(config: "BettyConfig") -> Limits:
    """A session's breakers and context budget as ``llm.max_iterations``, ``max_tokens`` and ``history_chars`` set
    (``history_chars`` by default from ``llm.context_tokens``, the server's context, when it is given)."""
    defaults = Limits()
    history = defaults.history_chars
    if "context_tokens" in config.llm:  # the server's context: the history is condensed before it fills it
        context = config.llm["context_tokens"]
        if isinstance(context, bool) or not isinstance(context, int) or context < MIN_CONTEXT:
            raise ConfigError(f"llm.context_tokens is the model server's context in tokens, at least "
                              f"{MIN_CONTEXT}; not {str(context)[:40]!r}")
        room = context - int(config.llm.get("reply_tokens", 1024)) - FIRST_REQUEST_TOKENS
        history = max(MIN_HISTORY_CHARS, room * 3)
    return Limits(max_iterations=int(config.llm.get("max_iterations", defaults.max_iterations)),
                  max_tokens=int(config.llm.get("max_tokens", defaults.max_tokens)),
                  history_chars=int(config.llm.get("history_chars", history)))


async def open_session(workspace: "Workspace", config: "BettyConfig", spec: SessionSpec = SessionSpec()) -> AgentSession:
    """The session ``spec`` asks for, complete, from Betty's configuration; resumes ``spec.session_id`` when kept.

    Without a configured chat model this raises ConfigError, unless ``spec.require_model`` is
    False: then the session still runs a person's tool calls, and asking it explains how to
    configure a model. A tool ``spec.tools`` names that Betty lacks is a ToolError.
    """
    # lazy: the tools and the Slurm client load with the first session, not at the server's start
    from ..cluster.shared import Cluster, shared_cluster
    from .registry import default_registry, registry_of
    from .tools.base import ToolContext

    ident = spec.session_id or new_session_id()
    if not _SESSION_ID.match(ident):
        raise UsageError(f"{ident[:40]!r} is not a session id (letters, digits, - and _)")
    kept, tokens = _load(workspace, ident)  # before any connection opens: a damaged file leaks nothing
    try:
        config.site.check_model(config.llm, uses_demo_model(config.llm))  # SiteRefusal: a server the site refuses
        model: ChatModel | None = ChatModel(LLMSettings.from_config(config.llm))
        no_model = ""
    except (ConfigError, SiteRefusal) as error:
        if spec.require_model:
            raise
        model, no_model = None, str(error)
    planner = _planner(config.llm) if model is not None else None
    policy = ApprovalPolicy(spec.mode or config.site.starting_mode(Mode.CONFIRM), config.rules, config.site)
    registry = default_registry() if spec.tools is None else registry_of(spec.tools)
    delegation: Any = None
    if "delegate_tasks" in registry:  # a session without the tool never starts a child (a person's one read)
        from .delegation import Delegation as delegation  # lazy: the child sessions' machinery; only this tool uses it
    profile = config.profile(spec.cluster)
    cluster = shared_cluster(profile) if spec.transport is None else Cluster(profile, spec.transport)
    scratchpad = workspace.state / "scratchpads" / f"{ident}.md"
    context = ToolContext(profile=profile, slurm=cluster.slurm, workspace=workspace, session_id=ident,
                          scratchpad=scratchpad, cluster=cluster)
    facts = await cluster.facts() if spec.reads_cluster_facts else None
    partitions, user = (facts.partitions, facts.user) if facts is not None else (None, None)
    offer = ToolOffer(registry, progressive=_offers_core(config.llm),
                      notes={"cluster_run": allowlist_text(profile.policy())})
    prompt = system_prompt(persona_text(workspace.wiki), offer, profile.policy(), profile.name, partitions, user) \
        if spec.prompts_model else ""
    stream = spec.stream or ev.EventStream(ident)
    for listener in spec.listeners:
        stream.subscribe(listener)
    parts = SessionParts(
        session_id=ident, model=model, no_model_reason=no_model, registry=registry, context=context,
        grants=SessionGrants(), broker=spec.broker or ApprovalBroker(), stream=stream,
        actions=spec.actions or ActionLog(workspace.root), system_prompt=prompt, user=user,
        limits=spec.limits or configured_limits(config), task=spec.task, gate=spec.gate, delegation=delegation,
        offer=offer, planner=planner)
    messages = [{"role": "system", "content": prompt}, *kept[1:]] if kept else None
    return AgentSession(parts, policy, messages=messages, tokens=tokens)


def _offers_core(llm: dict[str, Any]) -> bool:
    """``llm.offer_tools``: "core" (the default) offers a core of tools first, "all" every tool at once."""
    choice = llm.get("offer_tools", "core")
    if choice not in ("core", "all"):
        raise ConfigError(f"llm.offer_tools is \"core\" or \"all\", not {str(choice)[:40]!r}")
    return bool(choice == "core")


def _planner(llm: dict[str, Any]) -> ChatModel | None:
    """The planner model ``llm.planner`` describes (a setting like ``llm`` itself, with its own endpoint and key)."""
    planner = llm.get("planner")
    if not planner:
        return None
    if not isinstance(planner, dict):
        raise ConfigError("llm.planner is a setting like llm itself: {\"base_url\": …, \"model\": …}")
    return ChatModel(LLMSettings.from_config(planner))


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
