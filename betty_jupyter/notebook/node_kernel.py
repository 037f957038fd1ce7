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
import queue
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..compute.node_kernel import DEFAULT_WARN_MINUTES, AttachedKernel, Ready, attach, connection, time_left
from ..errors import BettyError, UsageError

if TYPE_CHECKING:
    from ..compute.node_kernel import ForwardedBy
    from ..transport.interface import Transport
    from .session import Call

POLL_SECONDS = 2.0
"""How often the allocation is looked at while its kernel is not listening yet."""
RUNNING_LOOK_SECONDS = 30.0
"""How often the allocation is looked at once its kernel is attached (and at once when its heartbeat stops)."""
CLOCK_SECONDS = 10.0
"""How often the time left is shown again."""
Note = Callable[[str, str, datetime, float, bool], Any]
"""Notes one cell that ran on the node in the experiment's record: ``(slug, code, started, seconds, ok)``."""
_ACTIVE: "NodeKernelHandle | None" = None
_LATEST: "NodeKernelHandle | None" = None


class NodeKernelHandle:
    """``_`` of ``%betty kernel``: ``.status``, ``.back()``, ``.here()``, ``.stop()``; shown as the card and the time
    left (``ends at 21:04 (118 min left)``, a warning ``warn`` minutes before the end, one line once it ended)."""

    def __init__(self, call: "Call", token: str, state: Path, poll: Callable[[str, str], dict[str, Any]],
                 stop: Callable[[str, str], Any], transport: Callable[[], "Transport | ForwardedBy"], shell: Any,
                 view: Any, every: float = POLL_SECONDS, note: Note | None = None, warn: int = DEFAULT_WARN_MINUTES,
                 now: Callable[[], datetime] = datetime.now) -> None:
        """``poll``/``stop``: ``node_kernel_status``/``node_kernel_stop`` of ``(token, job id)``; ``transport``: the
        cluster's transport the forwards go through (or the process that holds them); ``note``: records each cell
        run on the node; ``now``: the clock the time left is read with."""
        self.call, self.token, self._state, self._poll, self._stop_job = call, token, state, poll, stop
        self._transport, self._shell, self._view, self._every = transport, shell, view, every
        self._note, self.warn, self._now = note, warn, now
        self.job_id: str | None = None
        self.slug: str | None = None
        self.line = "waiting for approval"
        self.ends: datetime | None = None
        self.warning = False
        self.ended = False
        """The allocation ended on its own or by a cancel (not by :meth:`stop`): cells run here again."""
        self.kernel: AttachedKernel | None = None
        self._opened: "Transport | ForwardedBy | None" = None
        self.on_node = False
        self._warned = False
        self._running = False
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self.attached = threading.Event()
        self._clock: Any = None
        global _LATEST
        _LATEST = self
        call.future.add_done_callback(self._submitted_or_not)

    def __repr__(self) -> str:
        where = "cells run on the node" if self.on_node else "cells run here"
        return f"<Betty node kernel: {self.line}; {where}>"

    def _ipython_display_(self) -> None:
        from IPython.display import display  # lazy: only shown in a notebook
        import ipywidgets as widgets  # lazy: as above

        if self._clock is None:
            self._clock = widgets.Label(value=self.clock())
            self._clock.add_class("betty-node-clock")
        display(widgets.VBox([self._view, self._clock]))

    @property
    def status(self) -> str:
        """The allocation in one line: its state, node and ``ends at …`` with the time left."""
        if self.job_id is not None and not self._ended.is_set():
            try:
                self._look()
            except BettyError as error:
                return f"{self.line} (not read again: {error})"
        return self.line

    def clock(self) -> str:
        """What the notebook shows of the allocation now: ``job 12 RUNNING on n1 · ends at 21:04 (118 min left)``,
        with a warning once the end is ``warn`` minutes away; its one line once it ended."""
        if self.ends is None or self._ended.is_set():
            self.warning = False
            return self.line
        now = self._now()
        if (now.tzinfo is None) != (self.ends.tzinfo is None):  # Slurm's times and this clock, read alike
            now = now.astimezone(self.ends.tzinfo) if self.ends.tzinfo else now.astimezone().replace(tzinfo=None)
        words, self.warning = time_left(self.ends, now, self.warn)
        return f"{self.line.split(' · ')[0]} · {words}"

    def wait(self, timeout: float | None = None) -> "NodeKernelHandle":
        """Wait (blocking the cell) until the kernel is attached; a one-line UsageError otherwise."""
        if not self.attached.wait(timeout) or self.kernel is None:
            raise UsageError(f"the node kernel is not attached: {self.line}")
        return self

    def here(self) -> None:
        """Run the next cells on the node (done once the kernel is attached)."""
        global _ACTIVE
        if self.kernel is None:
            raise UsageError(f"the node kernel is not attached: {self.line}")
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
        self._let_go()
        atexit.unregister(self._at_exit)
        if self.job_id is None:
            return "the node kernel was not started"
        if self.ended:
            return self.line
        outcome = self._stop_job(self.token, self.job_id)
        self.line = str(getattr(outcome, "summary", outcome))
        self._show()
        return self.line

    def run(self, code: str) -> None:
        """Run ``code`` in the node's kernel; what it prints, shows or raises is shown here. The cell is noted in the
        experiment's record; a cell whose allocation ends under it ends with one line, not a hang."""
        from IPython.display import publish_display_data  # lazy: only a cell on the node shows anything

        if self.kernel is None:
            raise UsageError(f"the node kernel is not attached: {self.line}")
        if self.warning and not self._warned:
            self._warned = True
            sys.stderr.write(f"betty: {self.clock()}\n")
        if self.kernel.dropped():
            self._attach_again()
        assert self.kernel is not None
        client = self.kernel.client
        outcome = {"ok": True}

        def shown(message: dict[str, Any]) -> None:
            kind, content = message["header"]["msg_type"], message["content"]
            if kind == "stream":
                (sys.stderr if content.get("name") == "stderr" else sys.stdout).write(content.get("text", ""))
            elif kind in ("display_data", "execute_result", "update_display_data"):
                publish_display_data(content.get("data", {}), content.get("metadata", {}))
            elif kind == "error":
                outcome["ok"] = False
                sys.stderr.write("\n".join(content.get("traceback", [])) + "\n")

        started, clock = self._now(), time.monotonic()
        with self._lock:
            self._running = True
        try:
            msg_id = client.execute(code, allow_stdin=False)
            self._until(lambda: client.get_iopub_msg(timeout=1.0), msg_id, shown, idle=True)
            reply = self._until(lambda: client.get_shell_msg(timeout=1.0), msg_id, None, idle=False)
            outcome["ok"] = outcome["ok"] and reply.get("content", {}).get("status") == "ok"
        except (OSError, RuntimeError) as error:
            raise UsageError(f"the node kernel did not answer ({error}); `%betty kernel --reattach` tries again, "
                             "`%betty kernel --back` runs cells here") from None
        finally:
            with self._lock:
                self._running = False
            if self.ended:
                self._let_go()
            else:
                self._noted(code, started, time.monotonic() - clock, outcome["ok"])

    def _attach_again(self) -> None:
        """After a dropped link: a fresh client through fresh forwards over the link made again (the node's kernel
        and its variables are kept), unless the allocation ended meanwhile (then the cell says so in one line)."""
        try:
            self._look()
        except BettyError:
            pass  # the job is looked at again by the next look; attaching says whether the kernel answers
        if self.ended or self.kernel is None:
            raise UsageError(self.line)
        self.kernel = self.kernel.reattach()
        sys.stderr.write("betty: the link to the cluster dropped; the node kernel is attached again "
                         "(its variables are kept)\n")

    def _until(self, read: Callable[[], dict[str, Any]], msg_id: str, shown: Callable[[dict[str, Any]], None] | None,
               idle: bool) -> dict[str, Any]:
        """Read messages of the cell ``msg_id`` until its kernel is idle (``idle``) or its reply came; a one-line
        UsageError once the allocation ended under it (looked at whenever the kernel's heartbeat stops)."""
        looked = 0.0
        while True:
            if self.ended:
                raise UsageError(self.line)
            try:
                message = read()
            except queue.Empty:
                client = self.kernel.client if self.kernel is not None else None
                if client is not None and not client.hb_channel.is_beating() and time.monotonic() - looked > 5:
                    looked = time.monotonic()
                    try:
                        self._look()
                    except BettyError:
                        pass
                continue
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if not idle:
                return message
            assert shown is not None
            shown(message)
            if message["header"]["msg_type"] == "status" and message["content"].get("execution_state") == "idle":
                return message

    def _noted(self, code: str, started: datetime, seconds: float, ok: bool) -> None:
        """Note the cell in the experiment's record; a record that cannot be written says so in one line."""
        if self._note is None or self.slug is None:
            return
        try:
            self._note(self.slug, code, started, seconds, ok)
        except (BettyError, OSError) as error:
            sys.stderr.write(f"betty: the cell ran, but the experiment's record could not note it ({error})\n")

    # ----- following ---------------------------------------------------------------------------
    def _submitted_or_not(self, future: Any) -> None:
        outcome = None if future.exception() else future.result()
        if outcome is None or not outcome.ok or not isinstance(outcome.data, dict):
            self.line = "not started" + (f": {outcome.summary.strip()[:300]}" if outcome is not None else "")
            self._ended.set()
            self.attached.set()
            self._show()
            return
        self.job_id = str(outcome.data["job_id"])
        self.slug = str(outcome.data.get("slug") or "") or None
        self.line = f"job {self.job_id} PENDING"
        self._show()
        atexit.register(self._at_exit)  # the notebook's kernel shutting down ends the allocation
        threading.Thread(target=self._follow, name=f"betty-node-kernel-{self.job_id}", daemon=True).start()

    def _look(self) -> dict[str, Any]:
        """Read the allocation once: its line and end; once it ended, cells run here again and the notebook says so."""
        assert self.job_id is not None
        look = self._poll(self.token, self.job_id)
        if self._ended.is_set():
            return look
        self.line = str(look["line"])
        if look.get("ends"):
            try:
                self.ends = datetime.fromisoformat(str(look["ends"]))
            except ValueError:
                self.ends = None
        if look["finished"]:
            self._finished(str(look.get("state", "ended")))
        self._show()
        return look

    def _finished(self, state: str) -> None:
        """The allocation ended (its time limit, a cancel, its kernel gone): one line, and cells run here again."""
        with self._lock:
            if self.ended:
                return
            self.ended = True
        where = "in this notebook's kernel again" if self.on_node or self.kernel is not None else "here"
        self.line = f"job {self.job_id} ended ({state}): the node kernel is gone; cells run {where}"
        self._let_go()
        atexit.unregister(self._at_exit)

    def _let_go(self) -> None:
        """Cells run here again; the client and the forwards are closed (once no cell is reading from them)."""
        self.back()
        self._ended.set()
        self.attached.set()
        with self._lock:
            if self._running:
                return
            kernel, self.kernel = self.kernel, None
            self._opened = None  # the process's link: its host closes it, not the node kernel
        if kernel is not None:
            kernel.close()

    def _show(self) -> None:
        """Show the allocation's line and time left (once the handle is displayed)."""
        text = self.clock()
        if self._clock is not None:
            self._clock.value = text
            if self.warning:
                self._clock.add_class("betty-node-warning")
            else:
                self._clock.remove_class("betty-node-warning")

    def _follow(self) -> None:
        assert self.job_id is not None
        looked = 0.0
        while not self._ended.is_set():
            try:
                if self.kernel is None or time.monotonic() - looked >= RUNNING_LOOK_SECONDS:
                    looked = time.monotonic()
                    look = self._look()
                    where = look.get("ready")
                    if self.kernel is None and where and not self._ended.is_set():
                        info = connection(self._state, self.token)
                        self._opened = self._opened or self._transport()
                        self.kernel = attach(self._opened, info,
                                             Ready(where["ip"], where["ports"], where["host"], where["checked"]))
                        self.here()
                        self.attached.set()
                else:
                    self._show()
            except BettyError as error:
                self.line = f"{self.line.split(' (last look failed')[0]} (last look failed: {error})"
            self._ended.wait(self._every if self.kernel is None else CLOCK_SECONDS)
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
    """Run ``code`` on the node kernel in use (see :func:`to_node`); what stopped it is said in one ``betty:`` line
    (the allocation ended, the node's kernel did not answer)."""
    try:
        if _ACTIVE is None:
            raise UsageError("no node kernel is in use; `%betty kernel --partition P --time MIN` starts one")
        _ACTIVE.run(code)
    except BettyError as error:
        print(f"betty: {error}", file=sys.stderr)


def latest() -> NodeKernelHandle | None:
    """The node kernel this notebook started last, if any."""
    return _LATEST
