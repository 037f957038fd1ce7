"""``%betty kernel``: the notebook's next cells run in a kernel inside an allocation on a compute node.

The magic stages a connection file with a fresh key (:func:`~..compute.node_kernel.stage`) and
asks for ``node_kernel`` (tier 2: its card shows the batch script and what it asks for). Once the
job is submitted a thread follows it with ``node_kernel_status`` until the kernel listens, then
attaches a ``jupyter_client`` client to it (:func:`~..compute.node_kernel.attach`: through port
forwards over SSH, directly with the local transport). From then on each cell of this notebook
that is not a ``%betty`` command runs on the node: this kernel hands its code over and shows what
the node's kernel printed, displayed or raised. ``%betty kernel --back`` runs cells here again
(the node's kernel keeps its state until it is stopped); ``%betty kernel --stop``, or this
kernel shutting down, cancels the allocation.
"""

from __future__ import annotations

import atexit
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..compute.node_kernel import AttachedKernel, Ready, attach, connection
from ..errors import BettyError, UsageError

if TYPE_CHECKING:
    from ..transport.interface import Transport
    from .session import Call

POLL_SECONDS = 2.0
"""How often the allocation is looked at while its kernel is not listening yet."""
_ACTIVE: "NodeKernelHandle | None" = None
_LATEST: "NodeKernelHandle | None" = None


