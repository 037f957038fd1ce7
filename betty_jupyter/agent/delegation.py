"""Delegation: child sessions that each work on one task, with their own instructions, resources and tools.

``delegate_tasks`` (``tools/delegate.py``) hands a list of :class:`TaskSpec` to the
:class:`Delegation` of the session that called it. Each task runs as a :class:`ChildSession`:

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
- its own event stream: of it only ``approval_request`` and ``approval_resolved`` are passed
  on to the parent's stream (a child's deltas, budget and ``done`` would end the parent's
  turn in the person's chat). Each task's end is one ``tool_result`` in the parent's stream
  whose ``call_id`` is the task id.

Tasks run at most ``max_parallel`` at a time. On a failure, ``fail_fast`` cancels the other
tasks, ``continue`` collects it, and ``retry`` runs the task again (:data:`RETRIES` times)
with the earlier failure named. A task's answer is one JSON value checked against its
``result_schema`` (JSON schema, draft 2020-12 unless its ``$schema`` names another draft); without a
schema the answer is its text. A schema's references must resolve inside it: nothing is ever
fetched (:mod:`betty_jupyter.json_schema`).

Two children never write the same wiki page at once: a child's ``wiki_write`` holds the
page's lock from its preview to its write, so the diff a person approves is the change
that lands (WikiStore's file lock makes each write atomic, not preview and write together).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
import weakref
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, Sequence

from pydantic import Field, field_validator

from ..errors import BettyError, SchemaError, ToolError
from . import events as ev
from .loop import AgentSession, Answer, Limits
from .models import ToolArgs

if TYPE_CHECKING:
    from .llm import ToolCallRequest
    from .policy import Call
    from .tools.base import ToolContext
    from .registry import ToolRegistry

log = logging.getLogger(__name__)

Strategy = Literal["fail_fast", "continue", "retry"]
RETRIES = 2
"""Extra attempts a failed task gets under ``retry``."""
MAX_TASKS = 32
MAX_PARALLEL = 16
RESOURCE_CHARS = 4000
LOG_LINES = 40
FILE_LINES = 80
NOTE_CHARS = 2000
TOOL = "delegate_tasks"
_READS = {"job": "job_logs", "file": "cluster_run", "wiki": "wiki_read", "experiment": "wiki_read"}


class ResourceSpec(ToolArgs):
    """One thing a task is given to work on."""

    type: Literal["wiki", "job", "file", "experiment"]
    location: str = Field(min_length=1, max_length=1000, description=(
        "wiki: a page name ('howto/x.md'); job: a job id; file: a path on the cluster under a readable root; "
        "experiment: its slug or job id"))


class TaskSpec(ToolArgs):
    """One task for one child session."""

    title: str = Field(min_length=1, max_length=120, description="a short title; it labels the task's approval cards")
    instructions: str = Field(min_length=1, max_length=20_000, description="what the helper must find out or do")
    resources: list[ResourceSpec] = Field(default_factory=list, max_length=20,
                                          description="what is loaded into the helper's first message")
    tools: list[str] = Field(default_factory=list, max_length=20,
                             description="the tools the helper may call: some of yours, none else")
    result_schema: dict[str, Any] | None = Field(
        None, description="JSON schema its answer must match; without one the answer is free text")

    @field_validator("title")
    @classmethod
    def _one_line(cls, title: str) -> str:
        if not title.strip() or "\n" in title or "\r" in title:
            raise ValueError("a title is one line of text")
        return title.strip()

    @field_validator("result_schema")
    @classmethod
    def _a_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        from ..json_schema import offline_validator

        if schema is not None:
            try:
                offline_validator(schema)
            except SchemaError as error:
                raise ValueError(str(error)) from None
        return schema


@dataclass
class TaskResult:
    """How one task ended: ``ok`` with its checked ``result``, ``failed`` with why, or ``cancelled``."""

    task_id: str
    title: str
    status: Literal["ok", "failed", "cancelled"] = "cancelled"
    result: Any = None
    error: str = ""
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)

    def line(self) -> str:
        """``task_… (title): {"oom": true}``, or what went wrong."""
        head = f"{self.task_id} ({self.title})"
        if self.status == "ok":
            return f"{head}: {json.dumps(self.result, ensure_ascii=False, default=str)}"
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{head}: {self.status}{tries} — {self.error}"


def check_tasks(parent: AgentSession, tasks: Sequence[TaskSpec]) -> None:
    """Refuse what no child may have: a tool its parent lacks, delegation itself, a read the person denies."""
    from .policy import Rules

    if isinstance(parent, ChildSession):
        raise ToolError(f"{TOOL}: a helper cannot delegate further; do the task with your own tools")
    for spec in tasks:
        if TOOL in spec.tools:
            raise ToolError(f"{TOOL}: task {spec.title!r} asks for {TOOL}; a helper cannot delegate further")
        try:
            parent.registry.subset(spec.tools)
        except ToolError as error:
            raise ToolError(f"{TOOL}: task {spec.title!r}: {error}") from None
        for resource in spec.resources:
            denied = Rules.covering(parent.policy.rules.deny, [resource_read(parent.context, resource)])
            if denied:
                raise ToolError(f"{TOOL}: task {spec.title!r} may not be given {resource.type} "
                                f"{resource.location}: refused by your rule deny {denied}")


def resource_read(context: ToolContext, resource: ResourceSpec) -> "Call":
    """The direct call that reads what ``resource`` loads, with the arguments the person's rules see."""
    from .registry import default_registry

    name, raw = _read_of(resource)
    tool = default_registry().get(name)
    try:
        return name, tool.rule_values(context, tool.parse(raw))
    except BettyError:
        return name, raw  # the manifest refuses it when it loads; the rules see it as written


