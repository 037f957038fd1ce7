"""``%betty ask|mode|policy|log|approvals``: Betty's agent, what it may do (and what the site allows), what it did,
and what waits for the person."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from IPython.display import display

from ...agent.vocabulary import MODES
from ...errors import UsageError
from .base import Connected
from .parsing import MagicParser, parser

if TYPE_CHECKING:
    import pandas as pd


class AgentCommands(Connected):
    """The agent's commands (the agent itself loads with the connection, never at ``%load_ext``)."""

    def agent_commands(self) -> dict[str, tuple[Callable[[], MagicParser], Callable[[argparse.Namespace, str | None], Any]]]:
        """The commands of this module."""
        return {
            "ask": (self._ask_parser, self._ask), "mode": (self._mode_parser, self._mode),
            "policy": (lambda: parser("policy", "what the site's policy decides (the modes, tools, model servers, "
                                      "readable roots, job limits, audit, MCP) and where each value came from"),
                       self._policy),
            "log": (self._log_parser, self._log),
            "approvals": (lambda: parser("approvals", "every approval waiting for a person — the agent's, "
                                         "automations' (under a Betty server), other sessions'"), self._approvals),
        }

    @staticmethod
    def _ask_parser() -> MagicParser:
        made = parser("ask", "ask Betty's agent (`%%betty ask` takes the cell as the question)")
        made.add_argument("prompt", nargs="*", metavar="PROMPT")
        return made

    def _ask(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..widgets.chat import ChatStream  # lazy: ipywidgets; `%load_ext` never needs it

        prompt = " ".join(args.prompt) + (("\n" + cell) if cell else "")
        if not prompt.strip():
            raise UsageError("%betty ask: ask something, e.g. `%betty ask which partition has free GPUs?`")
        betty = self.connection
        session = betty.session_id()
        chat = ChatStream(prompt.strip(), betty.respond, lambda: betty.backend.stop(session), check=betty.repreview,
                          estimate=betty.start_estimate)
        stop = betty.follow(chat.on_event)

        def until_done(event: Any) -> None:
            if event.type == "done":
                stop()

        betty.follow(until_done)
        betty.backend.ask(session, prompt.strip())
        return chat

    @staticmethod
    def _mode_parser() -> MagicParser:
        made = parser("mode", "what Betty's agent may do without asking: off (no tools), propose (previews only), "
                         "confirm (asks for tier 1 once, tier 2 always), auto (asks only for tier 2)")
        made.add_argument("mode", nargs="?", choices=MODES)
        return made

    def _mode(self, args: argparse.Namespace, cell: str | None) -> str:
        betty = self.connection
        if args.mode:
            betty.set_mode(args.mode)
        return betty.mode

    def _policy(self, args: argparse.Namespace, cell: str | None) -> None:
        answer = self.connection.backend.policy(usage=True)
        print(f"site policy: {answer.get('source') or 'none: Betty defaults'}")
        rows = [(str(row["field"]), str(row["value"]), str(row["origin"])) for row in answer.get("fields", [])]
        width = max((len(field) for field, _, _ in rows), default=0)
        for field, value, origin in rows:
            print(f"  {field:<{width}}  {value}    [{origin}]")

    def _approvals(self, args: argparse.Namespace, cell: str | None) -> Any:
        from ..widgets.plan import card_for  # lazy: ipywidgets; `%load_ext` never needs it

        betty = self.connection
        pending = betty.backend.pending()
        if not pending:
            print("Nothing waits for your approval.")
            return []
        cards = [card_for(request, betty.respond, answered_by=betty.backend.person, check=betty.repreview)
                 for request in pending]
        for card in cards:  # each in its own output, which keeps its record once answered
            display(card)
        return cards

    @staticmethod
    def _log_parser() -> MagicParser:
        made = parser("log", "the actions of this notebook's Betty (from the action log), newest last")
        made.add_argument("--limit", type=int, default=50, metavar="N", help="how many (default 50)")
        made.add_argument("--all", action="store_true", help="every session's actions, not only this notebook's")
        return made

    def _log(self, args: argparse.Namespace, cell: str | None) -> "pd.DataFrame":
        import pandas as pd  # lazy: pandas is heavy; `%load_ext` never needs it

        betty = self.connection
        session = None if args.all else betty.session_id()
        records = betty.backend.actions(session, max(1, args.limit))
        rows = [{"time": pd.Timestamp(r.ts, unit="s"), "tool": r.tool, "tier": r.tier, "decision": r.decision.value,
                 "approver": r.approver, "ok": r.ok, "summary": (r.summary.splitlines() or [""])[0][:120],
                 "session": r.session_id} for r in records]
        return pd.DataFrame(rows, columns=["time", "tool", "tier", "decision", "approver", "ok", "summary", "session"])
