"""Betty's shared words, each spelled once: how a call was decided, modes, tiers, why a turn ended, event types.

Every face (the side panel, the magics, the CLI, automations, metrics) and every record (the
action log, the events) uses these. They are ``str`` enums, so a member equals its word
(``Decision.DENIED == "denied"``), serialises as it and reads back from it::

    Decision   how one tool call was decided: auto | approved | approved_for_session | edited
               | denied | timed_out | cancelled | proposed | refused
    Mode       how much the agent may do by itself: off | propose | confirm | auto
    Tier       how much a tool may do without a person: 0 never asks, 1 once per session, 2 always
    DoneReason why a turn ended: finished | denied | breaker | error | stopped
    EventType  the ``type`` of each event on the wire
    Face       where a person answered a card: side panel | notebook | server API
    StepStatus where one step of a plan stands: proposed | refused | approved | edited | denied
               | running | done | failed | not_run
    PlanRun    how a plan's granted steps run: whole (no further card) | step_by_step (each asks again)

Programs read these fields, never the text of a message.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Literal, get_args


class Word(str, Enum):
    """A word of Betty's vocabulary: equal to, printed, shown and serialised as its text, on every Python.

    Its ``repr`` is its text's too, so a notebook, a DataFrame or a log shows ``'denied'`` where a
    word reaches a person, never ``<Decision.DENIED: 'denied'>``.
    """

    def __repr__(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __hash__(self) -> int:
        # Hash as the text, so a member and its word find the same dict entry and set member.
        return str.__hash__(self)


class Decision(Word):
    """How one tool call was decided: the action log's, the events' and the metrics' one word for it."""

    AUTO = "auto"
    """Ran without a card: tier 0, a tier 1 tool granted earlier, auto mode, an allow rule, or a person's own call."""
    APPROVED = "approved"
    """A person approved the card."""
    APPROVED_FOR_SESSION = "approved_for_session"
    """A person approved the card and this tool's later tier 1 calls in the session."""
    EDITED = "edited"
    """A person approved the card with arguments of their own (previewed again before it ran)."""
    DENIED = "denied"
    """A person denied the card: the call did not run."""
    TIMED_OUT = "timed_out"
    """Nobody answered the card in time: the call did not run."""
    CANCELLED = "cancelled"
    """The card was closed unanswered (its front-end went away, the call was stopped): it did not run."""
    PROPOSED = "proposed"
    """Propose mode: the call was previewed and shown, not run."""
    REFUSED = "refused"
    """Betty refused the call before anyone was asked (a deny rule, bad arguments, a failed preview)."""

    @property
    def ran(self) -> bool:
        """Whether a call decided so runs (fail closed: anything not listed does not)."""
        return self in RUNNING

    @property
    def answered_by_person(self) -> bool:
        """Whether this is an answer a person gives on a card (as opposed to how a card can also end)."""
        return self in PERSON_ANSWERS


APPROVING: frozenset[Decision] = frozenset({Decision.APPROVED, Decision.APPROVED_FOR_SESSION, Decision.EDITED})
"""The answers on a card that let its call run (and grant a tier 1 tool for the session)."""

RUNNING: frozenset[Decision] = APPROVING | {Decision.AUTO}
"""The decisions under which a call runs."""

PersonAnswer = Literal[Decision.APPROVED, Decision.APPROVED_FOR_SESSION, Decision.EDITED, Decision.DENIED]
"""What a person may answer on a card (a field of this type reads the words and refuses any other)."""

Resolved = Literal[Decision.APPROVED, Decision.APPROVED_FOR_SESSION, Decision.EDITED, Decision.DENIED,
                   Decision.TIMED_OUT, Decision.CANCELLED]
"""Every way a card can end: a person's answer, or no answer."""

PERSON_ANSWERS: tuple[Decision, ...] = get_args(PersonAnswer)
"""What a person may answer on a card, in the order the faces offer them."""

