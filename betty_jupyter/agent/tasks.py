"""A delegated task: what it is, what its helper starts from, and how its answer is checked.

``delegate_tasks`` (``tools/delegate.py``) takes a list of :class:`TaskSpec` and hands them to
the :class:`Delegator` its session's builder put in the tool context; the session machinery
behind it is in :mod:`.delegation`. This module needs neither: the tool and the delegation
both stand on it.

A task's resources are loaded into its helper's first message (:func:`manifest_of`): job
records with the end of their logs, wiki pages, files read through the cluster's allowlist,
experiment records. Each is read as the direct call :func:`read_of` names would read it, so
the person's deny and ask rules hold for manifests too. A task's answer is one JSON value
checked against its ``result_schema`` (JSON schema, draft 2020-12 unless its ``$schema``
names another draft), or its text without a schema (:func:`checked_answer`). A schema's
references must resolve inside it: nothing is ever fetched (:mod:`betty_jupyter.json_schema`).
"""

from __future__ import annotations

import json
import re
from datetime import date
from typing import TYPE_CHECKING, Any, Sequence

from ..cluster.commands import run_allowed
from ..errors import BettyError, SchemaError, ToolError
from ..experiments.ledger import Ledger
from ..json_text import TooDeep, parse_json
from ..wiki import WikiStore
from .prompt import allowlist_text
from .task_specs import MAX_PARALLEL as MAX_PARALLEL
from .task_specs import MAX_TASKS as MAX_TASKS
from .task_specs import Delegator as Delegator
from .task_specs import ResourceSpec as ResourceSpec
from .task_specs import Strategy as Strategy
from .task_specs import TaskResult as TaskResult
from .task_specs import TaskSpec as TaskSpec

if TYPE_CHECKING:
    from .registry import ToolRegistry
    from .tools.base import ToolContext

RESOURCE_CHARS = 4000
ANSWER_CHARS = 200_000
"""A helper's answer longer than this is refused: it is checked against its schema and told to the model."""
LOG_LINES = 40
FILE_LINES = 80
TOOL = "delegate_tasks"
_READS = {"job": "job_logs", "file": "cluster_run", "wiki": "wiki_read", "experiment": "wiki_read"}


def read_of(resource: ResourceSpec) -> tuple[str, dict[str, Any]]:
    """The tool call that reads the same thing, so the person's deny and ask rules hold for manifests too."""
    tool = _READS[resource.type]
    if resource.type == "job":
        return tool, {"job_id": resource.location}
    if resource.type == "file":
        return tool, {"command": f"tail -n {FILE_LINES} -- {resource.location}"}
    page = resource.location if resource.type == "wiki" else f"experiments/{resource.location}.md"
    return tool, {"page": page}


# ----- what a child is told ----------------------------------------------------------------------

_CHILD_RULES = """\
You are a helper that Betty, an assistant for researchers who run work on a Slurm cluster, started for one task.
You see only the task and the resources below, not Betty's conversation with the person.
- Work from the resources given and your tools; you cannot do anything else.
- A tool that asks waits for the person's approval; a denied call did not run. Do not repeat it.
- Keep job ids, paths and numbers exact."""


def child_prompt(registry: "ToolRegistry", context: "ToolContext") -> str:
    """A child's system prompt: who it is, the allowlist when it may run commands (its tools are in their schemas)."""
    sections = [_CHILD_RULES] if len(registry) else [_CHILD_RULES, "You have no tools: answer from the resources alone."]
    if "cluster_run" in registry:
        sections.append(allowlist_text(context.policy()))
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
    """The child's final answer: its text, or the JSON value checked against ``schema``; ToolError saying why not.

    Checking takes up to ``json_schema.CHECK_SECONDS`` of CPU: call it off the event loop.
    """
    # lazy: jsonschema is heavy; only a task with a result schema needs it, never opening a session
    from ..json_schema import MAX_DEPTH, MAX_SCHEMA_CHARS, first_problem, offline_validator

    answer = text.strip()
    if not answer:
        raise ToolError("the helper gave no answer")
    if len(answer) > ANSWER_CHARS:
        raise ToolError(f"the helper's answer is longer than {ANSWER_CHARS} characters; ask for a shorter one")
    if schema is None:
        return answer
    fenced = re.fullmatch(r"```(?:json)?\s*\n(.*?)\n?```", answer, re.S)
    try:
        value = parse_json(fenced.group(1) if fenced else answer, MAX_DEPTH)
    except TooDeep:
        raise ToolError(f"the helper's answer nests more than {MAX_DEPTH} levels deep; ask for a flatter one") from None
    except ValueError as error:
        raise ToolError(f"the helper's answer is not JSON ({error}): {cut(answer, 80)!r}") from None
    try:
        problem = first_problem(offline_validator(schema, MAX_SCHEMA_CHARS), value, "the answer")
    except SchemaError as error:
        raise ToolError(f"result_schema: {error}") from None
    if problem is not None:
        raise ToolError(f"the helper's answer does not match result_schema: {problem}")
    return value


# ----- the manifest ------------------------------------------------------------------------------

async def manifest_of(context: "ToolContext", resources: Sequence[ResourceSpec]) -> str:
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


async def _wiki(context: "ToolContext", name: str) -> str:
    return cut(WikiStore(context.workspace.wiki).read(name).text, RESOURCE_CHARS)


async def _job(context: "ToolContext", ident: str) -> str:
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
                     + (cut(text, RESOURCE_CHARS // 2, keep="tail") if text.strip() else "(empty)"))
    return "\n".join(lines)


async def _file(context: "ToolContext", path: str) -> str:
    result = await run_allowed(context.slurm.transport, context.policy(), ["tail", "-n", str(FILE_LINES), "--", path])
    if not result.ok:
        first = next((line for line in result.stderr.splitlines() if line.strip()), f"exit {result.exit_code}")
        raise ToolError(f"cannot read it: {first}")
    return f"(last {FILE_LINES} lines)\n" + cut(result.stdout, RESOURCE_CHARS, keep="tail")


async def _experiment(context: "ToolContext", slug_or_job: str) -> str:
    found = Ledger(context.workspace.ledger_path).get(slug_or_job) if context.workspace.ledger_path.exists() else None
    if found is None:
        raise ToolError("no experiment with this slug or job id is recorded in this project")
    record = found.experiment
    head = (f"experiment {record.slug}: job {record.job_id} on {record.cluster}, last seen {found.state}; "
            f"submitted {record.submitted}; goal: {record.goal}")
    store = WikiStore(context.workspace.wiki)
    page = store.read(record.page).text if store.exists(record.page) else "(its page is missing)"
    return f"{head}\nwiki/{record.page}:\n{cut(page, RESOURCE_CHARS)}"


_READERS = {"wiki": _wiki, "job": _job, "file": _file, "experiment": _experiment}


def cut(text: str, chars: int, keep: str = "head") -> str:
    """``text`` cut to ``chars`` characters (its head or its tail), marked where it was cut."""
    if len(text) <= chars:
        return text
    return text[:chars] + "\n[… cut]" if keep == "head" else "[… cut]\n" + text[-chars:]
