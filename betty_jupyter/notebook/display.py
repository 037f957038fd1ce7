"""How Betty's results show in a notebook, while ``_`` keeps the plain object.

A magic returns the object a researcher computes with (a DataFrame, a Job, an Estimate, a
pending call); IPython then shows it through the formatters registered here: a job table,
a live job, the GPU breakdown chart (and a traced step's timeline), an approval card.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from IPython.display import display

from ..safe_text import visible
from .charts import chart_image
from .session import Call

if TYPE_CHECKING:
    import ipywidgets as widgets
    from IPython.core.interactiveshell import InteractiveShell

    from ..gpu.trace import TracedEstimate

T = TypeVar("T")
_views: dict[int, "widgets.Widget"] = {}
_lock = threading.Lock()


def shown_as(value: T, view: "widgets.Widget") -> T:
    """Show ``value`` as ``view`` the next time IPython displays it (the magic's own result)."""
    with _lock:
        _views[id(value)] = view
    return value


def _take(value: Any) -> "widgets.Widget | None":
    with _lock:
        return _views.pop(id(value), None)


def job_frame(frame: Any, view: "Callable[[Any], widgets.Widget]") -> Any:
    """``frame`` as a DataFrame that shows as the widget ``view`` makes of it (operations on it give plain
    DataFrames). The widget is made the first time the frame is shown, and shown again after: a result kept in
    a variable and never shown loads no widgets."""
    made: list["widgets.Widget"] = []
    lock = threading.Lock()

    def show() -> None:
        with lock:
            if not made:
                made.append(view(shown))
        display(made[0])

    shown = _frame_shown(frame, show)
    return shown


def table_frame(frame: Any, columns: list[str]) -> Any:
    """``frame`` as a DataFrame that shows as a static table of ``columns``, in units a person reads."""
    from ..cluster.tables import text_table  # lazy: pandas is heavy; `%load_ext` never needs it
    from .widgets.jobs import styled_html  # lazy: ipywidgets; `%load_ext` never needs it

    shown = {"text/html": styled_html(frame, columns, None, True), "text/plain": text_table(frame, columns)}
    return _frame_shown(frame, lambda: display(shown, raw=True))


def efficiency_frame(data: dict[str, Any]) -> Any:
    """``cluster_efficiency``'s data as a DataFrame of the figures, shown as the table, the right-sizing when
    there is one, and the picture (``%betty efficiency``)."""
    import pandas as pd  # lazy: pandas is heavy; `%load_ext` never needs it
    from IPython.display import HTML  # lazy: only a shown efficiency needs it

    # lazy: the advisor and matplotlib; only `%betty efficiency` draws
    from ..cluster.job_efficiency import EFFICIENCY_COLUMNS, JobEfficiency, shown_row
    from ..advisor.efficiency_plot import efficiency_figure
    from ..safe_text import html_text

    jobs = [JobEfficiency.from_dict(item) for item in data.get("jobs", [])]
    rows = "".join("<tr>" + "".join(f"<td>{html_text(cell)}</td>" for cell in shown_row(job).values()) + "</tr>"
                   for job in jobs)
    head = "".join(f"<th>{html_text(column)}</th>" for column in EFFICIENCY_COLUMNS)
    sizing = data.get("right_sizing")
    note = f"<p><b>Right-sizing:</b> {html_text(sizing['line'])}</p>" if sizing else ""
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{note}"

    def show() -> None:
        display(HTML(table))
        display(chart_image(lambda: efficiency_figure(jobs)))

    return _frame_shown(pd.DataFrame(data.get("jobs", [])), show)


def _frame_shown(frame: Any, show: Callable[[], None]) -> Any:
    import pandas as pd  # lazy: pandas is heavy; `%load_ext` never needs it

    class ShownFrame(pd.DataFrame):
        """A DataFrame shown the Betty way."""

        _metadata = ["betty_show"]
        betty_show: Callable[[], None]

        @property
        def _constructor(self) -> Callable[..., pd.DataFrame]:
            return pd.DataFrame

        def _ipython_display_(self) -> None:
            self.betty_show()

    result = ShownFrame(frame)
    result.betty_show = show
    return result


def register(shell: "InteractiveShell") -> None:
    """Show Jobs, Estimates and pending calls the Betty way in ``shell``."""
    formatter = shell.display_formatter.ipython_display_formatter  # type: ignore[union-attr]
    for (module, name), show in SHOWN_BY_NAME.items():
        formatter.for_type_by_name(module, name, show)
    formatter.for_type(Call, _show_call)


def _show_job(job: Any) -> None:
    from .widgets.live import LiveJob  # lazy: ipywidgets; `%load_ext` never needs it

    view = _take(job)
    display(view if view is not None else LiveJob(job, None, None))


def _show_estimate(result: Any) -> None:
    from .widgets.gpu import EstimateView  # lazy: ipywidgets; `%load_ext` never needs them

    view = _take(result)
    display(view if view is not None else EstimateView(result))


def _show_call(call: Any) -> None:
    view = _take(call)
    if view is not None:
        display(view)
    else:
        print(repr(call))


def _show_traced(traced: "TracedEstimate") -> None:
    """The view ``%betty gpu --trace`` gave it; shown again later, its peak and where it happens in one line."""
    view = _take(traced)
    if view is not None:
        display(view)
    else:
        print(visible(f"{traced.model}: {traced.peak_gib:.2f} GiB per GPU traced, the peak in {traced.where}"))


SHOWN_BY_NAME: dict[tuple[str, str], Callable[[Any], None]] = {
    ("betty_jupyter.cluster.jobs", "Job"): _show_job,
    ("betty_jupyter.gpu.estimate", "Estimate"): _show_estimate,
    ("betty_jupyter.gpu.trace.result", "TracedEstimate"): _show_traced,
}
"""The types shown the Betty way, by module and name: registering them imports neither the GPU estimate nor the job
model (a first ``%betty squeue`` needs neither); IPython finds the type when it first shows one."""
