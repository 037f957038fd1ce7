"""A row of widgets that wraps onto the next line where the notebook is narrow (about 300 px beside the file
browser and Betty's panel), so no button or label is cut to an ellipsis and no row spills sideways."""

from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets

WHOLE_ROW = "calc(100% - 2 * var(--jp-widgets-margin, 2px))"
"""The widest a widget in a row may be: the row, less the margin ipywidgets puts on either side of it."""


def wrapping_row(children: Sequence[widgets.Widget]) -> widgets.HBox:
    """``children`` side by side while they fit, the rest on the next line; each keeps its whole width, up to the
    row's own (a dropdown of long job names narrows to it rather than spill)."""
    for child in children:
        if isinstance(child, widgets.DOMWidget) and child.layout.max_width is None:
            child.layout.max_width = WHOLE_ROW
    return widgets.HBox(list(children), layout=widgets.Layout(flex_flow="row wrap", align_items="center",
                                                                   grid_gap="2px 4px", max_width="100%"))
