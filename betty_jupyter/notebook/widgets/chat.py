"""The chat stream of ``%betty ask``: the reply as it streams, tool calls as collapsible rows, cards inline.

Its output keeps the conversation as static text too (updated when a card is answered), and
once the turn is over, that record alone.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

import ipywidgets as widgets

from ...agent import events as ev
from ...agent.vocabulary import DoneReason
from ...safe_text import html_text, markdown_html, visible
from .approval import ApprovalCard, Respond, StartEstimate
from .edit import Check
from .plan import card_for
from .record import Note, Record, Recorded
from .rows import wrapping_row


_ENDINGS: dict[str, str] = {DoneReason.FINISHED: "", DoneReason.DENIED: "stopped: an approval was denied",
            DoneReason.BREAKER: "stopped by a limit", DoneReason.ERROR: "stopped by an error",
            DoneReason.STOPPED: "stopped"}


class ChatStream(Recorded, widgets.VBox):
    """One turn of a conversation, drawn from the session's events until ``done``."""

    def __init__(self, prompt: str, respond: Respond, stop: Callable[[], Any], check: Check | None = None,
                 estimate: StartEstimate | None = None) -> None:
        """``check`` and ``estimate`` go to each approval card (see :class:`ApprovalCard`)."""
        self._respond, self._stop_agent, self._check, self._estimate = respond, stop, check, estimate
        self.done = threading.Event()
        self.reason: str | None = None
        self.text = ""
        self.items = widgets.VBox([])
        self.status = widgets.HTML("<i>Betty is thinking…</i>")
        self.status.add_class("betty-chat-status")
        self.stop_button = widgets.Button(description="Stop", icon="stop", layout=widgets.Layout(width="auto"))
        self.stop_button.add_class("betty-stop")
        self.stop_button.on_click(lambda _: self._stop_agent())
        self.cards: dict[str, ApprovalCard] = {}
        self.rows: dict[str, widgets.Accordion] = {}
        self._reply: Note | None = None
        self._lock = threading.RLock()
        self.you = Note(f"<div class='betty-you'><b>You:</b> {html_text(prompt)}</div>", f"You: {prompt}")
        super().__init__([self.you, self.items, wrapping_row([self.status, self.stop_button])])
        self.add_class("betty-chat")

    def __repr__(self) -> str:
        return f"<Betty chat: {self.reason or 'answering'}>"

    @property
    def settled(self) -> bool:
        """The turn is over."""
        return self.reason is not None

    def record(self) -> Record:
        """The question, the reply, each tool call and card, and how the turn ended."""
        records = [self.you.record()]
        for item in self.items.children:
            if isinstance(item, Recorded):
                records.append(item.record())
            elif isinstance(item, widgets.Accordion):
                title = item.get_title(0)
                records.append(Record(f"<div class='betty-tool-row'>{html_text(title)}</div>", visible(title)))
        ending = _ENDINGS.get(self.reason, self.reason) if self.reason else "answering…"
        records.append(Record(f"<small>{html_text(ending)}</small>", visible(ending)) if ending else Record("", ""))
        return Record.joined(records)

    def on_event(self, event: "ev.AnyEvent") -> None:
        """Draw one event of the session (called from another thread)."""
        with self._lock:
            self._draw(event)

    def _draw(self, event: "ev.AnyEvent") -> None:
        match event:
            case ev.MessageDeltaEvent(payload=delta):
                self.text += delta.text
                reply = self._reply_widget()
                reply.value = f"<div class='betty-reply' style='white-space:pre-wrap'>{html_text(self.text)}</div>"
                reply.text = f"Betty: {self.text}"
            case ev.MessageEvent(payload=message) if message.role == "assistant":
                reply = self._reply_widget()
                reply.value = f"<div class='betty-reply'>{markdown_html(message.text)}</div>"
                reply.text = f"Betty: {message.text}"
                self._reply, self.text = None, ""
            case ev.ToolCallEvent(payload=call):
                self._close_reply()
                row = widgets.Accordion([widgets.HTML(f"<pre>{html_text(json.dumps(call.args, indent=2))}</pre>")])
                row.set_title(0, f"→ {call.tool}")
                row.selected_index = None
                row.add_class("betty-tool-row")
                self.rows[call.call_id] = row
                self._add(row)
            case ev.ToolResultEvent(payload=result):
                row = self.rows.get(result.call_id)
                mark = "✓" if result.ok else "✗"
                first = (result.summary.splitlines() or [""])[0][:100]
                if row is not None:
                    row.set_title(0, f"{mark} {result.tool}: {first}")
                    row.children = [widgets.HTML(f"<pre>{html_text(result.summary)}</pre>")]
            case ev.ApprovalRequestEvent(payload=request):
                self._close_reply()
                card = card_for(request, self._respond, check=self._check, estimate=self._estimate)
                card.recorded_in(self)
                self.cards[request.approval_id] = card
                self._add(card)
            case ev.ApprovalResolvedEvent(payload=resolved):
                if resolved.approval_id in self.cards:
                    self.cards[resolved.approval_id].resolved(resolved.decision, resolved.approver, resolved.args)
            case ev.ErrorEvent(payload=error):
                self._note("error", error.message, "var(--jp-error-color1)")
            case ev.ReplanningEvent(payload=replanning):
                self._note("replanning", replanning.reason, "var(--jp-warn-color1)")
            case ev.JobUpdateEvent(payload=update):
                line = f"job {update.job_id}: {update.previous} → {update.state}"
                self._add(Note(f"<small>{html_text(line)}</small>", line))
            case ev.DoneEvent(payload=done):
                self._end(done.reason)

    def _note(self, kind: str, text: str, colour: str) -> None:
        self._add(Note(f"<div class='betty-{html_text(kind)}' style='color:{html_text(colour)}'>"
                       f"{html_text(text)}</div>", text))

    def _end(self, reason: DoneReason) -> None:
        self.reason = reason
        self.status.value = f"<small>{html_text(_ENDINGS.get(reason, reason))}</small>"
        self.stop_button.layout.display = "none"
        for card in self.cards.values():
            if card.decision is None:
                card.resolved("cancelled", None)
        self.rerecord()
        self.done.set()

    def _reply_widget(self) -> Note:
        if self._reply is None:
            self._reply = Note("", "")
            self._add(self._reply)
        return self._reply

    def _close_reply(self) -> None:
        self._reply, self.text = None, ""

    def _add(self, item: widgets.Widget) -> None:
        self.items.children = [*self.items.children, item]
