"""The agent's events: the one wire protocol for the side panel, magics, the CLI and automations.

Every event is ``{type, session_id, seq, ts, payload}``; ``type`` names the payload model::

    message_delta     MessageDelta       a piece of the assistant's reply as it streams
    message           Message            a whole message (assistant or user)
    plan              Plan               the steps the agent means to take, each checked and previewed
    plan_step         PlanStepUpdate     one step of a plan was decided, ran, failed or will not run
    tool_call         ToolCallInfo       the agent asked for a tool
    approval_request  ApprovalRequest    a person must approve a call (with its preview)
    approval_resolved ApprovalResolved   how that approval ended
    second_approval   SecondApproval     an approved job above the site's limits waits for, or got, a second approver
    tool_result       ToolResultInfo     what a tool did
    error             ErrorInfo          something failed (retryable or not)
    replanning        Replanning         the agent changes course, and why
    job_update        JobUpdateInfo      a watched Slurm job changed state
    budget            Budget             iterations and tokens spent so far
    done              Done               the turn ended, and why

``seq`` counts 1, 2, 3… per session and ``ts`` is a unix time in seconds. A front-end that
reconnects asks :meth:`EventStream.since` for what it missed. The JSON Schema of the whole
protocol is ``betty_jupyter/schemas/events.v1.json`` (``betty_jupyter.schemas``), from which the
side panel's types and checks are generated.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Annotated, Any, Callable, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidatorFunctionWrapHandler, model_validator

from .bulletin import SentContext
from .models import Preview
from .second_approver import SecondState
from .vocabulary import Decision, DoneReason, EventType, Resolved, StepStatus

log = logging.getLogger(__name__)

_TIER = Field(ge=0, le=2, description="0 never asks, 1 asks once per session, 2 always asks")


class Payload(BaseModel):
    """Base of every payload: unknown fields are refused, so a misspelt field fails where it is made."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_serialization_defaults_required=True)


class MessageDelta(Payload):
    """A piece of the assistant's reply, sent as the model streams it."""

    text: str


class Message(Payload):
    """A whole message: the assistant's reply once complete, or what the person wrote."""

    role: Literal["assistant", "user"]
    text: str
    model: str | None = Field(None, description=(
        "the model that wrote an assistant message: the session's model, or its planner for a turn's plan"))
    context: SentContext | None = Field(default=None, exclude_if=lambda context: context is None, description=(
        "where the person worked when they wrote a user message, as the chip they sent showed it; the model "
        "reads it quoted after their words, the transcript shows it as the chip"))


class PlanStep(Payload):
    """One step of a plan as Betty checked it: the call, its tier and preview, the steps it needs, where it stands."""

    index: int = Field(ge=1, description="its number in the plan: 1, 2, 3…")
    tool: str
    args: dict[str, Any] = Field(description="the arguments as checked (a refused step's as the model sent them)")
    tier: int = _TIER
    preview: Preview | None = Field(None, description="exactly what it would do; null for a step refused before "
                                    "it could be previewed")
    depends_on: list[int] = Field(default_factory=list, description="the numbers of the earlier steps it needs")
    status: StepStatus
    reason: str = Field("", description="why Betty refused it, or why it will not run")


class Plan(Payload):
    """The steps the agent means to take, in order: one line each, and (from a ``propose_plan`` call) each step
    checked by Betty's policy and previewed exactly as its own card would be."""

    steps: list[str]
    plan_id: str = ""
    call_id: str = Field("", description="the propose_plan call the plan came from")
    goal: str = ""
    calls: list[PlanStep] = Field(default_factory=list, description="the steps, structured, in order")


class PlanStepUpdate(Payload):
    """One step of plan ``plan_id`` moved on: decided by a person, running, done, failed or not run."""

    plan_id: str
    index: int = Field(ge=1)
    tool: str
    status: StepStatus
    call_id: str | None = Field(None, description="the call that runs it, once the model made it")
    args: dict[str, Any] | None = Field(None, description="the granted arguments (an edited step's own)")
    summary: str = Field("", description="one line: the result, the error, or why it will not run")


class ToolCallInfo(Payload):
    """The agent asked for a tool with these arguments (before any approval)."""

    call_id: str
    tool: str
    args: dict[str, Any]
    tier: int = _TIER


class ApprovalRequest(Payload):
    """A person must approve (or edit, or deny) a call; ``preview`` shows exactly what would happen."""

    approval_id: str
    call_id: str
    tool: str
    tier: int = _TIER
    args: dict[str, Any]
    preview: Preview
    reason: str
    task: str | None = Field(None, description="whom the call's session works for, when not the person's own "
                             "conversation: a delegated task, an automation, an MCP client ('claude-code (MCP)')")
    digest: str = Field("", description="what the card is bound to (``sha256:<hex>`` of the tool, its arguments and "
                        "the exact thing that runs); an answer may send it back, and the call runs only while what "
                        "it would run still has it")


