"""The chat stream of ``%betty ask``: the reply as it streams, tool calls as collapsible rows, cards inline."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Callable

import ipywidgets as widgets

from ...agent.vocabulary import DoneReason
from ...safe_text import html_text, markdown_html
from .approval import ApprovalCard, Respond

if TYPE_CHECKING:
    from ...agent.events import Event

_ENDINGS = {DoneReason.FINISHED: "", DoneReason.DENIED: "stopped: an approval was denied",
            DoneReason.BREAKER: "stopped by a limit", DoneReason.ERROR: "stopped by an error",
            DoneReason.STOPPED: "stopped"}


class ChatStream(widgets.VBox):
    """One turn of a conversation, drawn from the session's events until ``done``."""

    def __init__(self, prompt: str, respond: Respond, stop: Callable[[], Any]) -> None:
        self._respond, self._stop_agent = respond, stop
        self.done = threading.Event()
        self.reason: str | None = None
        self.text = ""
        self.items = widgets.VBox([])
        self.status = widgets.HTML("<i>Betty is thinking…</i>")
        self.status.add_class("betty-chat-status")
        self.stop_button = widgets.Button(description="Stop", icon="stop", layout=widgets.Layout(width="90px"))
        self.stop_button.add_class("betty-stop")
        self.stop_button.on_click(lambda _: self._stop_agent())
        self.cards: dict[str, ApprovalCard] = {}
        self.rows: dict[str, widgets.Accordion] = {}
        self._reply: widgets.HTML | None = None
        self._lock = threading.RLock()
        you = widgets.HTML(f"<div class='betty-you'><b>You:</b> {html_text(prompt)}</div>")
        super().__init__([you, self.items, widgets.HBox([self.status, self.stop_button])])
        self.add_class("betty-chat")

    def __repr__(self) -> str:
        return f"<Betty chat: {self.reason or 'answering'}>"

    def on_event(self, event: "Event") -> None:
        """Draw one event of the session (called from another thread)."""
        with self._lock:
            self._draw(event)

    def _draw(self, event: "Event") -> None:
        payload: Any = event.payload
        if event.type == "message_delta":
            self.text += payload.text
            self._reply_widget().value = f"<div class='betty-reply' style='white-space:pre-wrap'>{html_text(self.text)}</div>"
        elif event.type == "message" and payload.role == "assistant":
            self._reply_widget().value = f"<div class='betty-reply'>{markdown_html(payload.text)}</div>"
            self._reply, self.text = None, ""
        elif event.type == "tool_call":
            self._close_reply()
            row = widgets.Accordion([widgets.HTML(f"<pre>{html_text(json.dumps(payload.args, indent=2))}</pre>")])
            row.set_title(0, f"→ {payload.tool}")
            row.selected_index = None
            row.add_class("betty-tool-row")
            self.rows[payload.call_id] = row
            self._add(row)
        elif event.type == "tool_result":
            row = self.rows.get(payload.call_id)
            mark = "✓" if payload.ok else "✗"
            first = (payload.summary.splitlines() or [""])[0][:100]
            if row is not None:
                row.set_title(0, f"{mark} {payload.tool}: {first}")
                row.children = [widgets.HTML(f"<pre>{html_text(payload.summary)}</pre>")]
        elif event.type == "approval_request":
            self._close_reply()
            card = ApprovalCard(payload, self._respond)
            self.cards[payload.approval_id] = card
            self._add(card)
        elif event.type == "approval_resolved":
            if payload.approval_id in self.cards:
                self.cards[payload.approval_id].resolved(payload.decision, payload.approver)
        elif event.type in ("error", "replanning"):
            text = str(getattr(payload, "message", None) or getattr(payload, "reason", ""))
            colour = "#c62828" if event.type == "error" else "#b58900"
            self._add(widgets.HTML(f"<div class='betty-{html_text(event.type)}' style='color:{colour}'>{html_text(text)}</div>"))
        elif event.type == "job_update":
            self._add(widgets.HTML(f"<small>job {html_text(payload.job_id)}: {html_text(payload.previous)} → "
                                   f"{html_text(payload.state)}</small>"))
        elif event.type == "done":
            self.reason = payload.reason
            self.status.value = f"<small>{html_text(_ENDINGS.get(payload.reason, payload.reason))}</small>"
            self.stop_button.layout.display = "none"
            for card in self.cards.values():
                if card.decision is None:
                    card.resolved("cancelled", None)
            self.done.set()

    def _reply_widget(self) -> widgets.HTML:
        if self._reply is None:
            self._reply = widgets.HTML("")
            self._add(self._reply)
        return self._reply

    def _close_reply(self) -> None:
        self._reply, self.text = None, ""

    def _add(self, item: widgets.Widget) -> None:
        self.items.children = [*self.items.children, item]
