"""Delegation: child sessions that each work on one task, with their own instructions, resources and tools.

``delegate_tasks`` (``tools/delegate.py``) hands a list of :class:`~.tasks.TaskSpec` to the
:class:`Delegation` of the session that called it: the session's builder gives its tools that
delegation as their ``ToolContext.delegator``. Each task runs as a child session, an
:class:`~.loop.AgentSession` built with its parent and the delegation as its guard:

- the parent's model, approval broker, action log, cluster link, workspace and gate
  (``before_tool``); the parent's policy, read again at every call, so a stricter mode set
  on the parent holds for its children from their next call;
- only the tools the task names, never one its parent lacks (``ToolRegistry.subset``) and
  never ``delegate_tasks`` itself;
- a first message with the task and a compact manifest of its resources (job records with
  the end of their logs, wiki pages, files read through the cluster's allowlist, experiment
  records), never the parent's history;
- the parent's session id for approvals and the action log: the person's front-end lists a
  child's cards, a disconnect or a stop cancels them, and the session's history shows what
  the children did. Cards carry the task's title (``task``);
- its own event stream: of it only ``approval_request``, ``approval_resolved`` and ``second_approval`` are passed
  on to the parent's stream (a child's deltas, budget and ``done`` would end the parent's
  turn in the person's chat). Each task's end is one ``tool_result`` in the parent's stream
  whose ``call_id`` is the task id.

Tasks run at most ``max_parallel`` at a time. On a failure, ``fail_fast`` cancels the other
tasks, ``continue`` collects it, and ``retry`` runs the task again (:data:`RETRIES` times)
with the earlier failure named. What a task is, what its helper is told
and how its answer is checked are in :mod:`.tasks`.

Two children never write the same wiki page at once: a child's ``wiki_write`` holds the
page's lock from its preview to its write, so the diff a person approves is the change
that lands (WikiStore's file lock makes each write atomic, not preview and write together).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Sequence

from ..errors import BettyError, ToolError, UsageError
from ..wiki import WikiStore
from ..wiki.files import append_durably, write_atomically
from . import events as ev
from .loop import AgentSession, SessionParts
from .policy import Rules, SessionGrants
from .tasks import (TOOL, ResourceSpec, Strategy, TaskResult, TaskSpec, checked_answer, child_prompt, cut,
                    first_message, manifest_of)
from .vocabulary import Decision, DoneReason

if TYPE_CHECKING:
    from .llm import ToolCallRequest
    from .policy import Call
    from .tools.base import ToolContext

log = logging.getLogger(__name__)

RETRIES = 2
"""Extra attempts a failed task gets under ``retry``."""
NOTE_CHARS = 2000

DENIED = "a person denied one of its calls; not retried"
"""A task's error when the person said no to one of its calls (its turn ended there)."""


