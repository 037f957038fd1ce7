"""The one budget of what a model or another agent is handed of a tool's answer, on every face.

Betty's own model, an MCP client (over stdio or streamable HTTP) and a REST caller that acts as an
agent all receive the same text (:func:`~betty_jupyter.agent.condense.condense`), and that text holds to
this budget whatever the cluster answers:

- at most :data:`ANSWER_CHARS` characters (about :data:`ANSWER_CHARS` / 4 tokens, well under the
  1,048,576 bytes an MCP client takes in one server-sent event);
- a table says how many rows and jobs it has in all, and counts them by state, partition and user;
- then at most :data:`ANSWER_ROWS` rows: the asking person's own jobs first, the newest first, from
  the ``offset`` the call asked for;
- and a last line saying how to ask for the rest: the next ``offset``, and the filters the tool takes.

The action log keeps that same bounded answer for a table (a 20,000-job queue is not copied into it);
the side panel and a notebook get the tool's data itself, which they show in pages of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

ANSWER_CHARS = 6000
"""The most characters a model or another agent is handed of one tool's answer."""
ANSWER_ROWS = 40
"""The most table rows a model or another agent is handed of one tool's answer."""


@dataclass(frozen=True)
class Paging:
    """Where a table answer starts and how its caller narrows it: ``offset`` rows of the ordered table are skipped
    (the person's own first, the newest first), ``narrow`` names the tool's filters (``states, partition or user``)."""

    offset: int = 0
    narrow: str = ""

    def more(self, shown: int, total: int, what: str = "rows") -> str:
        """The line that ends a cut table: which rows were shown of how many, and how to ask for the others."""
        if total == 0:
            return ""
        first, last = min(self.offset + 1, total), min(self.offset + shown, total)
        line = f"[{what} {first}–{last} of {total} shown" if shown else f"[none of the {total} {what} shown"
        if last < total:
            line += f"; call again with offset={last} for the next ones"
        if self.narrow and (last < total or self.offset):
            line += f", or narrow with {self.narrow}"
        return line + "]"


def job_order(ident: object) -> tuple[int, ...]:
    """A job id as a sort key: by its number, then its array task (``123_4``, ``123_[5-9]``)."""
    return tuple(int(part) if part.isdigit() else -1 for part in str(ident).replace("[", "_").split("_")[:2])
