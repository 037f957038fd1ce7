"""A real IPython kernel driven as JupyterLab drives it: cells, outputs, and widgets through their comms.

Widgets are followed from the messages the kernel sends (``comm_open`` with their state,
``comm_msg`` updates); a test clicks a button or changes a value by sending the same comm
messages the browser's widget manager sends. Outputs are kept as JupyterLab keeps them: an
``update_display_data`` replaces every output shown with its display id, whenever it comes,
and :meth:`Kernel.save` writes the cells run so far as the notebook JupyterLab would save.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from jupyter_client.manager import KernelManager

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass
class Cell:
    """What one cell showed."""

    result: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    errors: list[str] = field(default_factory=list)
    displays: list[dict[str, Any]] = field(default_factory=list)
    status: str = ""
    prompts: list[str] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    """Each rich output (``display_data``, ``execute_result``) as it stands now, display updates applied."""
    code: str = ""

    @property
    def text(self) -> str:
        """The plain text of the result (empty when there is none)."""
        return "".join(item.get("text/plain", "") for item in self.result)

    @property
    def plain(self) -> str:
        """The plain text of everything the cell showed (displays and result)."""
        return "".join(item.get("text/plain", "") for item in [*self.displays, *self.result])

    @property
    def widgets(self) -> list[str]:
        """Model ids of the widgets shown (displayed or as the result)."""
        return [d[WIDGET_VIEW]["model_id"] for d in [*self.displays, *self.result] if WIDGET_VIEW in d]


class Kernel:
    """One kernel with its working directory and environment."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(cwd=str(cwd), env=env)
        self.client = self.manager.blocking_client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.models: dict[str, dict[str, Any]] = {}
        self.closed: set[str] = set()
        self.updates: list[tuple[str, dict[str, Any]]] = []
        """Every state update a widget sent, in order (a progress line's stages, gone from its last state)."""
        self.cells: list[Cell] = []
        self._displayed: dict[str, list[dict[str, Any]]] = {}

    def close(self) -> None:
        """Stop the kernel."""
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    # ----- cells ----------------------------------------------------------------------------------
    def run(self, code: str, timeout: float = 180, answer: Callable[[str, bool], str] | None = None) -> Cell:
        """Run ``code`` and collect its outputs until the kernel is idle again.

        ``answer(prompt, password)`` types into each input box the cell opens (``input``, ``getpass``),
        as a person would; the prompts land in :attr:`Cell.prompts`.
        """
        msg_id = self.client.execute(code, allow_stdin=answer is not None)
        cell = Cell(code=code)
        self.cells.append(cell)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the cell did not finish in {timeout} s: {code[:80]!r}")
            if answer is not None and self.client.stdin_channel.msg_ready():
                request = self.client.get_stdin_msg(timeout=1)["content"]
                cell.prompts.append(request["prompt"])
                self.client.input(answer(request["prompt"], request["password"]))
            try:
                message = self.client.get_iopub_msg(timeout=min(left, 0.1 if answer else 1.0))
            except queue.Empty:
                continue
            self._handle(message)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "execute_result":
                cell.result.append(content["data"])
                cell.outputs.append({"output_type": kind, "data": content["data"], "metadata": content["metadata"],
                                     "execution_count": content["execution_count"]})
            elif kind == "display_data":
                cell.displays.append(content["data"])
                output = {"output_type": kind, "data": content["data"], "metadata": content["metadata"]}
                cell.outputs.append(output)
                display_id = content.get("transient", {}).get("display_id")
                if display_id:
                    self._displayed.setdefault(display_id, []).append(output)
            elif kind == "stream":
                setattr(cell, content["name"], getattr(cell, content["name"]) + content["text"])
            elif kind == "error":
                cell.errors.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                break
        reply = self.client.get_shell_msg(timeout=30)
        cell.status = reply["content"]["status"]
        return cell

    # ----- widgets --------------------------------------------------------------------------------
    def _handle(self, message: dict[str, Any]) -> None:
        kind, content = message["msg_type"], message["content"]
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.models[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg" and content["comm_id"] in self.models:
            data = content["data"]
            if data.get("method") in ("update", "echo_update"):
                self.models[content["comm_id"]].update(data.get("state", {}))
                self.updates.append((content["comm_id"], dict(data.get("state", {}))))
        elif kind == "comm_close":
            self.closed.add(content["comm_id"])
        elif kind == "update_display_data":
            for output in self._displayed.get(content.get("transient", {}).get("display_id", ""), []):
                output.update(data=content["data"], metadata=content["metadata"])

    def save(self, path: Path) -> None:
        """The cells run so far, with their outputs as they stand now, written as a notebook (nbformat 4)."""
        import nbformat  # lazy: only a test that saves the notebook needs it

        book = nbformat.v4.new_notebook()
        for count, cell in enumerate(self.cells, start=1):
            outputs = [nbformat.v4.new_output(**{**output, "data": dict(output["data"])}) for output in cell.outputs]
            book.cells.append(nbformat.v4.new_code_cell(cell.code, execution_count=count, outputs=outputs))
        nbformat.validate(book)
        nbformat.write(book, str(path))

    def pump(self, seconds: float = 0.2) -> None:
        """Take in the messages the kernel sent meanwhile (from its background threads)."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            try:
                self._handle(self.client.get_iopub_msg(timeout=max(left, 0.01)))
            except queue.Empty:
                if left <= 0:
                    return

    def wait_for(self, check: Callable[[], Any], timeout: float = 60, what: str = "the widget") -> Any:
        """Pump messages until ``check()`` is truthy; its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            self.pump(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def descendants(self, model_id: str) -> list[str]:
        """``model_id`` and every widget inside it (children, in order)."""
        found = [model_id]
        state = self.models.get(model_id, {})
        for child in state.get("children", []):
            found += self.descendants(str(child).removeprefix("IPY_MODEL_"))
        return found

    def find(self, root: str, css_class: str) -> list[str]:
        """Widgets under ``root`` carrying ``css_class`` (set with ``add_class``)."""
        return [m for m in self.descendants(root) if css_class in self.models.get(m, {}).get("_dom_classes", [])
                and m not in self.closed]

    def texts(self, root: str) -> str:
        """The HTML values and descriptions of everything under ``root``, joined (what a person reads)."""
        parts = []
        for model in self.descendants(root):
            state = self.models.get(model, {})
            parts += [str(state.get("value", "")) if isinstance(state.get("value"), str) else "",
                      str(state.get("description", ""))]
        return "\n".join(p for p in parts if p)

    def click(self, model_id: str) -> None:
        """Click a button, as the browser's widget manager does."""
        self._send(model_id, {"method": "custom", "content": {"event": "click"}})

    def set_value(self, model_id: str, **state: Any) -> None:
        """Change a widget's state from the front-end (a dropdown, a text area)."""
        self._send(model_id, {"method": "update", "state": state, "buffer_paths": []})
        self.models[model_id].update(state)

    def _send(self, model_id: str, data: dict[str, Any]) -> None:
        message = self.client.session.msg("comm_msg", {"comm_id": model_id, "data": data})
        self.client.shell_channel.send(message)
