"""What a notebook file keeps of Betty's widgets: their static record, never a view of a kernel's widget.

Every widget Betty shows publishes, beside its live view, a record (text/html in a ``betty-record``
element, and text/plain). JupyterLab prefers the view to the record, and a view names a widget
that lives only in its kernel: once that kernel is gone (a restart of the kernel or of the Jupyter
server) the output reads "Error displaying widget: model not found". So the server saves a
notebook without the views of Betty's widgets (:func:`keep_records`, a pre-save hook of the
contents manager): the open notebook keeps its live widgets, and the file — what any later
JupyterLab opens — shows each one's record. Other widgets are left as they are.
"""

from __future__ import annotations

from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
"""The output type that names a kernel's widget: shown by the widget manager, or as an error once the kernel is gone."""
RECORD_START = "<div class='betty-record'>"
"""How the HTML of a Betty widget's record starts."""


def is_record(data: Any) -> bool:
    """Whether an output's ``data`` holds a Betty widget's record."""
    if not isinstance(data, dict):
        return False
    html = data.get("text/html", "")
    if isinstance(html, list):  # nbformat may keep multi-line strings as lists of lines
        html = "".join(str(line) for line in html[:1])
    return isinstance(html, str) and html.startswith(RECORD_START)


def without_views(notebook: Any) -> int:
    """Drop the widget view from every output of ``notebook`` (nbformat 4 JSON) that holds a Betty record; how many."""
    dropped = 0
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    for cell in cells if isinstance(cells, list) else ():
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else ():
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and WIDGET_VIEW in data and is_record(data):
                del data[WIDGET_VIEW]
                dropped += 1
    return dropped


def keep_records(model: dict[str, Any], **_: Any) -> None:
    """The contents manager's pre-save hook: a notebook is saved with its Betty widgets' records, not their views."""
    if model.get("type") == "notebook":
        without_views(model.get("content"))
