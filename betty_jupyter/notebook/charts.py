"""Betty's pictures in a notebook: drawn on a transparent background in a grey that reads on JupyterLab's light
and dark themes alike, so a chart never shows as a white box in the dark theme and the saved notebook reads the
same wherever it is opened.

matplotlib is imported on use only: the first picture a notebook asks for.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Callable, cast

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NEUTRAL = "#808080"
"""Text, axes, ticks and reference lines: mid grey, readable on white and on JupyterLab's dark background."""

THEME_NEUTRAL: dict[str, Any] = {
    "text.color": NEUTRAL, "axes.labelcolor": NEUTRAL, "axes.edgecolor": NEUTRAL, "axes.titlecolor": NEUTRAL,
    "xtick.color": NEUTRAL, "ytick.color": NEUTRAL, "xtick.labelcolor": NEUTRAL, "ytick.labelcolor": NEUTRAL,
    "grid.color": NEUTRAL, "figure.facecolor": "none", "axes.facecolor": "none", "savefig.facecolor": "none",
    "savefig.transparent": True, "legend.facecolor": "none", "legend.edgecolor": NEUTRAL, "legend.framealpha": 0,
}
"""The matplotlib settings every notebook picture is drawn with."""


def chart_png(draw: Callable[[], "Figure"], **savefig: Any) -> bytes:
    """The figure ``draw`` builds, as PNG bytes on a transparent background, in theme-neutral colours (Agg,
    whatever matplotlib backend the kernel has)."""
    from matplotlib import rc_context  # lazy: matplotlib is heavy; only a shown picture needs it

    picture = io.BytesIO()
    with rc_context(cast(Any, THEME_NEUTRAL)):
        draw().savefig(picture, format="png", **savefig)
    return picture.getvalue()


def chart_image(draw: Callable[[], "Figure"], **savefig: Any) -> Any:
    """:func:`chart_png` as an IPython image to display."""
    from IPython.display import Image  # lazy: only a shown picture needs it

    return Image(data=chart_png(draw, **savefig), format="png")
