"""A row of widgets that wraps onto the next line where the notebook is narrow (about 300 px beside the file
browser and Betty's panel), so no button or label is cut to an ellipsis."""

from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets


def wrapping_row(children: Sequence[widgets.Widget]) -> widgets.HBox:
    """``children`` side by side while they fit, the rest on the next line; each keeps its whole width."""
    return widgets.HBox(list(children), layout=widgets.Layout(flex_flow="row wrap", align_items="center",
                                                                   grid_gap="2px 4px"))