class WaitingApproval(ApprovalRequest):
    """An approval open now, as ``GET approvals`` lists it: the card its ``approval_request`` event carried, and
    the session whose call waits on it. ``task`` names whom that session works for (an MCP client, an automation,
    a delegated task); it is None in a person's own chat."""

    model_config = ConfigDict(title="WaitingApproval")

    session_id: str = Field(description="the session whose call waits on the answer")


class ApprovalResolved(Payload):
    """How an approval ended; ``args`` holds the edited arguments when ``decision`` is ``edited``."""

    approval_id: str
    call_id: str
    decision: Resolved
    approver: str | None = None
    args: dict[str, Any] | None = None


class SecondApproval(Payload):
    """A job above the site's limits that the person approved: it waits for one of ``approvers`` since ``since``
    (``waiting``), then one approved it (``approved``, ``approver`` names them) or it does not run (``denied``,
    ``refused``: an answer that did not count, or none in time), ``why`` in one line."""

    approval_id: str
    call_id: str
    state: SecondState
    approvers: list[str]
    since: float = Field(description="when the person approved it and it began to wait (unix seconds)")
    approver: str | None = None
    why: str = ""


class ToolResultInfo(Payload):
    """What a call came to: how it was decided and by whom, a one-line summary; the full output is in
    the action log at ``output_ref``.

    ``decision`` is ``auto`` for a call that ran without a card, the person's answer for one that ran
    after a card, ``proposed`` in propose mode and ``refused`` when Betty refused it before anyone
    was asked; ``approver`` names the person who approved it (or typed it), when one did.
    """

    call_id: str
    tool: str
    ok: bool
    decision: Decision
    approver: str | None = None
    summary: str
    duration_ms: float = Field(ge=0)
    output_ref: str | None = None
    artifacts: list[str] = Field(default_factory=list)


class ErrorInfo(Payload):
    """Something failed; ``message`` is one line for a person, ``code`` a stable name for programs."""

    message: str
    code: str
    retryable: bool = False


class Replanning(Payload):
    """The agent changes course (after a denial, a failed tool, new facts)."""

    reason: str


class JobUpdateInfo(Payload):
    """A watched Slurm job moved from ``previous`` to ``state``; links to its wiki page and notebook."""

    job_id: str
    cluster: str
    state: str
    previous: str
    page: str | None = None
    notebook: str | None = None


class Budget(Payload):
    """What the session has spent of its circuit breaker's allowance."""

    iterations: int = Field(ge=0)
    max_iterations: int = Field(ge=0)
    tokens: int = Field(ge=0)
    max_tokens: int = Field(ge=0)


class Done(Payload):
    """The turn ended: finished, stopped by a denial, the circuit breaker, an error, or a person."""

    reason: DoneReason


