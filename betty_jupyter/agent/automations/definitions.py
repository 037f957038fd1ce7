"""What an automation is: a persona page, a prompt, a trigger, the tools it may use, its limits and its mode.

A person sends an :class:`AutomationSpec` (``POST /betty/api/automations``); the store keeps it
with an id, a status and (for a webhook) the hash of its secret, and answers an
:class:`Automation`. Each time its trigger fires the store queues a :class:`Run`.

The prompt (and a webhook's ``template``) may name fields of what fired it with
``{{ … }}`` (``templates.py``): ``run.*`` and ``automation.*`` always, ``job.*`` for a job
trigger, ``payload.*`` for a webhook.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...cluster.jobs import JobState
from ...errors import BettyError
from ...wiki import WikiStore, seed_dir
from ..vocabulary import AutomationMode, Mode
from . import templates
from .cron import check

if TYPE_CHECKING:
    from ...config import BettyConfig
    from ...experiments.workspace import Workspace

TriggerKind = Literal["job", "schedule", "webhook", "manual"]
AutomationStatus = Literal["idle", "active", "paused", "error-suspended"]
RunStatus = Literal["queued", "running", "done", "failed", "breaker", "killed"]
ENDED: tuple[str, ...] = ("done", "failed", "breaker", "killed")
ALWAYS_ROOTS = ("run", "automation")
ROOTS_BY_KIND: dict[str, tuple[str, ...]] = {"job": ("job",), "webhook": ("payload",), "schedule": (), "manual": ()}
PERSONA_NAME = r"^[A-Za-z0-9_-]{1,64}$"
_SLUG = re.compile(r"[^a-z0-9]+")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Trigger(_Strict):
    """What starts a run: a watched job's state change, a cron schedule, a webhook delivery, or a person."""

    model_config = ConfigDict(extra="forbid", title="AutomationTrigger")

    kind: TriggerKind = "manual"
    states: list[str] = Field(default_factory=list, description="job: the states that fire it (none: every change)")
    cluster: str | None = Field(default=None, description="job: only jobs of this cluster")
    cron: str | None = Field(default=None, description="schedule: five fields, minute hour day month weekday")
    template: str | None = Field(default=None, max_length=20_000,
                                 description="webhook: the delivery's fields mapped into the prompt")

    @model_validator(mode="after")
    def _fits_its_kind(self) -> "Trigger":
        if self.kind != "job" and (self.states or self.cluster):
            raise ValueError("states and cluster belong to a job trigger")
        if self.kind != "schedule" and self.cron:
            raise ValueError("cron belongs to a schedule trigger")
        if self.kind != "webhook" and self.template:
            raise ValueError("template belongs to a webhook trigger (map fields in the prompt instead)")
        if self.kind == "schedule":
            if not self.cron:
                raise ValueError("a schedule trigger needs cron, e.g. '0 8 * * *' (every day at 08:00)")
            check(self.cron)
        if self.kind == "job":
            self.states = _job_states(self.states)
        if self.template:
            templates.check(self.template, ALWAYS_ROOTS + ROOTS_BY_KIND["webhook"])
        return self


def _job_states(states: list[str]) -> list[str]:
    known = {state.value for state in JobState}
    wanted = [state.strip().upper() for state in states]
    unknown = [state for state in wanted if state not in known]
    if unknown:
        raise ValueError(f"unknown job state {', '.join(unknown)}; e.g. RUNNING, COMPLETED, FAILED, TIMEOUT")
    return list(dict.fromkeys(wanted))


class AutomationLimits(_Strict):
    """The circuit breakers of each run: model turns, tokens and wall time (across resumes)."""

    iterations: int = Field(default=12, ge=1, le=500)
    tokens: int = Field(default=200_000, ge=1, le=50_000_000)
    seconds: float = Field(default=900.0, gt=0, le=7 * 86_400)


class AutomationSpec(_Strict):
    """What a person defines (the body of ``POST`` and ``PUT automations``)."""

    name: str = Field(min_length=1, max_length=80)
    persona: str = Field(default="betty", pattern=PERSONA_NAME,
                         description="a page of the wiki's personas/ folder, without .md")
    prompt: str = Field(min_length=1, max_length=20_000)
    trigger: Trigger = Field(default_factory=lambda: Trigger())
    cluster: str | None = Field(default=None, description="the cluster runs work on (default: the default cluster)")
    tools: list[str] | None = Field(default=None,
                                    description="the tools runs may call (default: all; scratchpad always)")
    limits: AutomationLimits = Field(default_factory=lambda: AutomationLimits())
    mode: AutomationMode = Field(default=Mode.AUTO, description="tier 2 always waits for a person, in every mode")

    @model_validator(mode="after")
    def _prompt_fields(self) -> "AutomationSpec":
        self.name = self.name.strip()
        if not self.name:
            raise ValueError("name: give the automation a name")
        templates.check(self.prompt, ALWAYS_ROOTS + ROOTS_BY_KIND[self.trigger.kind])
        return self


