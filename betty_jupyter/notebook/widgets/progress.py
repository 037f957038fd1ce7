"""A progress line for anything that takes more than a second."""

from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
from IPython.display import display

from .html import escaped


def waiting(label: str) -> Callable[[], Callable[[], None]]:
    """A function that shows ``⏳ label…`` in the cell and returns the function that removes it."""

    def show() -> Callable[[], None]:
        line = widgets.HTML(f"<i class='betty-progress'>⏳ {escaped(label)}…</i>")
        display(line)
        return lambda: line.close()

    return show
