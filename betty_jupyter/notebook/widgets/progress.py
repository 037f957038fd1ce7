"""A progress line for anything that takes more than a second."""

from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
from IPython.display import display

from ...safe_text import html_text

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def waiting(label: str) -> Callable[[], Callable[[], None]]:
    """A function that shows ``⏳ label…`` in the cell and returns the function that removes it."""

    def show() -> Callable[[], None]:
        line = widgets.HTML(f"<i class='betty-progress'>⏳ {html_text(label)}…</i>")
        # Only the widget view, no text: a saved notebook keeps nothing of a line that came and went.
        view = {key: value for key, value in line._repr_mimebundle_().items() if key == WIDGET_VIEW}
        display(view, raw=True)
        return lambda: line.close()

    return show
