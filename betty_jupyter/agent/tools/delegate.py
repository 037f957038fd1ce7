"""``delegate_tasks``: hand tasks to child sessions, each with its instructions, resources and some tools.

The machinery is in :mod:`..delegation`, reached through the :class:`~..tasks.Delegator` the
session's builder put in the tool context; this is the tool the model (or a person) calls.
Delegating changes nothing by itself: every call a child makes goes through the policy,
and its cards reach the person labelled with the task. Loading job logs or cluster files
into the children's first messages is a read of tier 1, so the call is tier 1 then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from pydantic import Field, model_validator

from ...errors import BettyError
from ..models import Preview, Tier, ToolOutcome
from ..tasks import MAX_PARALLEL, MAX_TASKS, ResourceSpec, Strategy, TaskSpec, read_of
from .base import Tool, ToolArgs, ToolContext, ToolError
from .cluster import ClusterRun, JobLogs
from .wiki import WikiRead

if TYPE_CHECKING:
    from ..policy import Call
    from ..tasks import Delegator, TaskResult

_READING_TOOLS: dict[str, type[Tool[Any]]] = {tool.name: tool for tool in (JobLogs, ClusterRun, WikiRead)}


class DelegateArgs(ToolArgs):
    """The tasks, and how to run them."""

    tasks: list[TaskSpec] = Field(min_length=1, max_length=MAX_TASKS, description="the tasks, one helper each")
    sync: bool = Field(True, description="true: wait and get every result now; false: get task ids now, and each "
                       "result later as an event and in your scratchpad")
    on_error: Strategy = Field("continue", description="fail_fast: a failure cancels the other tasks; continue: "
                               "the others go on; retry: a failed task runs again (twice at most), then continue")
    max_parallel: int = Field(4, ge=1, le=MAX_PARALLEL, description="how many tasks run at once")

    @model_validator(mode="after")
    def _distinct_titles(self) -> "DelegateArgs":
        titles = [task.title for task in self.tasks]
        twice = sorted({title for title in titles if titles.count(title) > 1})
        if twice:
            raise ValueError(f"each task needs its own title (they label its approval cards): {', '.join(twice)}")
        return self


class DelegateTasks(Tool[DelegateArgs]):
    """Run tasks in child sessions, in parallel, sync or in the background."""

    name = "delegate_tasks"
    description = ("Hand tasks to helpers that run in parallel, each with its own instructions, the resources it "
                   "needs (wiki pages, jobs with the end of their logs, files, experiments) loaded into its first "
                   "message, and some of your tools. Each answers with JSON matching the schema you give. Wait for "
                   "the answers, or get task ids and find each answer later in your scratchpad.")
    Args = DelegateArgs
    tier = Tier.AUTO
    chat_only = True

    def tier_for(self, args: DelegateArgs) -> Tier:
        """1 when a task is given job logs or cluster files (reads of tier 1), else 0."""
        reads = {resource.type for task in args.tasks for resource in task.resources}
        return Tier.ONCE_PER_SESSION if reads & {"job", "file"} else Tier.AUTO

    def reads_for(self, ctx: ToolContext, args: DelegateArgs) -> "list[Call]":
        """Each resource as the direct call reading it: the person's deny and ask rules cover what helpers are given."""
        return [resource_read(ctx, resource) for task in args.tasks for resource in task.resources]

    def asks(self) -> str:
        """It depends on what the tasks are given."""
        return "Asks the person once per session when a task is given job logs or cluster files."

    async def preview(self, ctx: ToolContext, args: DelegateArgs) -> Preview:
        """Each task with its tools and what it is given; refused as the run would refuse it."""
        _checked(ctx, args.tasks)
        lines = []
        for number, task in enumerate(args.tasks, 1):
            given = ", ".join(f"{r.type} {r.location}" for r in task.resources) or "nothing"
            lines.append(f"{number}. {task.title}\n   tools: {', '.join(task.tools) or 'none'}; given: {given}\n"
                         f"   {task.instructions.strip().splitlines()[0][:200]}")
        how = "wait for every result" if args.sync else "in the background"
        return Preview(kind="text", title=f"delegate {len(args.tasks)} task(s), {how}, on error {args.on_error}, "
                       f"{args.max_parallel} at a time", text="\n".join(lines),
                       details={"tasks": [task.model_dump(mode="json") for task in args.tasks]})

    async def run(self, ctx: ToolContext, args: DelegateArgs) -> ToolOutcome:
        """The checked results (sync), or the task ids (in the background)."""
        delegation = _checked(ctx, args.tasks)
        if not args.sync:
            ids = delegation.start(args.tasks, args.on_error, args.max_parallel)
            summary = (f"started {len(ids)} task(s) in the background: "
                       + ", ".join(f"{i} ({t.title})" for i, t in zip(ids, args.tasks))
                       + ". Each result is added to your scratchpad when its task ends.")
            return ToolOutcome(summary=summary, full=summary, data={"task_ids": ids})
        results = await delegation.run(args.tasks, args.on_error, args.max_parallel)
        return _outcome(results, args.on_error)


def resource_read(ctx: ToolContext, resource: ResourceSpec) -> "Call":
    """The direct call that reads what ``resource`` loads, with the arguments the person's rules see."""
    name, raw = read_of(resource)
    tool = _READING_TOOLS[name]()
    try:
        return name, tool.rule_values(ctx, tool.parse(raw))
    except BettyError:
        return name, raw  # the manifest refuses it when it loads; the rules see it as written


def _checked(ctx: ToolContext, tasks: Sequence[TaskSpec]) -> "Delegator":
    """The session's delegator, once it has refused what no child may have."""
    if ctx.delegator is None:
        raise ToolError("delegate_tasks runs inside an agent session; this context has none")
    ctx.delegator.check(tasks, lambda resource: resource_read(ctx, resource))
    return ctx.delegator


def _outcome(results: "list[TaskResult]", on_error: str) -> ToolOutcome:
    counts = {status: sum(r.status == status for r in results) for status in ("ok", "failed", "cancelled")}
    head = f"{counts['ok']} of {len(results)} task(s) answered"
    if counts["failed"]:
        head += f", {counts['failed']} failed"
    if counts["cancelled"]:
        head += f", {counts['cancelled']} cancelled" + (" (fail_fast)" if on_error == "fail_fast" else "")
    summary = head + "\n" + "\n".join(f"- {r.line()}" for r in results)
    return ToolOutcome(ok=counts["ok"] == len(results), summary=summary, full=summary,
                       data={"tasks": [r.as_dict() for r in results]})
