"""Wire models of Betty's REST API and chat socket (``docs/server-api.md``).

Answers are ``TypedDict``s (plain JSON); request bodies and socket messages are pydantic
models, so a malformed one is refused with one line naming the field. Events themselves are
``betty_jupyter.agent.events``; outcomes are ``betty_jupyter.agent.wire``; automations are
``betty_jupyter.agent.automations.definitions``. ``betty_jupyter.schemas`` exports them all
as JSON Schema, from which the side panel's TypeScript types are generated.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import NotRequired, TypedDict  # pydantic reads TypedDicts from typing only on Python 3.12 and later

from ..agent.automations.definitions import Automation, Run, RunStatus
from ..agent.bulletin import ContextBulletin
from ..agent.events import WaitingApproval
from ..agent.models import Preview

from ..agent.vocabulary import Face, Mode, PersonAnswer
from ..advisor.overview import OverviewData
from ..errors import LinkProblem

PersonDecision = PersonAnswer


class Health(TypedDict):
    """Answer of ``GET /betty/api/health``."""

    status: Literal["ok"]
    version: str
    clusters: list[str]
    default_cluster: str | None
    project: NotRequired[str]
    """The project folder the server works in: where a notebook's ``%%betty run`` stages its cells."""


class Cluster(TypedDict):
    """A configured cluster (``GET clusters``)."""

    name: str
    transport: str
    host: str
    default: bool
    environments: list[str]
    """The profile's named environments a notebook or cell run may use, in the profile's order."""


class Clusters(TypedDict):
    """Answer of ``GET clusters``."""

    clusters: list[Cluster]


class ClusterHealth(TypedDict):
    """Answer of ``GET clusters/{name}/health``: can Betty use the cluster now, and if not, why.

    ``message`` is one line naming the cause ("no-such-host.invalid: Name or service not known");
    ``problem`` the same as a word (None when ``ok``); ``fingerprint`` only for a host key to confirm;
    ``checked_at`` is the unix time of the check (answers are kept a few seconds).
    """

    cluster: str
    ok: bool
    message: str
    problem: LinkProblem | None
    checked_at: float
    fingerprint: NotRequired[str]


class ClusterOverview(TypedDict):
    """``GET clusters/{name}/overview``: what the cluster is doing, read at most once per few seconds for everyone."""

    cluster: str
    ok: bool
    message: str
    """The one-line summary, or why the cluster could not be read."""
    overview: OverviewData | None


class ClusterCheck(TypedDict, total=False):
    """Answer of ``POST clusters/{name}/test``; ``fingerprint`` only for an unknown host key."""

    ok: bool
    message: str
    fingerprint: str


@with_config(ConfigDict(title="LoginQuestion"))
class LoginQuestionInfo(TypedDict):
    """A question a cluster's login node asks now (a second factor), waiting until a person answers or cancels it.

    ``prompt`` and ``instructions`` are the login node's own words (text from another host);
    ``echo`` is false for a password field; ``asked_at`` is a unix time.
    """

    id: str
    cluster: str
    prompt: str
    echo: bool
    instructions: str
    asked_at: float


class LoginQuestions(TypedDict):
    """Answer of ``GET login-questions``: the questions waiting now, oldest first."""

    questions: list[LoginQuestionInfo]


class ModelSetup(TypedDict):
    """How to give Betty's chat a model, for a server that has none: the setting, the file it goes in (the
    person's own Jupyter config), whether JupyterLab must restart, and Betty's page about it."""

    setting: str
    config_file: str
    restart: bool
    docs: str
    docs_url: str


class PolicyField(TypedDict):
    """One field of the site's policy: its value in words, and where it came from (the site's file, or default)."""

    field: str
    value: str
    origin: str


class Session(TypedDict):
    """A chat session (``POST sessions``, ``GET sessions/{id}``, ``PUT sessions/{id}/mode``).

    ``user`` is the person's login name on the session's cluster (None when it did not say). ``model`` is the
    chat model's name as its answers carry it; ``model_setup`` says how to configure one when there is none.
    ``allowed_modes`` are the modes the site's policy lets a person choose (every mode without one), and
    ``site_policy`` the policy's file (None: there is none).
    """

    session_id: str
    cluster: str
    mode: Mode
    busy: bool
    last_seq: int
    has_model: bool
    user: str | None
    model: str | None
    model_setup: ModelSetup | None
    allowed_modes: list[Mode]
    site_policy: str | None