class NodeKernelHandle:
    """``_`` of ``%betty kernel``: ``.status``, ``.back()``, ``.here()``, ``.stop()``."""

    def __init__(self, call: "Call", token: str, state: Path, poll: Callable[[str, str], dict[str, Any]],
                 stop: Callable[[str, str], Any], transport: Callable[[], "Transport"], shell: Any, view: Any,
                 every: float = POLL_SECONDS) -> None:
        """``poll``/``stop``: ``node_kernel_status``/``node_kernel_stop`` of ``(token, job id)``; ``transport``: the
        cluster's transport the forwards go through."""
        self.call, self.token, self._state, self._poll, self._stop_job = call, token, state, poll, stop
        self._transport, self._shell, self._view, self._every = transport, shell, view, every
        self.job_id: str | None = None
        self.line = "waiting for approval"
        self.kernel: AttachedKernel | None = None
        self._opened: "Transport | None" = None
        self.on_node = False
        self._ended = threading.Event()
        self.attached = threading.Event()
        global _LATEST
        _LATEST = self
        call.future.add_done_callback(self._submitted_or_not)

    def __repr__(self) -> str:
        where = "cells run on the node" if self.on_node else "cells run here"
        return f"<Betty node kernel: {self.line}; {where}>"

    def _ipython_display_(self) -> None:
        from IPython.display import display  # lazy: only shown in a notebook

        display(self._view)

    @property
    def status(self) -> str:
        """The allocation in one line: its state, node and ``ends at …`` with the time left."""
        if self.job_id is not None and not self._ended.is_set():
            try:
                self.line = str(self._poll(self.token, self.job_id)["line"])
            except BettyError as error:
                return f"{self.line} (not read again: {error})"
        return self.line

    def wait(self, timeout: float | None = None) -> "NodeKernelHandle":
        """Wait (blocking the cell) until the kernel is attached; a one-line UsageError otherwise."""
        if not self.attached.wait(timeout) or self.kernel is None:
            raise UsageError(f"the node kernel is not attached: {self.line}")
        return self

    def here(self) -> None:
        """Run the next cells on the node (done once the kernel is attached)."""
        global _ACTIVE
        if self.kernel is None:
            raise UsageError(f"the node kernel is not attached yet: {self.line}")
        if _ACTIVE is not None and _ACTIVE is not self:
            _ACTIVE.back()
        transformers = self._shell.input_transformers_cleanup
        if to_node not in transformers:
            transformers.append(to_node)
        _ACTIVE, self.on_node = self, True

    def back(self) -> None:
        """Run the next cells in this notebook's own kernel again; the node's kernel keeps its state."""
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None
            if to_node in self._shell.input_transformers_cleanup:
                self._shell.input_transformers_cleanup.remove(to_node)
        self.on_node = False

    def reattach(self) -> None:
        """A fresh client through fresh forwards, after a dropped link: the node's kernel and its state are kept."""
        if self.kernel is None:
            raise UsageError(f"the node kernel is not attached: {self.line}")
        self.kernel = self.kernel.reattach()

    def stop(self) -> str:
        """Cells run here again, and the allocation is cancelled."""
        self.back()
        if self.kernel is not None:
            self.kernel.close()
            self.kernel = None
        if self._opened is not None:
            from ..cluster.sync import run_sync  # lazy: only a stopped node kernel closes its own connection

            run_sync(self._opened.close())
            self._opened = None
        self._ended.set()
        atexit.unregister(self._at_exit)
        if self.job_id is None:
            return "the node kernel was not started"
        outcome = self._stop_job(self.token, self.job_id)
        self.line = str(getattr(outcome, "summary", outcome))
        return self.line

    def run(self, code: str) -> None:
        """Run ``code`` in the node's kernel; what it prints, shows or raises is shown here."""
        from IPython.display import publish_display_data  # lazy: only a cell on the node shows anything

        assert self.kernel is not None

        def shown(message: dict[str, Any]) -> None:
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "stream":
                (sys.stderr if content.get("name") == "stderr" else sys.stdout).write(content.get("text", ""))
            elif kind in ("display_data", "execute_result", "update_display_data"):
                publish_display_data(content.get("data", {}), content.get("metadata", {}))
            elif kind == "error":
                sys.stderr.write("\n".join(content.get("traceback", [])) + "\n")

        try:
            self.kernel.client.execute_interactive(code, output_hook=shown, allow_stdin=False, timeout=None)
        except (OSError, RuntimeError) as error:
            raise UsageError(f"the node kernel did not answer ({error}); `%betty kernel --reattach` tries again, "
                             "`%betty kernel --back` runs cells here") from None

    # ----- following ---------------------------------------------------------------------------
    def _submitted_or_not(self, future: Any) -> None:
        outcome = None if future.exception() else future.result()
        if outcome is None or not outcome.ok or not isinstance(outcome.data, dict):
            self.line = "not started" + (f": {outcome.summary.strip()[:300]}" if outcome is not None else "")
            self._ended.set()
            self.attached.set()
            return
        self.job_id = str(outcome.data["job_id"])
        self.line = f"job {self.job_id} PENDING"
        atexit.register(self._at_exit)  # the notebook's kernel shutting down ends the allocation
        threading.Thread(target=self._follow, name=f"betty-node-kernel-{self.job_id}", daemon=True).start()

    def _follow(self) -> None:
        assert self.job_id is not None
        while not self._ended.is_set():
            try:
                look = self._poll(self.token, self.job_id)
                self.line = str(look["line"])
                if look["finished"]:
                    break
                where = look.get("ready")
                if where:
                    info = connection(self._state, self.token)
                    self._opened = self._opened or self._transport()
                    self.kernel = attach(self._opened, info,
                                         Ready(where["ip"], where["ports"], where["host"], where["checked"]))
                    self.here()
                    break
            except BettyError as error:
                self.line = f"{self.line} (last look failed: {error})"
            self._ended.wait(self._every)
        self.attached.set()

    def _at_exit(self) -> None:
        try:
            self.stop()
        except BettyError:
            pass


def to_node(lines: list[str]) -> list[str]:
    """IPython's input transformer while a node kernel is in use: a cell that is not a ``%betty`` command runs on the
    node (its code handed over as one string literal, never re-read as code here)."""
    code = "".join(lines)
    if _ACTIVE is None or not code.strip() or code.lstrip().startswith(("%betty", "%%betty")):
        return lines
    return [f"__import__('betty_jupyter.notebook.node_kernel', fromlist=['run_on_node']).run_on_node({code!r})\n"]


def run_on_node(code: str) -> None:
    """Run ``code`` on the node kernel in use (see :func:`to_node`)."""
    if _ACTIVE is None:
        raise UsageError("no node kernel is in use; `%betty kernel --partition P --time MIN` starts one")
    _ACTIVE.run(code)


def latest() -> NodeKernelHandle | None:
    """The node kernel this notebook started last, if any."""
    return _LATEST