RESOLUTIONS: tuple[Decision, ...] = get_args(Resolved)
"""Every way a card can end."""


class Mode(Word):
    """How much the agent may do by itself; tier 2 always waits for a person, in every mode."""

    OFF = "off"
    """The agent calls no tool."""
    PROPOSE = "propose"
    """Tier 0 runs; everything else is previewed and shown, never run."""
    CONFIRM = "confirm"
    """Tier 1 asks once per session per tool, tier 2 every time (the default)."""
    AUTO = "auto"
    """Tier 1 runs without asking; tier 2 still asks."""


MODES: tuple[str, ...] = tuple(mode.value for mode in Mode)
"""The modes' words, for argument parsers and configuration."""

AutomationMode = Literal[Mode.PROPOSE, Mode.CONFIRM, Mode.AUTO]
"""The modes an automation may run in (one that is off is paused instead)."""


class Tier(IntEnum):
    """How much a tool may do without a person: 0 never asks, 1 asks once per session, 2 always asks."""

    AUTO = 0
    ONCE_PER_SESSION = 1
    ALWAYS_ASK = 2


class DoneReason(Word):
    """Why a turn of the agent ended (the ``done`` event)."""

    FINISHED = "finished"
    """The model answered."""
    DENIED = "denied"
    """A person's denial stopped the turn."""
    BREAKER = "breaker"
    """A circuit breaker (iterations, tokens, wall time) stopped it."""
    ERROR = "error"
    """The model or Betty failed."""
    STOPPED = "stopped"
    """A person stopped it."""


class Face(Word):
    """Where a person answered a card, as the action log names it after the person: "alice (side panel)"."""

    SIDE_PANEL = "side panel"
    """JupyterLab's Betty panel: its chat cards and its list of cards waiting for a person."""
    NOTEBOOK = "notebook"
    """A card of the ``%betty`` magics."""
    SERVER_API = "server API"
    """Any other client of the REST API (a script, an MCP client)."""


class StepStatus(Word):
    """Where one step of a plan stands (the ``plan`` and ``plan_step`` events)."""

    PROPOSED = "proposed"
    """Checked by Betty's policy and previewed; waits for a person."""
    REFUSED = "refused"
    """Betty's policy refused it (unknown tool, bad arguments, a rule, the mode, a failed preview)."""
    APPROVED = "approved"
    """A person granted it as previewed."""
    EDITED = "edited"
    """A person granted it with arguments of their own, checked and previewed again."""
    DENIED = "denied"
    """A person denied it: it never runs."""
    RUNNING = "running"
    """The model called it with exactly the granted arguments; it runs now."""
    DONE = "done"
    """It ran and succeeded."""
    FAILED = "failed"
    """It ran and failed: the plan stops there."""
    NOT_RUN = "not_run"
    """It was granted but never ran: an earlier step failed or was denied, or the turn ended first."""


class PlanRun(Word):
    """How the granted steps of a plan run once a person has answered it."""

    WHOLE = "whole"
    """Each granted step runs without another card when the model calls it exactly as previewed."""
    STEP_BY_STEP = "step_by_step"
    """Each granted step still shows its own card as the model calls it."""


class EventType(Word):
    """The ``type`` of each event, in the order of the protocol (see :mod:`betty_jupyter.agent.events`)."""

    MESSAGE_DELTA = "message_delta"
    MESSAGE = "message"
    PLAN = "plan"
    PLAN_STEP = "plan_step"
    TOOL_CALL = "tool_call"
    APPROVAL_REQUEST = "approval_request"
    APPROVAL_RESOLVED = "approval_resolved"
    SECOND_APPROVAL = "second_approval"
    TOOL_RESULT = "tool_result"
    ERROR = "error"
    REPLANNING = "replanning"
    JOB_UPDATE = "job_update"
    BUDGET = "budget"
    DONE = "done"
