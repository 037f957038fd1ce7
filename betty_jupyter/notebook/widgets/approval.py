"""The approval card: what would happen, exactly, and the person's answer.

It never blocks the kernel: the buttons answer through the backend, and the card turns
into a one-line record of the decision once the approval is resolved (here, in the side
panel, or by a timeout). Its output then keeps that record, and what was asked, as static
HTML and text (:mod:`.record`), so a saved notebook still says who decided what.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping

import ipywidgets as widgets

from ...agent import events as ev
from ...agent.vocabulary import Decision
from ...errors import BettyError
from ...safe_text import html_text, visible
from .edit import Check, EditForm
from .html import details_table_html, facts_html, highlighted_html, pre_html
from .record import Record, Recorded
from .rows import wrapping_row

if TYPE_CHECKING:
    from ...agent.events import AnyEvent, ApprovalRequest
    from ...agent.models import Preview

Respond = Callable[[str, str, "Mapping[str, Any] | None", "str | None"], None]
"""How a card sends its answer: (approval id, decision, edited arguments, the digest of the card answered)."""
StartEstimate = Callable[[str], str]
"""When and where an open card's job would start, as one line (``NotebookBetty.start_estimate``)."""
_TIER_WORDS = {0: "tier 0 · never asks", 1: "tier 1 · asks once per session", 2: "tier 2 · always asks"}
_DECISION_WORDS: dict[str, str] = {Decision.APPROVED: "✓ approved", Decision.APPROVED_FOR_SESSION: "✓ approved for this session",
                   Decision.EDITED: "✎ approved with edits", Decision.DENIED: "✗ denied",
                   Decision.TIMED_OUT: "⌛ expired (no answer)", Decision.CANCELLED: "✗ cancelled"}


_EXACT_WORDS = {"command": "Exact command and details", "script": "Exact script, command, environment and paths",
                "diff": "Exact change and details", "text": "Full text and details"}
"""What the disclosure of a preview's exact text is called, by its kind."""


def preview_html(request: "ApprovalRequest") -> str:
    """The preview as HTML: what the person decides on first (its summary), then, one click away, the exact
    command, highlighted script, coloured diff or text, and the details in words."""
    return _preview_html(request.preview)


def _preview_html(preview: "Preview", unfolded: bool = False) -> str:
    if preview.kind == "script":
        body = highlighted_html(preview.text, "bash")
    elif preview.kind == "diff":
        body = highlighted_html(preview.text, "diff")
    else:
        body = pre_html(preview.text)
    first, *more = preview.summary or [preview.title]
    summary = f"<b>{html_text(first)}</b>" + "".join(f"<div>{html_text(line)}</div>" for line in more)
    words = _EXACT_WORDS.get(preview.kind, _EXACT_WORDS["text"])
    return (f"<div class='betty-preview betty-preview-{html_text(preview.kind)}'>"
            f"<div class='betty-preview-summary'>{summary}</div>"
            f"<details class='betty-preview-exact'{' open' if unfolded else ''}><summary>{html_text(words)}</summary>"
            f"{body}{facts_html(preview)}</details></div>")


def _checked_html(preview: "Preview") -> str:
    """A checked edit's preview: its exact text shown, since the person just wrote it."""
    return _preview_html(preview, unfolded=True)


def _header_html(request: "ApprovalRequest") -> str:
    task = f" <span class='betty-task'>for {html_text(request.task)}</span>" if request.task else ""
    return (f"<b>{html_text(request.tool)}</b>{task} <span class='betty-tier'>({_TIER_WORDS.get(request.tier, '')})"
            f"</span><br><i>{html_text(request.reason)}</i>")


