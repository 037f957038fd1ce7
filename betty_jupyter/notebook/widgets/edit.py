"""The edit form of a notebook approval card: a submission as its script with resource fields, any other call as
one field per argument; every change is checked by the same code as the model's call and previewed again, and
"Approve edited" waits for that preview.

The fields and the script's ``#SBATCH`` lines stay in step both ways: a field rewrites its line
(:meth:`SbatchScript.with_options`), and editing the script updates the fields.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Mapping

import ipywidgets as widgets

from ...agent.card_words import label
from ...cluster.sbatch import SbatchScript
from ...errors import BettyError
from ...safe_text import html_text

if TYPE_CHECKING:
    from ...agent.events import ApprovalRequest
    from ...agent.models import Preview

Check = Callable[[str, "Mapping[str, Any]"], "Preview"]
"""Check a person's edit of card ``approval_id``: its new preview, or a BettyError with the one-line reason."""

RESOURCES = (("partition", "Partition"), ("time", "Time"), ("mem", "Memory"), ("gpus", "GPUs"))
_SHOWN_FIRST = ("script", "goal", "name")
"""A submission's arguments shown unfolded; the others are under "Other arguments"."""
"""The resource fields of a submission's edit: (key, label)."""

_GPU_OPTIONS = ("gres", "gpus_per_node", "gpus")
_RED = "var(--jp-error-color1)"


def resources_of(text: str) -> dict[str, str]:
    """What the script's ``#SBATCH`` lines ask for ('' where they say nothing); ScriptError if sbatch would refuse it."""
    script = SbatchScript.parse(text)
    gpus = script.gpu_request()
    return {"partition": script.get("partition") or "", "time": script.get("time") or "",
            "mem": script.get("mem") or "", "gpus": str(gpus[1]) if gpus else ""}


def with_resource(text: str, key: str, value: str) -> str:
    """The script with one resource set ('' or GPUs '0' removes its line); every other byte stays as it was."""
    script = SbatchScript.parse(text)
    value = value.strip()
    if key != "gpus":
        return script.with_options(**{key: value or None}).render()
    count = None if value in ("", "0") else value
    option = next((name for name in _GPU_OPTIONS if script.get(name) is not None), "gres")
    kind = (script.gpu_request() or (None, 0))[0]
    if option == "gres" and count is not None:
        written = f"gpu:{kind}:{count}" if kind else f"gpu:{count}"
    elif option == "gpus" and count is not None and kind:
        written = f"{kind}:{count}"
    else:
        written = count  # type: ignore[assignment]  # None removes the line
    return script.with_options(**{option: written}).render()


#: The submission's argument numbering its script's lines as the person saw them (2 under a cell magic).
SCRIPT_FIRST_LINE = "first_line"


def edited_arguments(original: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, Any]:
    """The arguments from the form's texts (a string stays a string, anything else is JSON, '' is null).

    BettyError naming the argument that is not JSON.
    """
    args: dict[str, Any] = {}
    for name, text in texts.items():
        if isinstance(original.get(name), str):
            args[name] = text
        elif not text.strip():
            args[name] = None
        else:
            try:
                args[name] = json.loads(text)
            except ValueError as error:
                raise BettyError(f"{name}: not a JSON value ({error}); write a number, true/false, \"text\", "
                                 "[..] or {..}") from None
    return args