class AccountUse(TypedDict):
    """One budgeted account's use this month against its budget (the cost meter), in GPU-hours and CPU-hours; a
    budget the site does not set is None, and so is a use that is not known (``why`` says why: Slurm keeps other
    users' usage private, or accounting could not be read)."""

    account: str
    gpu_hours_used: float | None
    gpu_hours_budget: float | None
    cpu_hours_used: float | None
    cpu_hours_budget: float | None
    known: bool
    why: str


class SitePolicyView(TypedDict):
    """Answer of ``GET policy``: the site's policy in effect, each field with its value and where it came from;
    with ``?usage=1`` where the site sets budgets, ``usage``: each budgeted account's use this month."""

    source: str | None
    fields: list[PolicyField]
    modes: list[Mode]
    mcp: bool
    usage: NotRequired[list[AccountUse]]


class AskAnswer(TypedDict):
    """Answer of ``POST sessions/{id}/ask``: the agent's events follow ``after``."""

    after: int


class Approvals(TypedDict):
    """Answer of ``GET approvals``: the approvals open now, oldest first."""

    approvals: list[WaitingApproval]


class Tools(TypedDict):
    """Answer of ``GET sessions/{id}/tools``: the tools a session may call, in the registry's order."""

    tools: list["ToolInfo"]


class ToolInfo(TypedDict):
    """One tool a session may call (``GET sessions/{id}/tools``): its arguments' JSON schema and its tier."""

    name: str
    description: str
    tier: int
    schema: dict[str, Any]


class CallStarted(TypedDict):
    """Answer of a call started without waiting (``tools`` with ``wait: false``, ``jobs/{id}/cancel``)."""

    call_id: str
    session_id: str


class Experiment(TypedDict):
    """A recorded experiment with the state its job was last seen in (``GET experiments``)."""

    slug: str
    job_id: str
    cluster: str
    submitted: str
    goal: str
    script: str
    script_path: str
    partition: str | None
    resources: dict[str, Any]
    gpu_estimate: dict[str, Any] | None
    state: str
    finished: bool
    page: str
    notebook: str
    segments: NotRequired[list[str]]
    """A continuation chain's jobs, in order (``docs/long-runs.md``); absent for a single job."""


class Experiments(TypedDict):
    """Answer of ``GET experiments``, oldest first."""

    experiments: list[Experiment]


class PipelineEdge(TypedDict):
    """One edge into a pipeline step: the earlier step it runs after, and how (``afterok``, ``aftercorr``)."""

    step: str
    kind: Literal["afterok", "aftercorr"]


class PipelineStep(TypedDict):
    """One step of a recorded pipeline as the watcher last read it (``GET experiments/{slug}/pipeline``)."""

    name: str
    job_id: str
    state: str
    why: str
    ended: str | None
    edges: list[PipelineEdge]
    singleton: bool
    outputs: list[str]


class PipelineGraph(TypedDict):
    """Answer of ``GET experiments/{slug}/pipeline``: a pipeline's steps in order, each with its edges and state;
    ``ended``: ``done``, ``failed`` or None while it goes on."""

    slug: str
    ended: str | None
    steps: list[PipelineStep]


class Sweep(TypedDict):
    """A recorded sweep (``GET sweeps``): its experiment, its grid and how many tasks it has."""

    experiment: Experiment
    grid: list[str]
    tasks: int
    at_once: int | None
    retries: int


class Sweeps(TypedDict):
    """Answer of ``GET sweeps``, oldest first."""

    sweeps: list[Sweep]


class SweepChart(TypedDict):
    """One picture of a sweep, SVG Betty drew (every text in it escaped): ``metric`` by step (``parameter`` null)
    or its final value by ``parameter``."""

    metric: str
    parameter: str | None
    svg: str