def _read_of(resource: ResourceSpec) -> tuple[str, dict[str, Any]]:
    """The tool call that reads the same thing, so the person's deny and ask rules hold for manifests too."""
    tool = _READS[resource.type]
    if resource.type == "job":
        return tool, {"job_id": resource.location}
    if resource.type == "file":
        return tool, {"command": f"tail -n {FILE_LINES} -- {resource.location}"}
    page = resource.location if resource.type == "wiki" else f"experiments/{resource.location}.md"
    return tool, {"page": page}


class Delegation:
    """The delegated tasks of one parent session: its page locks and the tasks running in the background."""

    def __init__(self, parent: AgentSession) -> None:
        self.parent = parent
        self._pages: dict[str, asyncio.Lock] = {}
        self._background: set[asyncio.Task[list[TaskResult]]] = set()

    @classmethod
    def of(cls, parent: AgentSession) -> "Delegation":
        """The delegation of ``parent`` (made on first use)."""
        found = _DELEGATIONS.get(parent)
        if found is None:
            found = _DELEGATIONS[parent] = cls(parent)
        return found

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

    def page_lock(self, page: str) -> asyncio.Lock:
        """The lock a child holds from a write's preview to the write itself."""
        return self._pages.setdefault(page, asyncio.Lock())

    def written_page(self, call: "ToolCallRequest") -> str | None:
        """The wiki page ``call`` would write (its real name, links followed), or None."""
        from ..wiki import WikiStore

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


_DELEGATIONS: "weakref.WeakKeyDictionary[AgentSession, Delegation]" = weakref.WeakKeyDictionary()


class ChildSession(AgentSession):
    """A session working on one delegated task for ``parent``."""

    def __init__(self, *, parent: AgentSession, delegation: Delegation, **parts: Any) -> None:
        super().__init__(**parts)
        self.parent, self.delegation = parent, delegation

    async def _call(self, call: "ToolCallRequest", person: str | None = None) -> Answer:
        self.policy = self.parent.policy  # the parent's mode now, never one it has left
        page = self.delegation.written_page(call)
        if page is None:
            return await super()._call(call, person)
        async with self.delegation.page_lock(page):
            return await super()._call(call, person)


class _Forwarder:
    """Passes a child's approval events to the parent's stream; closes the child's open cards when it is stopped."""

    def __init__(self, parent: ev.EventStream) -> None:
        self.parent = parent
        self.open: dict[str, str] = {}
        self.errors: list[str] = []

    def __call__(self, event: ev.Event) -> None:
        payload = event.payload
        if isinstance(payload, ev.ApprovalRequest):
            self.open[payload.approval_id] = payload.call_id
            self.parent.emit(event.type, payload)
        elif isinstance(payload, ev.ApprovalResolved):
            self.open.pop(payload.approval_id, None)
            self.parent.emit(event.type, payload)
        elif isinstance(payload, ev.ErrorInfo):
            self.errors.append(payload.message)

    def close_open(self) -> None:
        for approval_id, call_id in list(self.open.items()):
            self.parent.emit("approval_resolved", ev.ApprovalResolved(
                approval_id=approval_id, call_id=call_id, decision="cancelled"))
        self.open.clear()