class Automation(AutomationSpec):
    """A stored automation, as the API answers it."""

    id: str
    status: AutomationStatus = "idle"
    failures: int = Field(default=0, description="runs that failed or tripped a breaker in a row")
    webhook: bool = Field(default=False, description="whether it has a webhook secret")
    next_due: float | None = Field(default=None, description="schedule: when it fires next (unix time)")
    created: float = 0.0
    updated: float = 0.0

    def spec(self) -> AutomationSpec:
        """Its definition alone."""
        return AutomationSpec.model_validate(self.model_dump(include=set(AutomationSpec.model_fields)))


class Run(BaseModel):
    """One run of an automation: what fired it, where it stands, what it used and how it ended."""

    model_config = ConfigDict(title="AutomationRun")

    id: str
    automation: str
    status: RunStatus
    trigger: TriggerKind
    delivery_id: str | None = None
    payload: Any = None
    attempts: int = 0
    session_id: str
    tokens: int = 0
    iterations: int = 0
    seconds: float = 0.0
    code: str | None = Field(default=None,
                             description="breaker: iteration_limit, token_limit or time_limit; failed: why")
    result: str = ""
    created: float = 0.0
    started: float | None = None
    ended: float | None = None
    owner: str | None = None
    lease_until: float = 0.0
    heartbeat: float | None = None
    kill_requested: bool = False
    paused_before: str | None = Field(default=None,
                                      description="the tool whose call waits while the automation is paused")


def new_id(name: str) -> str:
    """An automation id from its name: ``nightly-failures-3f9a1c`` (it names the webhook URL)."""
    slug = _SLUG.sub("-", name.lower()).strip("-")[:40] or "automation"
    return f"{slug}-{secrets.token_hex(3)}"


def session_id_of(run_id: str) -> str:
    """The agent session of a run; its scratchpad is ``.betty/scratchpads/automation-<run id>.md``."""
    return f"automation-{run_id}"


def problems(spec: AutomationSpec, workspace: "Workspace", config: "BettyConfig") -> list[str]:
    """What a definition names that does not exist here: its persona page, tools or cluster."""
    # lazy: every tool module; the server's start reads automations without them
    from ..registry import default_registry

    found = []
    if persona_page(workspace, spec.persona) is None:
        found.append(f"persona: there is no page personas/{spec.persona}.md in the wiki")
    known = default_registry().names()
    unknown = [tool for tool in spec.tools or [] if tool not in known]
    if unknown:
        found.append(f"tools: no tool {', '.join(unknown)}; the tools are {', '.join(known)}")
    clusters = config.cluster_names
    if spec.cluster and spec.cluster not in clusters:
        found.append(f"cluster: no cluster {spec.cluster!r}; configured: {', '.join(clusters) or 'none'}")
    if spec.trigger.cluster and spec.trigger.cluster not in clusters:
        found.append(f"trigger.cluster: no cluster {spec.trigger.cluster!r}; configured: "
                     f"{', '.join(clusters) or 'none'}")
    return found


def persona_page(workspace: "Workspace", name: str) -> str | None:
    """The body of ``personas/<name>.md``, from the project's wiki or else the seed's; None when neither has it."""
    if not re.match(PERSONA_NAME, name):
        return None
    for root in (workspace.wiki, seed_dir()):
        try:
            return WikiStore(root).read(f"personas/{name}.md").body
        except (BettyError, OSError):
            continue
    return None


DIGEST_ID = "daily-digest"
DIGEST = AutomationSpec(
    name="Daily cluster digest",
    persona="digest",
    prompt=("Write today's digest of my work on the cluster: my jobs running and waiting now (with how long "
            "the waiting ones have waited and why), my jobs that ended since yesterday at this time (failures "
            "first, with their exit codes and the likely cause from their logs), and what I should look at "
            "today. Then append one line to log.md summing it up."),
    trigger=Trigger(kind="schedule", cron="0 8 * * *"),
    tools=["cluster_queue", "cluster_history", "cluster_status", "job_logs", "wiki_read", "wiki_search",
           "wiki_write", "scratchpad"],
    limits=AutomationLimits(iterations=16, tokens=150_000, seconds=600),
    mode=Mode.AUTO,
)
"""The schedule example, installed paused (off until a person resumes it): every day at 08:00."""