class SweepComparison(TypedDict):
    """Answer of ``GET sweeps/{slug}``: ``sweep_compare``'s outcome, its table as plain text (a row per task, the
    columns of ``betty sweeps show``) and its pictures; ``ok`` false with ``summary`` saying why it was not read."""

    ok: bool
    summary: str
    slug: str
    job_id: str
    cluster: str
    header: list[str]
    rows: list[list[str]]
    states: list[str]
    failed: list[int]
    charts: list[SweepChart]
    search_header: list[str]
    """A search's table (empty for a grid): task, objective, best so far, state, why it stopped or failed."""
    search_rows: list[list[str]]
    search_note: str
    """The parameters' importance by Optuna, once enough tasks completed; "" before."""


class NotebookStatus(TypedDict):
    """An experiment notebook open in JupyterLab, with the line Betty's status cell should say now."""

    path: str
    """The notebook's path as the panel sent it (from Jupyter's root)."""
    job_id: str
    cluster: str
    state: str
    status: str


class CellChangeJson(TypedDict):
    """An approved cell change for an open notebook: the panel applies it to the open document."""

    id: str
    path: str
    """The notebook as JupyterLab names it."""
    action: Literal["insert", "replace", "run"]
    index: int
    source: str
    cell_type: str
    before: str | None
    """The cell's source the person was shown: a replace happens only while the cell holds exactly it."""
    sha256: str | None
    """A run's approved code, as the sha256 of its UTF-8 source: the cell runs only while its source has it."""


class NotebookStatuses(TypedDict):
    """Answer of ``PUT notebooks/open``: the open notebooks that are experiments' (others are left out),
    and the approved cell changes waiting for notebooks this page holds open."""

    notebooks: list[NotebookStatus]
    changes: list[CellChangeJson]


class WorkingPlace(TypedDict):
    """Answer of ``GET notebooks/context``: the folder of a notebook and its git branch, for the context chip."""

    directory: str
    branch: str | None
    dirty: bool | None


class Automations(TypedDict):
    """Answer of ``GET automations``, oldest first."""

    automations: list[Automation]


class AutomationRuns(TypedDict):
    """Answer of ``GET automations/{id}/runs``, newest first."""

    runs: list[Run]


class RunEvent(TypedDict):
    """One line of a run's transcript: an event of its session, with the attempt it belongs to (``seq`` starts
    again at 1 with each attempt)."""

    attempt: int
    type: str
    session_id: str
    seq: int
    ts: float
    payload: Any


class AutomationRunTranscript(Run):
    """Answer of ``GET automations/{id}/runs/{run}``: the run and its session's events."""

    model_config = ConfigDict(title="AutomationRunTranscript")

    events: list[RunEvent]


class RunQueued(TypedDict):
    """Answer of ``POST automations/{id}/run``."""

    run_id: str
    status: RunStatus


class KilledRuns(TypedDict):
    """Answer of ``POST automations/{id}/kill``: the queued and running runs it stopped."""

    killed: list[str]


# ----- request bodies ----------------------------------------------------------------------------
class Body(BaseModel):
    """Base of every request body: unknown fields are refused, so a misspelt one is named."""

    model_config = ConfigDict(extra="forbid")


class SessionRequest(Body):
    """Body of ``POST sessions``; ``agent`` names the other agent a new session works for (an MCP client)."""

    cluster: str | None = None
    mode: Mode | None = None
    session_id: str | None = None
    agent: str | None = Field(None, pattern=r"^[^\x00-\x1f\x7f-\x9f]{1,100}$")


class ModeRequest(Body):
    """Body of ``PUT sessions/{id}/mode``."""

    mode: Mode


class AskRequest(Body):
    """Body of ``POST sessions/{id}/ask``."""

    prompt: str
    context: ContextBulletin | None = None
    """The context bulletin the person saw on the message (none when they removed its chip)."""


class ToolRequest(Body):
    """Body of ``POST sessions/{id}/tools/{tool}``; ``call_id`` names the call in its events.

    ``caller: "agent"`` makes it another agent's call (an MCP client's), decided by the session's
    mode as the agent's calls are, rather than a person's own.
    """

    args: dict[str, Any] = Field(default_factory=dict)
    wait: bool = True
    call_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    caller: Literal["person", "agent"] = "person"
    face: Face = Face.SERVER_API
    """Which of Betty's faces the person called from; the action log names it after them."""