class _Batch:
    """The tasks of one ``delegate_tasks`` call."""

    def __init__(self, delegation: Delegation, tasks: Sequence[TaskSpec], on_error: Strategy, max_parallel: int,
                 notes: bool) -> None:
        from .policy import SessionGrants

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
                if ok:
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
        if reason != "finished":
            why = forwarder.errors[-1] if forwarder.errors else reason
            return False, f"the helper stopped before answering: {why}", child.tokens
        try:
            return True, checked_answer(_last_text(child), spec.result_schema), child.tokens
        except ToolError as error:
            return False, str(error), child.tokens

    def _child(self, task_id: str, spec: TaskSpec, forwarder: _Forwarder, budget: int) -> ChildSession:
        from .tools.base import ToolContext

        parent, home = self.parent, self.parent.context
        registry = parent.registry.subset(spec.tools)
        ident = f"{home.session_id}-{task_id}"
        context = ToolContext(profile=home.profile, slurm=home.slurm, workspace=home.workspace, session_id=ident,
                              scratchpad=home.workspace.state / "scratchpads" / f"{ident}.md")
        stream = ev.EventStream(parent.session_id, max_events=1000)
        stream.subscribe(forwarder)
        limits = Limits(max_iterations=parent.limits.max_iterations, max_tokens=max(0, budget),
                        max_seconds=parent.limits.max_seconds, history_chars=parent.limits.history_chars,
                        keep_recent=parent.limits.keep_recent)
        return ChildSession(
            parent=parent, delegation=self.delegation, session_id=parent.session_id, model=parent.model,
            registry=registry, context=context, policy=parent.policy, grants=self.grants, broker=parent.broker,
            stream=stream, actions=parent.actions, system_prompt=child_prompt(registry, context), user=parent.user,
            limits=limits, task=spec.title if parent.task is None else f"{parent.task} › {spec.title}",
            before_tool=parent.before_tool)

    def _announce(self, result: TaskResult, duration_ms: float) -> None:
        """The task's end as a ``tool_result`` in the parent's stream; in the background, in its notes too."""
        self._announced.add(result.task_id)
        self.parent.stream.emit("tool_result", ev.ToolResultInfo(
            call_id=result.task_id, tool=TOOL, ok=result.status == "ok", summary=result.line(),
            duration_ms=max(0.0, duration_ms)))
        if self.notes:
            _add_to_notes(self.parent.context, result)


def _add_to_notes(context: ToolContext, result: TaskResult) -> None:
    from ..wiki.files import append_durably, write_atomically

    body = (json.dumps(result.result, ensure_ascii=False, default=str) if result.status == "ok"
            else f"{result.status}: {result.error}")
    section = f"## Delegated task {result.task_id}: {result.title} ({result.status})\n{_cut(body, NOTE_CHARS)}\n"
    try:
        if context.scratchpad.exists():
            append_durably(context.scratchpad, "\n" + section)
        else:
            write_atomically(context.scratchpad, section)
    except OSError as exc:
        log.warning("cannot add task %s to the notes %s: %s", result.task_id, context.scratchpad, exc)


# ----- what a child is told ----------------------------------------------------------------------

_CHILD_RULES = """\
You are a helper that Betty, an assistant for researchers who run work on a Slurm cluster, started for one task.
You see only the task and the resources below, not Betty's conversation with the person.
- Work from the resources given and the tools listed; you cannot do anything else.
- A call above tier 0 may wait for the person's approval; a denied call did not run. Do not repeat it.
- Keep job ids, paths and numbers exact."""


def child_prompt(registry: "ToolRegistry", context: ToolContext) -> str:
    """A child's system prompt: who it is, its tools with their tiers, the allowlist when it may run commands."""
    tools = ("Tools (tier 0 runs at once; tier 1 asks once; tier 2 always asks):\n" + registry.describe()
             if len(registry) else "You have no tools: answer from the resources alone.")
    sections = [_CHILD_RULES, tools]
    if "cluster_run" in registry:
        sections.append("Read-only commands cluster_run accepts:\n" + context.policy().describe())
    sections.append(f"Cluster: {context.profile.name}. Today is {date.today().isoformat()}.")
    return "\n\n".join(sections)


def first_message(spec: TaskSpec, manifest: str, earlier: str = "") -> str:
    """The task, its resources, and how to answer."""
    parts = [f"Task: {spec.title}\n\n{spec.instructions}", f"Resources (already loaded for you):\n\n{manifest}"]
    if earlier:
        parts.append(f"An earlier attempt at this task failed: {earlier}")
    if spec.result_schema is None:
        parts.append("When you are done, answer in a few lines; your answer is passed back as it is.")
    else:
        parts.append("When you are done, answer with one JSON value and nothing else (no prose, no code fence), "
                     "valid against this JSON schema:\n" + json.dumps(spec.result_schema, ensure_ascii=False))
    return "\n\n".join(parts)