class Delegation:
    """The delegated tasks of one parent session: its page locks and the tasks running in the background.

    A session's builder makes one per session (``SessionParts.delegation``); the session's tools
    reach it as their ``ToolContext.delegator``, and its children hold their calls through it.
    """

    def __init__(self, parent: AgentSession) -> None:
        self.parent = parent
        self._pages: dict[str, asyncio.Lock] = {}
        self._background: set[asyncio.Task[list[TaskResult]]] = set()

    @classmethod
    def of(cls, parent: AgentSession) -> "Delegation":
        """The delegation of ``parent``; UsageError when it was built without one (a delegated task's session)."""
        found = parent.context.delegator
        if not isinstance(found, cls):
            raise UsageError(f"session {parent.session_id} cannot delegate tasks")
        return found

    def check(self, tasks: Sequence[TaskSpec], read: "Callable[[ResourceSpec], Call]") -> None:
        """Refuse what no child may have: a tool its parent lacks, delegation itself, a read the person denies."""
        if self.parent.parent is not None:
            raise ToolError(f"{TOOL}: a helper cannot delegate further; do the task with your own tools")
        for spec in tasks:
            if TOOL in spec.tools:
                raise ToolError(f"{TOOL}: task {spec.title!r} asks for {TOOL}; a helper cannot delegate further")
            try:
                self.parent.registry.subset(spec.tools)
            except ToolError as error:
                raise ToolError(f"{TOOL}: task {spec.title!r}: {error}") from None
            for resource in spec.resources:
                denied = Rules.covering(self.parent.policy.rules.deny, [read(resource)])
                if denied:
                    raise ToolError(f"{TOOL}: task {spec.title!r} may not be given {resource.type} "
                                    f"{resource.location}: refused by your rule deny {denied}")

    async def run(self, tasks: Sequence[TaskSpec], on_error: Strategy = "continue",
                  max_parallel: int = 4) -> list[TaskResult]:
        """Run ``tasks`` and return how each ended, in order (the caller waits)."""
        return await _Batch(self, tasks, on_error, max_parallel, notes=False).run()

    def start(self, tasks: Sequence[TaskSpec], on_error: Strategy = "continue", max_parallel: int = 4) -> list[str]:
        """Start ``tasks`` in the background and return their ids; each result reaches the parent's stream and notes."""
        batch = _Batch(self, tasks, on_error, max_parallel, notes=True)
        running = asyncio.get_running_loop().create_task(self._background_run(batch))
        self._background.add(running)
        running.add_done_callback(self._background.discard)
        return batch.ids

    async def _background_run(self, batch: "_Batch") -> list[TaskResult]:
        try:
            return await batch.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("delegated tasks %s stopped on an unexpected error", ", ".join(batch.ids))
            return []

    async def wait(self) -> None:
        """Until every background task of this parent has ended."""
        while running := [task for task in self._background if not task.done()]:
            await asyncio.gather(*running, return_exceptions=True)

    def cancel(self) -> int:
        """Cancel the tasks running in the background (their open cards are closed); how many batches were running."""
        running = [task for task in self._background if not task.done()]
        for task in running:
            task.cancel()
        return len(running)

    @contextlib.asynccontextmanager
    async def holding(self, call: "ToolCallRequest") -> AsyncIterator[None]:
        """Around a child's call: the lock of the wiki page it writes, from its preview to its write."""
        page = self.written_page(call)
        if page is None:
            yield
            return
        async with self.page_lock(page):
            yield

    def page_lock(self, page: str) -> asyncio.Lock:
        """The lock a child holds from a write's preview to the write itself."""
        return self._pages.setdefault(page, asyncio.Lock())

    def written_page(self, call: "ToolCallRequest") -> str | None:
        """The wiki page ``call`` would write (its real name, links followed), or None."""
        if call.name != "wiki_write":
            return None
        try:
            page = json.loads(call.arguments).get("page")
        except (ValueError, AttributeError):
            return None
        if not isinstance(page, str):
            return None
        try:
            return WikiStore(self.parent.context.workspace.wiki).real_name(page)
        except BettyError:
            return page  # the call will be refused; locking its name costs nothing


class _Forwarder:
    """Passes a child's approval events to the parent's stream; closes the child's open cards when it is stopped."""

    def __init__(self, parent: ev.EventStream) -> None:
        self.parent = parent
        self.open: dict[str, str] = {}
        self.errors: list[str] = []

    def __call__(self, event: ev.AnyEvent) -> None:
        match event:
            case ev.ApprovalRequestEvent(payload=request):
                self.open[request.approval_id] = request.call_id
                self.parent.emit(event.type, request)
            case ev.ApprovalResolvedEvent(payload=resolved):
                self.open.pop(resolved.approval_id, None)
                self.parent.emit(event.type, resolved)
            case ev.SecondApprovalEvent(payload=second):  # where its approved card waits for a second approver
                self.parent.emit(event.type, second)
            case ev.ErrorEvent(payload=error):
                self.errors.append(error.message)

    def close_open(self) -> None:
        for approval_id, call_id in list(self.open.items()):
            self.parent.emit("approval_resolved", ev.ApprovalResolved(
                approval_id=approval_id, call_id=call_id, decision=Decision.CANCELLED))
        self.open.clear()


