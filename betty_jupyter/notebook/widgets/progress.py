"""A progress line for anything that takes more than a second."""

from __future__ import annotations

import uuid
from typing import Callable

import ipywidgets as widgets
from IPython.display import display, update_display

from ...safe_text import html_text
from .record import WIDGET_VIEW


def waiting(label: str) -> Callable[[], Callable[[], None]]:
    """A function that shows ``⏳ label…`` in the cell and returns the function that removes it."""

    def show() -> Callable[[], None]:
        line = widgets.HTML(f"<i class='betty-progress'>⏳ {html_text(label)}…</i>")
        output = f"betty-progress-{uuid.uuid4().hex}"
        # Only the widget view, no text, and nothing once removed: a saved notebook keeps nothing of a line
        # that came and went.
        display({WIDGET_VIEW: line._repr_mimebundle_()[WIDGET_VIEW]}, raw=True, display_id=output)

        def remove() -> None:
            update_display({}, raw=True, display_id=output)
            line.close()

        return remove

    return show