class DecisionRequest(Body):
    """Body of ``POST approvals/{id}``; ``args`` only with ``edited``; ``face``: where the person answered;
    ``digest``: the card they saw."""

    decision: PersonDecision
    args: dict[str, Any] | None = None
    face: Face = Face.SERVER_API
    """Which of Betty's faces the person answered in; the action log names it after them."""
    digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")
    """The digest of the card the person saw (the ``approval_request``'s); another card's is refused (409)."""


class EditRequest(Body):
    """Body of ``POST approvals/{id}/preview``: the person's edit of the card's arguments, to check and preview."""

    args: dict[str, Any]


class EditPreview(TypedDict):
    """Answer of ``POST approvals/{id}/preview``: what the edit would do, checked as the model's call is."""

    preview: Preview


class StartEstimate(TypedDict):
    """Answer of ``GET approvals/{id}/start``: when and where an open submission card's job would start, one line
    ("" for a card that submits nothing)."""

    estimate: str


class ResubmitRequest(Body):
    """Body of ``POST jobs/{id}/resubmit``: the session whose chat shows the card (default: the desk session), and
    where to move the job (``partition``, ``gpu_type``: a placement ``cluster_why`` named; default: as recorded)."""

    session_id: str | None = None
    cluster: str | None = None
    partition: str | None = Field(None, max_length=100, description="move the job to this partition")
    gpu_type: str | None = Field(None, max_length=100, description="move the job to this GPU type (its GRES name)")
    face: Face = Face.SERVER_API
    """Which of Betty's faces the person asked from; the action log names it after them."""


class CancelRequest(Body):
    """Body of ``POST jobs/{id}/cancel``: the session to ask in (default: the cluster's desk session)."""

    session_id: str | None = None
    cluster: str | None = None
    face: Face = Face.SERVER_API
    """Which of Betty's faces the person asked from; the action log names it after them."""


class ExtendRequest(Body):
    """Body of ``POST jobs/{id}/extend``: how many continuations, and the session to ask in (default: the cluster's
    desk session)."""

    segments: int = Field(1, ge=1, le=49, description="continuation jobs to queue behind the job")
    session_id: str | None = None
    cluster: str | None = None
    face: Face = Face.SERVER_API
    """Which of Betty's faces the person asked from; the action log names it after them."""


class TrustRequest(Body):
    """Body of ``POST clusters/{name}/trust``: the fingerprint the person confirmed."""

    fingerprint: str = Field(min_length=1, max_length=200)


class LoginAnswer(Body):
    """Body of ``POST login-questions/{id}``: what the person typed for the cluster's login question."""

    answer: str = Field(max_length=4096)


class ChangeResultRequest(Body):
    """Body of ``POST notebooks/changes/{id}``: how the panel applied an approved cell change (one line)."""

    result: str = Field(min_length=1, max_length=300)


class OpenNotebooksRequest(Body):
    """Body of ``PUT notebooks/open``: every notebook one JupyterLab page (``holder``) has open now."""

    holder: str = Field(pattern=r"^[A-Za-z0-9_-]{8,64}$")
    notebooks: list[Annotated[str, Field(max_length=1000)]] = Field(default_factory=list, max_length=500)
    """Paths from Jupyter's root, as JupyterLab names them."""


# ----- what the side panel sends over the chat socket ------------------------------------------
class AskMessage(Body):
    """``{"type": "ask", "prompt": …}``: start the agent."""

    type: Literal["ask"]
    prompt: str
    context: ContextBulletin | None = None
    """The context bulletin the person saw on the message (none when they removed its chip)."""


class ApprovalMessage(Body):
    """``{"type": "approval", "approval_id": …, "decision": …, "args": …?}``: answer a card."""

    type: Literal["approval"]
    approval_id: str
    decision: PersonDecision
    args: dict[str, Any] | None = None
    digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")
    """The digest of the card the person saw; an answer to another card is refused and nothing changes."""


class StopMessage(Body):
    """``{"type": "stop"}``: stop the agent's answer."""

    type: Literal["stop"]


SocketMessage = Annotated[Union[AskMessage, ApprovalMessage, StopMessage], Field(discriminator="type")]
"""Any message the front-end sends over the chat socket, tagged by ``type``."""


class ServerError(TypedDict):
    """The chat socket's answer to a bad message: not an event (no ``seq``), and nothing changed."""

    type: Literal["server_error"]
    message: str