class Event(Payload):
    """One event: ``{type, session_id, seq, ts, payload}``.

    ``Event.model_validate(data)`` (or :func:`parse_event`) returns the subclass for ``type``,
    e.g. :class:`MessageEvent`; ``Event`` itself is never built directly.
    """

    type: str
    session_id: str
    seq: int = Field(ge=1)
    ts: float
    payload: Payload

    def __init__(self, **data: Any) -> None:
        if type(self) is Event:
            raise TypeError("Event is the base of the event types: use EventStream.emit or parse_event")
        super().__init__(**data)

    @model_validator(mode="wrap")
    @classmethod
    def _by_type(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Validating as the base class picks the event class from `type` (a tagged union).
        if cls is Event:
            return _EVENTS.validate_python(data)
        return handler(data)


class MessageDeltaEvent(Event):
    """``message_delta``: a piece of the assistant's reply."""

    type: Literal[EventType.MESSAGE_DELTA] = EventType.MESSAGE_DELTA
    payload: MessageDelta


class MessageEvent(Event):
    """``message``: a whole message."""

    type: Literal[EventType.MESSAGE] = EventType.MESSAGE
    payload: Message


class PlanEvent(Event):
    """``plan``: the agent's plan."""

    type: Literal[EventType.PLAN] = EventType.PLAN
    payload: Plan


class PlanStepEvent(Event):
    """``plan_step``: one step of a plan moved on."""

    type: Literal[EventType.PLAN_STEP] = EventType.PLAN_STEP
    payload: PlanStepUpdate


class ToolCallEvent(Event):
    """``tool_call``: the agent asked for a tool."""

    type: Literal[EventType.TOOL_CALL] = EventType.TOOL_CALL
    payload: ToolCallInfo


class ApprovalRequestEvent(Event):
    """``approval_request``: a person must decide."""

    type: Literal[EventType.APPROVAL_REQUEST] = EventType.APPROVAL_REQUEST
    payload: ApprovalRequest


class ApprovalResolvedEvent(Event):
    """``approval_resolved``: the decision."""

    type: Literal[EventType.APPROVAL_RESOLVED] = EventType.APPROVAL_RESOLVED
    payload: ApprovalResolved


class SecondApprovalEvent(Event):
    """``second_approval``: a job above the site's limits waits for, or got, its second approver."""

    type: Literal[EventType.SECOND_APPROVAL] = EventType.SECOND_APPROVAL
    payload: SecondApproval


class ToolResultEvent(Event):
    """``tool_result``: what a tool did."""

    type: Literal[EventType.TOOL_RESULT] = EventType.TOOL_RESULT
    payload: ToolResultInfo


class ErrorEvent(Event):
    """``error``: something failed."""

    type: Literal[EventType.ERROR] = EventType.ERROR
    payload: ErrorInfo


class ReplanningEvent(Event):
    """``replanning``: the agent changes course."""

    type: Literal[EventType.REPLANNING] = EventType.REPLANNING
    payload: Replanning


class JobUpdateEvent(Event):
    """``job_update``: a watched job changed state."""

    type: Literal[EventType.JOB_UPDATE] = EventType.JOB_UPDATE
    payload: JobUpdateInfo


class BudgetEvent(Event):
    """``budget``: what the session has spent."""

    type: Literal[EventType.BUDGET] = EventType.BUDGET
    payload: Budget


class DoneEvent(Event):
    """``done``: the turn ended."""

    type: Literal[EventType.DONE] = EventType.DONE
    payload: Done


AnyEvent = Annotated[
    Union[MessageDeltaEvent, MessageEvent, PlanEvent, PlanStepEvent, ToolCallEvent, ApprovalRequestEvent,
          ApprovalResolvedEvent, SecondApprovalEvent, ToolResultEvent, ErrorEvent, ReplanningEvent, JobUpdateEvent,
          BudgetEvent, DoneEvent],
    Field(discriminator="type"),
]
"""Every event class, tagged by ``type``: narrow with ``if event.type == "tool_call": …``."""

_EVENTS: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

PAYLOADS: dict[str, type[Payload]] = {
    cls.model_fields["type"].default: cls.model_fields["payload"].annotation  # type: ignore[misc]
    for cls in Event.__subclasses__()
}
"""The payload model of each event type, in the order of the protocol."""

EVENT_TYPES: tuple[str, ...] = tuple(event_type.value for event_type in EventType)
"""The event types' words, in the order of the protocol."""

if tuple(PAYLOADS) != tuple(EventType):
    raise RuntimeError("every EventType needs exactly one event class, in the order of the protocol")


def parse_event(data: dict[str, Any] | str | bytes) -> AnyEvent:
    """An event from its JSON (text) or its dict; a :class:`pydantic.ValidationError` names what is wrong."""
    if isinstance(data, (str, bytes)):
        return _EVENTS.validate_json(data)
    return _EVENTS.validate_python(data)


Subscriber = Callable[[AnyEvent], None]
"""What :meth:`EventStream.subscribe` takes: it gets each event as its own class (narrow with ``isinstance``)."""


class EventStream:
    """The events of one session: numbered, kept for reconnecting front-ends, sent to subscribers.

    Thread-safe: :meth:`emit` may be called from any thread. Subscribers are called in the
    emitting thread, one event at a time and in ``seq`` order, so they should be quick (hand the
    event to an event loop) and must not emit themselves. A subscriber that raises is logged
    and the others still get the event.
    """

    def __init__(self, session_id: str, max_events: int = 10_000) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.session_id = session_id
        self.max_events = max_events
        self._events: deque[AnyEvent] = deque(maxlen=max_events)
        self._subscribers: list[Subscriber] = []
        self._seq = 0
        self._lock = threading.RLock()

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest event (0 before the first)."""
        with self._lock:
            return self._seq

    def emit(self, type: str, payload: BaseModel) -> AnyEvent:
        """Number ``payload`` as the next event of type ``type``, keep it and send it to every subscriber.

        A payload of the wrong model for ``type`` (or an unknown type) is a ValidationError,
        and uses no number.
        """
        with self._lock:
            event = _EVENTS.validate_python({"type": type, "session_id": self.session_id, "seq": self._seq + 1,
                                             "ts": time.time(), "payload": payload})
            self._seq = event.seq
            self._events.append(event)
            for subscriber in list(self._subscribers):
                _deliver(subscriber, event)
            return event

    def subscribe(self, callback: Subscriber, after: int | None = None) -> Callable[[], None]:
        """Send every new event to ``callback``; returns the function that stops it (safe to call twice).

        With ``after``, the kept events after that ``seq`` are sent first, with no gap or repeat
        between them and the new ones (a reconnecting front-end passes the last ``seq`` it saw).
        """
        with self._lock:
            if after is not None:
                for event in self._since(after):
                    _deliver(callback, event)
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def since(self, seq: int) -> list[AnyEvent]:
        """The kept events numbered after ``seq``, oldest first.

        Only the newest ``max_events`` are kept: when the first returned ``seq`` is above
        ``seq + 1``, older events were dropped.
        """
        with self._lock:
            return self._since(seq)

    def _since(self, seq: int) -> list[AnyEvent]:
        if not self._events:
            return []
        first = self._events[0].seq
        start = max(0, seq - first + 1)
        return [self._events[i] for i in range(start, len(self._events))]


def _deliver(subscriber: Subscriber, event: AnyEvent) -> None:
    try:
        subscriber(event)
    except Exception:
        # One broken front-end must not stop the agent or starve the other subscribers.
        log.exception("an event subscriber failed on %s #%d", event.type, event.seq)
