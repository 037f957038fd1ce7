"""A progress line for anything that takes more than a second."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Callable, Iterator

from IPython.display import display, update_display

from ...safe_text import html_text
from ...saved_records import WIDGET_VIEW


def waiting(label: str) -> Callable[[], Callable[[], None]]:
    """A function that shows ``⏳ label…`` in the cell and returns the function that removes it."""

    def show() -> Callable[[], None]:
        return _progress_line(label)[1]

    return show


@contextmanager
def stages(label: str) -> Iterator[Callable[[str], None]]:
    """``⏳ label…`` in the cell while the block runs; the function it yields shows the stage reached
    (``⏳ label: building the model…``). The line is gone once the block ends."""
    tell, remove = _progress_line(label)
    try:
        yield tell
    finally:
        remove()


def _progress_line(label: str) -> tuple[Callable[[str], None], Callable[[], None]]:
    """Show ``⏳ label…``; (the function that shows a stage after the label, the function that removes the line)."""
    import ipywidgets as widgets  # lazy: a call done within a second shows no line, and loads no widgets

    line = widgets.HTML(_line_html(label))
    output = f"betty-progress-{uuid.uuid4().hex}"
    # Only the widget view, no text, and nothing once removed: a saved notebook keeps nothing of a line
    # that came and went.
    display({WIDGET_VIEW: line._repr_mimebundle_()[WIDGET_VIEW]}, raw=True, display_id=output)

    def tell(stage: str) -> None:
        line.value = _line_html(f"{label}: {stage}")

    def remove() -> None:
        update_display({}, raw=True, display_id=output)
        line.close()

    return tell, remove


def _line_html(text: str) -> str:
    return f"<i class='betty-progress'>⏳ {html_text(text)}…</i>"