def checked_answer(text: str, schema: dict[str, Any] | None) -> Any:
    """The child's final answer: its text, or the JSON value checked against ``schema``; ToolError saying why not."""
    from ..json_schema import first_problem, offline_validator

    answer = text.strip()
    if not answer:
        raise ToolError("the helper gave no answer")
    if schema is None:
        return answer
    fenced = re.fullmatch(r"```(?:json)?\s*\n(.*?)\n?```", answer, re.S)
    try:
        value = json.loads(fenced.group(1) if fenced else answer)
    except ValueError as error:
        raise ToolError(f"the helper's answer is not JSON ({error}): {_cut(answer, 80)!r}") from None
    try:
        problem = first_problem(offline_validator(schema), value, "the answer")
    except SchemaError as error:
        raise ToolError(f"result_schema: {error}") from None
    if problem is not None:
        raise ToolError(f"the helper's answer does not match result_schema: {problem}")
    return value


def _last_text(child: AgentSession) -> str:
    last = child.messages[-1] if child.messages else {}
    return str(last.get("content") or "") if last.get("role") == "assistant" else ""


# ----- the manifest ------------------------------------------------------------------------------

async def manifest_of(context: ToolContext, resources: Sequence[ResourceSpec]) -> str:
    """Each resource as a short section: what a child starts from. A resource that cannot be read is a BettyError."""
    if not resources:
        return "(none: work from the instructions)"
    sections = []
    for resource in resources:
        try:
            text = await _READERS[resource.type](context, resource.location)
        except BettyError as error:
            raise ToolError(f"{resource.type} {resource.location}: {error}") from error
        sections.append(f"### {resource.type} {resource.location}\n{text.rstrip()}")
    return "\n\n".join(sections)


async def _wiki(context: ToolContext, name: str) -> str:
    from ..wiki import WikiStore

    return _cut(WikiStore(context.workspace.wiki).read(name).text, RESOURCE_CHARS)


async def _job(context: ToolContext, ident: str) -> str:
    job = await context.slurm.job(ident)
    lines = [job.line()]
    streams = [("out", job.stdout_path)]
    if job.stderr_path and job.stderr_path != job.stdout_path:
        streams.append(("err", job.stderr_path))
    for stream, path in streams:
        if not path:
            continue
        text = await context.slurm.tail(job.job_id, stream, LOG_LINES)
        lines.append(f"std{stream} ({path}), last {LOG_LINES} lines:\n"
                     + (_cut(text, RESOURCE_CHARS // 2, keep="tail") if text.strip() else "(empty)"))
    return "\n".join(lines)


async def _file(context: ToolContext, path: str) -> str:
    from ..cluster.commands import run_allowed

    result = await run_allowed(context.slurm.transport, context.policy(), ["tail", "-n", str(FILE_LINES), "--", path])
    if not result.ok:
        first = next((line for line in result.stderr.splitlines() if line.strip()), f"exit {result.exit_code}")
        raise ToolError(f"cannot read it: {first}")
    return f"(last {FILE_LINES} lines)\n" + _cut(result.stdout, RESOURCE_CHARS, keep="tail")


async def _experiment(context: ToolContext, slug_or_job: str) -> str:
    from ..experiments.ledger import Ledger
    from ..wiki import WikiStore

    found = Ledger(context.workspace.ledger_path).get(slug_or_job) if context.workspace.ledger_path.exists() else None
    if found is None:
        raise ToolError("no experiment with this slug or job id is recorded in this project")
    record = found.experiment
    head = (f"experiment {record.slug}: job {record.job_id} on {record.cluster}, last seen {found.state}; "
            f"submitted {record.submitted}; goal: {record.goal}")
    store = WikiStore(context.workspace.wiki)
    page = store.read(record.page).text if store.exists(record.page) else "(its page is missing)"
    return f"{head}\nwiki/{record.page}:\n{_cut(page, RESOURCE_CHARS)}"


_READERS = {"wiki": _wiki, "job": _job, "file": _file, "experiment": _experiment}


def _cut(text: str, chars: int, keep: str = "head") -> str:
    if len(text) <= chars:
        return text
    return text[:chars] + "\n[… cut]" if keep == "head" else "[… cut]\n" + text[-chars:]
