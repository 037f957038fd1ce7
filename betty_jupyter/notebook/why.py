"""``%betty why JOBID``'s answer: the explanation of a pending job as escaped HTML, and as text."""

from __future__ import annotations

from typing import Any, Mapping

from ..safe_text import html_text, terminal_line


class WhyPendingView:
    """The data of ``cluster_why`` (``WhyPending.as_dict()``), shown as HTML in a notebook; ``data`` keeps it all."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = dict(data)

    def _repr_html_(self) -> str:
        """The headline in bold, each further line an item; every word from Slurm escaped."""
        lines = [str(line) for line in self.data.get("lines", [])]
        if not lines:
            return "<div class='betty-why'>(no explanation)</div>"
        items = "".join(f"<li>{html_text(line)}</li>" for line in lines[1:])
        return (f"<div class='betty-why'><p><b>{html_text(lines[0])}</b></p>"
                f"{f'<ul>{items}</ul>' if items else ''}</div>")

    def __repr__(self) -> str:
        return "\n".join(terminal_line(line) for line in self.data.get("lines", []))