class ApprovalCard(Recorded, widgets.VBox):
    """One approval: tool, tier, reason, the exact preview, and Approve / for session / Deny / Edit."""

    def __init__(self, request: "ApprovalRequest", respond: Respond, answered_by: str | None = None,
                 check: Check | None = None, estimate: StartEstimate | None = None) -> None:
        """``answered_by``: for a card whose session's events this notebook does not follow (an
        automation's), the name its record shows once the answer is accepted. ``check``: how an edit is
        checked and previewed again (without it the card offers no Edit, since an unchecked edit may not
        be approved). ``estimate``: for a submission, when and where it would start; asked on a thread of
        its own once the card is built, so the card never waits for it (a failure shows nothing)."""
        self.request, self._respond, self._answered_by, self._check = request, respond, answered_by, check
        self.decision: str | None = None
        self.approver: str | None = None
        self.edited: Mapping[str, Any] | None = None
        """The arguments as a person edited them, when the decision is ``edited``."""
        header = widgets.HTML(_header_html(request))
        preview = widgets.HTML(preview_html(request))
        self.approve = self._button("Approve", "success", Decision.APPROVED, "betty-approve")
        self.approve_session = self._button("Approve for session", "info", Decision.APPROVED_FOR_SESSION,
                                            "betty-approve-session")
        if request.tier >= 2:
            self.approve_session.disabled = True
            self.approve_session.tooltip = "tier 2 asks every time: there is nothing to approve for the session"
        self.deny = self._button("Deny", "danger", Decision.DENIED, "betty-deny")
        self.edit = widgets.Button(description="Edit", icon="pencil",
                                   layout=widgets.Layout(width="auto", display="none" if check is None else None))
        self.edit.add_class("betty-edit")
        self.edit.on_click(lambda _: self._open_editor())
        self.editor: EditForm | None = None
        self.editing = widgets.VBox([], layout=widgets.Layout(display="none"))
        self.problem = widgets.HTML("")
        self.problem.add_class("betty-problem")
        self.buttons = wrapping_row([self.approve, self.approve_session, self.deny, self.edit])
        self.start = widgets.HTML("")
        self.start.add_class("betty-start-estimate")
        super().__init__([header, preview, self.start, self.buttons, self.editing, self.problem],
                         layout=widgets.Layout(border="1px solid var(--jp-warn-color1)", padding="6px", margin="4px 0"))
        self.add_class("betty-approval")
        if estimate is not None and request.tool == "cluster_submit":
            self.estimating = threading.Thread(target=self._fill_start, args=(estimate,), daemon=True,
                                               name="betty-start-estimate")
            self.estimating.start()

    def _fill_start(self, estimate: StartEstimate) -> None:
        """Ask when the job would start and show the line; on any refusal, nothing (approving never waits on it)."""
        try:
            line = estimate(self.request.approval_id)
        except (BettyError, OSError):
            return
        if line and self.decision is None:
            self.start.value = f"<span class='betty-start'><i>{html_text(line)}</i></span>"

    def __repr__(self) -> str:
        state = self.decision or "waiting"
        return f"<Betty approval: {self.request.tool} (tier {self.request.tier}), {state}>"

    def _button(self, label: str, style: str, decision: str, css: str) -> widgets.Button:
        button = widgets.Button(description=label, button_style=style, layout=widgets.Layout(width="auto"))
        button.add_class(css)
        button.on_click(lambda _: self._answer(decision, None))
        return button

    def _open_editor(self) -> None:
        """The edit form, built once: fields, the check of each change and Approve edited."""
        if self.editor is None and self._check is not None:
            self.editor = EditForm(self.request, self._check, _checked_html)
            self.editor.approve.on_click(lambda _: self._send_edited())
            self.editor.cancel.on_click(lambda _: self._close_editor())
            self.editing.children = [self.editor]
        self.editing.layout.display = "flex"
        self.buttons.layout.display = "none"

    def _close_editor(self) -> None:
        """Cancel: the form closes (kept as edited, for the next Edit) and the card's own buttons come back."""
        self.editing.layout.display = "none"
        self.buttons.layout.display = None

    def _send_edited(self) -> None:
        if self.editor is not None and self.editor.checked is not None:
            self._answer(Decision.EDITED, self.editor.checked)

    def _answer(self, decision: str, args: Mapping[str, Any] | None) -> None:
        if self.decision is not None:
            return
        for button in (self.approve, self.approve_session, self.deny, self.edit, *self._edit_buttons()):
            button.disabled = True
        try:
            self._respond(self.request.approval_id, decision, args, self.request.digest or None)
        except BettyError as error:
            self.problem.value = f"<span style='color:var(--jp-error-color1)'>{html_text(str(error))}</span>"
            for button in (self.approve, self.deny, self.edit, *self._edit_buttons()):
                button.disabled = False
            self.approve_session.disabled = self.request.tier >= 2
            return
        if self._answered_by is not None:
            self.resolved(decision, self._answered_by, args)

    def _edit_buttons(self) -> list[widgets.Button]:
        return [] if self.editor is None else [self.editor.approve]

    def on_event(self, event: "AnyEvent") -> None:
        """Collapse into a record when this approval is resolved (wherever it was answered)."""
        match event:
            case ev.ApprovalResolvedEvent(payload=resolved) if resolved.approval_id == self.request.approval_id:
                self.resolved(resolved.decision, resolved.approver, resolved.args)

    def resolved(self, decision: str, approver: str | None, edited: Mapping[str, Any] | None = None) -> None:
        """Turn into a compact record of the decision (``edited``: the arguments as the person edited them)."""
        if self.decision is not None:
            return
        self.decision, self.approver = decision, approver
        self.edited = edited if decision == Decision.EDITED else None
        self.children = [widgets.HTML(self._decision_html())]
        self.layout.border = "1px solid var(--jp-border-color2)"
        self.rerecord()

    def _decision_words(self) -> str:
        assert self.decision is not None
        by = f" by {self.approver}" if self.approver else ""
        return f"{_DECISION_WORDS.get(self.decision, self.decision)}{by}"

    def _decision_html(self) -> str:
        assert self.decision is not None
        return (f"<span class='betty-decision betty-decision-{html_text(self.decision)}'>"
                f"{html_text(self._decision_words())}</span> — <b>{html_text(self.request.tool)}</b>: "
                f"{html_text(self.request.preview.title)}")

    @property
    def settled(self) -> bool:
        """Answered (or expired): the card is a record now."""
        return self.decision is not None

    def record(self) -> Record:
        """While it waits: what is asked. Once answered: the decision, who made it, and what was asked."""
        request, preview = self.request, self.request.preview
        asked_html = preview_html(request)
        asked_text = f"{preview.title}\n{preview.text.rstrip()}"
        if self.decision is None:
            return Record(f"<div class='betty-approval'>{_header_html(request)}{asked_html}"
                          f"<i>waiting for a person's answer</i></div>",
                          visible(f"{request.tool} ({_TIER_WORDS.get(request.tier, '')}), waiting for a person's "
                                  f"answer: {request.reason}\n{asked_text}"))
        edited_html, edited_text = self._edited_parts()
        return Record(f"<div class='betty-approval'>{self._decision_html()}{edited_html}"
                      f"<details><summary>what was asked</summary>{asked_html}</details></div>",
                      visible(f"{self._decision_words()} — {request.tool}: {edited_text}{asked_text}"))

    def _edited_parts(self) -> tuple[str, str]:
        """What was approved after editing, as HTML and as text (nothing when it was not edited)."""
        if not self.edited:
            return "", ""
        script = self.edited.get("script")
        others = {k: v for k, v in self.edited.items() if k != "script"}
        script_html = highlighted_html(script, "bash") if isinstance(script, str) else ""
        edited_html = f"<div class='betty-edited'><b>as edited</b>{script_html}{details_table_html(others)}</div>"
        lines = [*([script.rstrip()] if isinstance(script, str) else []), *(f"{k}: {v}" for k, v in others.items())]
        return edited_html, "as edited:\n" + "\n".join(lines) + "\nasked: "