class _Batch:
    """The tasks of one ``delegate_tasks`` call."""

    def __init__(self, delegation: Delegation, tasks: Sequence[TaskSpec], on_error: Strategy, max_parallel: int,
                 notes: bool) -> None:
        parent = delegation.parent
        self.delegation, self.parent, self.specs = delegation, parent, list(tasks)
        self.on_error, self.notes = on_error, notes
        self.ids = [f"task_{uuid.uuid4().hex[:10]}" for _ in self.specs]
        self.slots = asyncio.Semaphore(max_parallel)
        # Siblings share the grants of their batch, seeded with the parent's; none flows back to the parent.
        self.grants = SessionGrants(set(parent.grants.tools))
        self.share = max(0, parent.limits.max_tokens - parent.tokens) // max(1, len(self.specs))
        self._running: list[asyncio.Task[TaskResult]] = []
        self._failed_fast = False
        self._announced: set[str] = set()

    async def run(self) -> list[TaskResult]:
        self._running = [asyncio.ensure_future(self._task(i)) for i in range(len(self.specs))]
        try:
            ended = await asyncio.gather(*self._running, return_exceptions=True)
        except asyncio.CancelledError:  # stopped from outside: the person, a kill switch, Delegation.cancel
            for task_id, spec in zip(self.ids, self.specs):
                if task_id not in self._announced:
                    self._announce(TaskResult(task_id, spec.title, "cancelled", error="stopped"), 0.0)
            raise
        results = []
        for index, outcome in enumerate(ended):
            if isinstance(outcome, asyncio.CancelledError):
                why = "another task failed and on_error is fail_fast" if self._failed_fast else "stopped"
                outcome = TaskResult(self.ids[index], self.specs[index].title, "cancelled", error=why)
                self._announce(outcome, 0.0)
            elif isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        return results

    async def _task(self, index: int) -> TaskResult:
        spec, result = self.specs[index], TaskResult(self.ids[index], self.specs[index].title)
        began = time.perf_counter()
        tokens = 0
        async with self.slots:
            for attempt in range(1, (RETRIES if self.on_error == "retry" else 0) + 2):
                result.attempts = attempt
                ok, value, used = await self._attempt(result.task_id, spec, result.error, self.share - tokens)
                tokens += used
                result.status, result.result, result.error = ("ok", value, "") if ok else ("failed", None, value)
                if ok or value == DENIED:  # a person's "no" is never retried
                    break
        if result.status == "failed" and self.on_error == "fail_fast":
            self._fail_fast()
        self._announce(result, (time.perf_counter() - began) * 1000)
        return result

    def _fail_fast(self) -> None:
        self._failed_fast = True
        current = asyncio.current_task()
        for task in self._running:
            if task is not current and not task.done():
                task.cancel()

    async def _attempt(self, task_id: str, spec: TaskSpec, earlier: str, budget: int) -> tuple[bool, Any, int]:
        """(True, result, tokens) or (False, why it failed, tokens)."""
        try:
            manifest = await manifest_of(self.parent.context, spec.resources)
        except BettyError as error:
            return False, f"could not load its resources: {error}", 0
        forwarder = _Forwarder(self.parent.stream)
        child = self._child(task_id, spec, forwarder, budget)
        try:
            reason = await child.ask(first_message(spec, manifest, earlier))
        except asyncio.CancelledError:
            forwarder.close_open()
            raise
        finally:
            self.parent.tokens += child.tokens
        if reason == DoneReason.DENIED:
            return False, DENIED, child.tokens
        if reason != DoneReason.FINISHED:
            why = forwarder.errors[-1] if forwarder.errors else reason
            return False, f"the helper stopped before answering: {why}", child.tokens
        try:
            # off the event loop: checking against a model-written schema takes up to CHECK_SECONDS
            answer = await asyncio.to_thread(checked_answer, _last_text(child), spec.result_schema)
            return True, answer, child.tokens
        except ToolError as error:
            return False, str(error), child.tokens

    def _child(self, task_id: str, spec: TaskSpec, forwarder: _Forwarder, budget: int) -> AgentSession:
        """The task's session: the parent's parts, its own tools, context, stream and share of the tokens."""
        parent, home = self.parent, self.parent.context
        registry = parent.registry.subset(spec.tools)
        ident = f"{home.session_id}-{task_id}"
        context = replace(home, session_id=ident, scratchpad=home.workspace.state / "scratchpads" / f"{ident}.md",
                          delegator=None)
        stream = ev.EventStream(parent.session_id, max_events=1000)
        stream.subscribe(forwarder)
        task = spec.title if parent.task is None else f"{parent.task} › {spec.title}"
        parts = SessionParts(
            session_id=parent.session_id, model=parent.model, registry=registry, context=context, grants=self.grants,
            broker=parent.broker, stream=stream, actions=parent.actions, system_prompt=child_prompt(registry, context),
            user=parent.user, limits=replace(parent.limits, max_tokens=max(0, budget)), task=task,
            gate=parent.before_tool, parent=parent, guard=self.delegation)
        return AgentSession(parts, parent.policy)

    def _announce(self, result: TaskResult, duration_ms: float) -> None:
        """The task's end as a ``tool_result`` in the parent's stream; in the background, in its notes too."""
        self._announced.add(result.task_id)
        self.parent.stream.emit("tool_result", ev.ToolResultInfo(
            call_id=result.task_id, tool=TOOL, ok=result.status == "ok", decision=Decision.AUTO, summary=result.line(),
            duration_ms=max(0.0, duration_ms)))
        if self.notes:
            _add_to_notes(self.parent.context, result)


def _add_to_notes(context: "ToolContext", result: TaskResult) -> None:
    body = (json.dumps(result.result, ensure_ascii=False, default=str) if result.status == "ok"
            else f"{result.status}: {result.error}")
    section = f"## Delegated task {result.task_id}: {result.title} ({result.status})\n{cut(body, NOTE_CHARS)}\n"
    try:
        if context.scratchpad.exists():
            append_durably(context.scratchpad, "\n" + section)
        else:
            write_atomically(context.scratchpad, section)
    except OSError as exc:
        log.warning("cannot add task %s to the notes %s: %s", result.task_id, context.scratchpad, exc)


def _last_text(child: AgentSession) -> str:
    last = child.messages[-1] if child.messages else {}
    return str(last.get("content") or "") if last.get("role") == "assistant" else ""