class EditForm(widgets.VBox):
    """The fields of one card's edit, its check and its preview; ``approve`` is enabled once this edit is checked."""

    def __init__(self, request: "ApprovalRequest", check: Check, render: Callable[["Preview"], str]) -> None:
        """``render`` draws a preview as HTML, as the card draws the model's."""
        self.request, self._check, self._render = request, check, render
        self._syncing = False
        self.fields: dict[str, widgets.Textarea] = {}
        self.resources: dict[str, widgets.Text | widgets.Dropdown] = {}
        rows: list[widgets.Widget] = []
        others: list[widgets.Widget] = []
        self.script_edit = request.tool == "cluster_submit" and isinstance(request.args.get("script"), str)
        if self.script_edit:
            rows.append(self._resource_row())
        for name, value in request.args.items():
            if self.script_edit and name == SCRIPT_FIRST_LINE:
                continue
            text = value if isinstance(value, str) else "" if value is None else json.dumps(value, indent=1)
            field = widgets.Textarea(value=text, continuous_update=False,
                                     layout=widgets.Layout(width="100%", height=_height(text, name == "script")))
            field.add_class(f"betty-edit-arg-{name}")
            if name == "script" or not isinstance(value, str):
                field.add_class("betty-edit-code")  # a script or JSON: the editor's monospace font (the stylesheet)
            field.observe(lambda change, n=name: self._changed(n), names="value")
            self.fields[name] = field
            kind = "" if isinstance(value, str) else " (JSON)"
            labelled = widgets.VBox([widgets.HTML(f"<b>{html_text(label(name))}</b>{html_text(kind)}"), field],
                                    layout=widgets.Layout(width="100%"))
            (rows if not self.script_edit or name in _SHOWN_FIRST else others).append(labelled)
        if others:  # a submission's other arguments (record, a GPU estimate…) folded, as in the side panel
            folded = widgets.Accordion([widgets.VBox(others)], selected_index=None)
            folded.set_title(0, "Other arguments")
            rows.append(folded)
        self.status = widgets.HTML("")
        self.status.add_class("betty-edit-status")
        self.preview = widgets.HTML("")
        self.preview.add_class("betty-edit-preview")
        self.approve = widgets.Button(description="Approve edited", button_style="warning", disabled=True,
                                      layout=widgets.Layout(width="auto"))
        self.approve.add_class("betty-send-edit")
        self.cancel = widgets.Button(description="Cancel", layout=widgets.Layout(width="auto"),
                                     tooltip="Close the form; the card waits for your answer as it was")
        self.cancel.add_class("betty-edit-cancel")
        self.checked: dict[str, Any] | None = None
        super().__init__([*rows, self.status, self.preview, widgets.HBox([self.approve, self.cancel])])
        self.recheck()

    def _resource_row(self) -> widgets.HBox:
        values = _resources_or_blank(self.request.args["script"])
        partitions = self.request.preview.details.get("partitions")
        for key, label in RESOURCES:
            field: widgets.Text | widgets.Dropdown
            if key == "partition" and isinstance(partitions, list) and partitions:
                field = widgets.Dropdown(options=[("(default)", ""), *((str(p), str(p)) for p in partitions)],
                                         description=label, layout=widgets.Layout(width="auto"),
                                         style={"description_width": "initial"})
                _show(field, values[key])
            else:
                field = widgets.Text(value=values[key], description=label, continuous_update=False,
                                     layout=widgets.Layout(width="auto"),
                                     style={"description_width": "initial"})
            field.add_class(f"betty-edit-{key}")
            field.observe(lambda change, k=key: self._resource_changed(k), names="value")
            self.resources[key] = field
        return widgets.HBox(list(self.resources.values()), layout=widgets.Layout(flex_flow="row wrap"))

    def _resource_changed(self, key: str) -> None:
        if self._syncing:
            return
        script = self.fields["script"]
        try:
            rewritten = with_resource(script.value, key, self.resources[key].value)
        except BettyError as error:
            self._refused(str(error))
            return
        self._syncing = True
        try:
            script.value = rewritten
        finally:
            self._syncing = False
        self.recheck()

    def _changed(self, name: str) -> None:
        if self._syncing:
            return
        if name == "script" and self.script_edit:
            values = _resources_or_blank(self.fields["script"].value)
            self._syncing = True
            try:
                for key, field in self.resources.items():
                    _show(field, values[key])
            finally:
                self._syncing = False
        self.recheck()

    def args(self) -> dict[str, Any]:
        """The edited arguments as the fields say now; BettyError naming a field that is not JSON.

        An edited script's lines are numbered as the form shows them, from 1, whatever cell it came from.
        """
        args = edited_arguments(self.request.args, {name: field.value for name, field in self.fields.items()})
        if self.script_edit and SCRIPT_FIRST_LINE in self.request.args:
            args[SCRIPT_FIRST_LINE] = 1
        return args

    def recheck(self) -> None:
        """Check the edit as it is now (the same code as the model's call); Approve edited only when it passed."""
        self.approve.disabled, self.checked = True, None
        try:
            args = self.args()
            preview = self._check(self.request.approval_id, args)
        except BettyError as error:
            self._refused(str(error))
            return
        self.checked = args
        self.status.value = ("<span class='betty-edit-ready' style='color:var(--jp-success-color1)'>Checked: this is what will run "
                             "if you approve.</span>")
        self.preview.value = self._render(preview)
        self.approve.disabled = False

    def _refused(self, reason: str) -> None:
        self.approve.disabled, self.checked = True, None
        self.status.value = f"<span class='betty-edit-refused' style='color:{_RED}'>{html_text(reason)}</span>"
        self.preview.value = ""


def _show(field: "widgets.Text | widgets.Dropdown", value: str) -> None:
    """Show ``value`` in a resource field; a partition the choices lack (one typed in the script) becomes one."""
    if isinstance(field, widgets.Dropdown) and value not in [choice for _, choice in field.options]:
        field.options = [*field.options, (value, value)]
    field.value = value


def _resources_or_blank(text: str) -> dict[str, str]:
    try:
        return resources_of(text)
    except BettyError:
        return {key: "" for key, _ in RESOURCES}


def _height(text: str, script: bool) -> str:
    lines = text.count("\n") + 1
    return f"{min(24, max(12 if script else 2, lines + 1)) * 1.4:.1f}em"
