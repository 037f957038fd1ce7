"""``%betty why JOBID``'s answer: the explanation of a pending job as escaped HTML, and as text; where
``sbatch --test-only`` says it starts sooner elsewhere and Betty recorded its script, a button that opens the
resubmission's card there (:func:`move_offer`)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

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


def move_offer(data: Mapping[str, Any], open_card: Callable[[], Any]) -> Any:
    """A button "Resubmit with --gres=gpu:h100:2…" under the explanation; a click shows ``open_card()`` (the
    ``cluster_submit`` card of the moved script, which the person approves or denies) below it, once."""
    import ipywidgets as widgets  # lazy: only a move offered needs them

    sooner = data.get("sooner") or {}
    change = terminal_line(str(sooner.get("change", "")))
    button = widgets.Button(description=f"Resubmit with {change}…", layout=widgets.Layout(width="auto"),
                            tooltip=f"a card to approve: job {data.get('job_id')}'s recorded script with only this "
                                    "change; the job stays queued until you cancel it")
    button.add_class("betty-why-move")
    box = widgets.VBox([button])

    def clicked(_: Any) -> None:
        button.disabled = True
        box.children = [button, open_card()]

    button.on_click(clicked)
    return box
