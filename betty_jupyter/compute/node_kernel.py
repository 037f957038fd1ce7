"""A notebook kernel on a compute node (``%betty kernel``): the allocation comes to the notebook.

:func:`stage` writes a connection file with a fresh key into the project's
``.betty/node-kernels/<token>/`` (a :class:`~.private_folder.PrivateFolder`: mode 700, the file
600). Once the ``node_kernel`` card is approved the file and :mod:`.node_kernel_runner` go into
the run's own directory on the cluster (``<work_dir>/runs/kernel-<token>``, mode 700, files 600)
and :meth:`NodeKernelJob.script` is the batch job that runs the runner in the chosen environment.
The runner starts ``python -m ipykernel_launcher`` with that connection file, checks that every
port it listens on is owned by the job's user, and writes ``kernel.ready`` (ports, node; nothing
secret), which :func:`ready` reads back through one checked step.

:func:`attach` connects a ``jupyter_client`` client to it: over an SSH transport through one
:class:`~..transport.forward.PortForward` per kernel port (channels over the connection Betty
already holds, listening on 127.0.0.1 only); with the local transport straight to the node. Every
message is signed with the key (HMAC-SHA256), so a client without it is ignored by the kernel.
With Betty in the Jupyter server, the server holds the forwards for the notebook's kernel
(:func:`hold_forwards`, :class:`ForwardedBy`), so the kernel logs in nowhere. A dropped SSH link
does not end the kernel: the forwards go through the holder's
:class:`~..transport.link.Link`, which logs in again, and the next cell attaches a fresh client
through fresh forwards (:meth:`AttachedKernel.dropped`, :meth:`AttachedKernel.reattach`). The
runner stops the kernel (and so ends the job) once no client has been connected for the grace
period the person chose.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..cluster.job_request import JobRequest
from ..cluster.sbatch import SbatchScript
from ..errors import BettyError, UsageError
from ..json_text import parse_json
from ..transport.interface import ForwardingTransport, Transport
from ..transport.link import Link
from . import cell_transfer
from .cell_job import run_dir
from .private_folder import PrivateFolder

if TYPE_CHECKING:
    from jupyter_client.blocking.client import BlockingKernelClient

    from ..cluster.jobs import Job
    from ..transport.forward import PortForward

RUNNER = "node_kernel_runner.py"
"""The runner's file name in the run's directory."""
CONNECTION_FILE = "kernel.json"
READY_FILE = "kernel.ready"
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
DEFAULT_GRACE_MINUTES = 10
"""How long the kernel waits for a client to come back after the last one left."""
_READY_BYTES = 4096
_TOKEN_LENGTH = 32


def kernels_folder(state: Path) -> PrivateFolder:
    """Where the project keeps its node kernels' connection files: ``.betty/node-kernels``."""
    return PrivateFolder(state, ("node-kernels",))


def kernel_files(state: Path, token: str) -> PrivateFolder:
    """The folder of the node kernel ``token``; a one-line UsageError for a malformed token."""
    if len(token) != _TOKEN_LENGTH or not all(c in "0123456789abcdef" for c in token):
        raise UsageError(f"{token[:40]!r} is not a node kernel (32 hexadecimal digits)")
    return kernels_folder(state).child(token)


JOB_FILE = "job"
"""Written once the allocation is submitted: the cluster, the job id and the kernel's directory there, a line each."""
NOTEBOOK_KERNEL_FILE = "notebook-kernel"
"""The id of the Jupyter kernel of the notebook that started it (when Jupyter started that kernel): the status bar
shows the time left of the node kernel of the notebook in front."""
_KERNEL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MAX_LISTED = 200


@dataclass(frozen=True)
class Recorded:
    """A node kernel this project started: its token, and the allocation recorded for it."""

    token: str
    cluster: str
    job_id: str
    run_dir: str
    notebook_kernel: str | None = None
    """The Jupyter kernel id of the notebook that started it (None when not known)."""


def recorded(state: Path, token: str) -> Recorded:
    """The allocation recorded for the node kernel ``token``; a one-line UsageError when it was never started."""
    lines = kernel_files(state, token).read(JOB_FILE, 4096).decode("utf-8", "replace").split("\n")
    if len(lines) < 3:
        raise UsageError(f"node kernel {token}'s record of its job is not Betty's")
    files = kernel_files(state, token)
    notebook = files.read(NOTEBOOK_KERNEL_FILE, 100).decode("ascii", "replace").strip() \
        if files.exists(NOTEBOOK_KERNEL_FILE) else ""
    return Recorded(token, lines[0], lines[1], lines[2], notebook if _KERNEL_ID.fullmatch(notebook) else None)


def note_notebook_kernel(state: Path, token: str, connection_file: str) -> None:
    """Note which Jupyter kernel started the node kernel ``token``, from that kernel's connection file's name
    (``kernel-<id>.json``, as Jupyter names it); nothing is noted for a name of another shape."""
    name = Path(connection_file).name
    if name.startswith("kernel-") and name.endswith(".json") and _KERNEL_ID.fullmatch(name[7:-5]):
        kernel_files(state, token).write(NOTEBOOK_KERNEL_FILE, name[7:-5].encode())


def recorded_kernels(state: Path) -> list[Recorded]:
    """Every node kernel of this project whose allocation was submitted (the newest :data:`_MAX_LISTED`)."""
    folder = kernels_folder(state).path
    try:
        folders = sorted((entry for entry in folder.iterdir() if entry.is_dir() and (entry / JOB_FILE).exists()),
                         key=lambda entry: (entry / JOB_FILE).stat().st_mtime, reverse=True)[:_MAX_LISTED]
    except OSError:
        return []
    found = []
    for entry in folders:
        try:
            found.append(recorded(state, entry.name))
        except UsageError:
            continue  # not a node kernel's folder, or one whose files are not the person's alone
    return found


def stage(state: Path) -> str:
    """A new node kernel's token, its connection file (a fresh key, ports chosen on the node) written here."""
    token = uuid.uuid4().hex
    files = kernel_files(state, token).make()
    info = {"transport": "tcp", "ip": "127.0.0.1", "signature_scheme": "hmac-sha256", "kernel_name": "python3",
            "key": secrets.token_hex(32), **{name: 0 for name in PORTS}}
    files.write(CONNECTION_FILE, _dumps(info))
    return token


def connection(state: Path, token: str) -> dict[str, Any]:
    """The node kernel's connection file as staged (its key included: never shown, logged or sent elsewhere)."""
    files = kernel_files(state, token)
    if not files.path.is_dir():
        raise UsageError(f"no node kernel {token} is staged in this project; run %betty kernel again")
    info = parse_json(files.read(CONNECTION_FILE, _READY_BYTES))
    if not isinstance(info, dict) or not isinstance(info.get("key"), str):
        raise UsageError(f"node kernel {token}'s connection file is not Betty's; run %betty kernel again")
    return info


@dataclass(frozen=True)
class NodeKernelJob:
    """Everything the batch script of one node kernel says."""

    run_dir: str
    """The run's directory on the cluster, absolute."""
    request: JobRequest
    grace_minutes: int = DEFAULT_GRACE_MINUTES

    def script(self) -> SbatchScript:
        """The batch script, exactly as it is submitted and shown on the card."""
        here = shlex.quote(self.run_dir)
        return self.request.script(self.run_dir, "kernel", [
            "# %betty kernel: an IPython kernel in this allocation, for a notebook to attach to.",
            f"# {RUNNER} starts it with kernel.json (its key, mode 600) and stops it after",
            f"# {self.grace_minutes} min without a client. Nothing runs unless the directory is yours alone.",
            f'cd -- {here} && [[ -O . ]] && (( (0$(stat -c %a .) & 077) == 0 )) || '
            f'{{ echo "betty: {self.run_dir} is not yours alone; the kernel was not started" >&2; exit 1; }}',
        ], f"{RUNNER} {self.grace_minutes * 60}")


def kernel_dir(work_dir: str, token: str) -> str:
    """The node kernel's directory on the cluster: ``<work_dir>/runs/kernel-<token>``."""
    return run_dir(work_dir, token, "kernel")


async def upload(transport: Transport, state: Path, token: str, job: NodeKernelJob) -> None:
    """Put the connection file and the runner into the kernel's own directory (mode 700, files 600)."""
    info = connection(state, token)
    runner = Path(__file__).with_name(RUNNER).read_bytes()
    await cell_transfer.upload_files(transport, job.run_dir, [(CONNECTION_FILE, _dumps(info)), (RUNNER, runner)],
                                     fresh=True)


@dataclass(frozen=True)
class Ready:
    """Where the kernel listens, as its runner reported it once every port was checked."""

    ip: str
    ports: dict[str, int]
    host: str
    checked: str


async def ready(transport: Transport, state: Path, token: str, where: str) -> Ready | None:
    """The kernel's ``kernel.ready`` from its directory ``where`` on the cluster; None while it is not written."""
    files = kernel_files(state, token)
    copied = await cell_transfer.fetch(transport, where, [READY_FILE], files, cap=_READY_BYTES)
    if not copied:
        return None
    data = parse_json(files.read(READY_FILE, _READY_BYTES))
    try:
        ports = {name: int(data[name]) for name in PORTS}
        ip, host = str(data["ip"]), str(data["host"])[:200]
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"the node kernel's {READY_FILE} is not what its runner writes") from None
    if not all(0 < port < 65536 for port in ports.values()) or not ip or \
            not all(c in "0123456789abcdefABCDEF.:" for c in ip):
        raise UsageError(f"the node kernel's {READY_FILE} names no address Betty connects to")
    return Ready(ip, ports, host, str(data.get("checked", ""))[:300])


@dataclass(frozen=True)
class ForwardedBy:
    """The kernel's ports forwarded by another process that holds the connection to the cluster (the Jupyter
    server's Betty): ``open`` asks it for fresh forwards (their ports on 127.0.0.1 by name, None when it reaches the
    node directly), ``close`` for their end."""

    open: Callable[[], "dict[str, int] | None"]
    close: Callable[[], None]


@dataclass
class AttachedKernel:
    """A ``jupyter_client`` client of the node's kernel, and the forwards it goes through (none when local)."""

    client: "BlockingKernelClient"
    ready: Ready
    info: dict[str, Any] = field(repr=False)
    transport: "Transport | ForwardedBy" = field(repr=False)
    forwards: list["PortForward"] = field(default_factory=list)

    def close(self) -> None:
        """Stop the client's channels and the forwards; the kernel goes on (until its grace period ends)."""
        self.client.stop_channels()
        for forward in self.forwards:
            forward.close()
        if isinstance(self.transport, ForwardedBy):
            try:
                self.transport.close()
            except (BettyError, OSError):
                pass  # the process that held them is gone, and its forwards with it

    def dropped(self) -> bool:
        """Whether the cluster's side ended a forwarded connection since this client was attached (the SSH link
        dropped, or the kernel is gone): a cell then attaches again first."""
        return any(forward.dropped for forward in self.forwards)

    def reattach(self) -> "AttachedKernel":
        """A fresh client through fresh forwards (after a dropped link: each opens its channels over the link made
        again); this one is closed. What the kernel holds is kept: it is the same kernel."""
        self.close()
        return attach(self.transport, self.info, self.ready)


class _Through:
    """Channels through whichever transport a :class:`~..transport.link.Link` holds now (a new one after a drop)."""

    def __init__(self, link: Link) -> None:
        self.link = link

    def open_channel(self, host: str, port: int, timeout: float = 15.0) -> Any:
        """A channel to ``host:port`` as the cluster sees it."""
        current = self.link.current()
        assert isinstance(current, ForwardingTransport)
        return current.open_channel(host, port, timeout)


def forwarding(transport: Transport) -> ForwardingTransport | None:
    """What opens channels to the cluster's hosts over ``transport``; None when it reaches them directly (local)."""
    if isinstance(transport, Link):
        return _Through(transport) if isinstance(transport.current(), ForwardingTransport) else None
    return transport if isinstance(transport, ForwardingTransport) else None


def open_forwards(transport: Transport, where: Ready) -> list["PortForward"] | None:
    """One forward per kernel port over ``transport`` (listening on 127.0.0.1), in :data:`PORTS` order; None when
    ``transport`` reaches the node directly (local)."""
    through = forwarding(transport)
    if through is None:
        return None
    from ..transport.forward import PortForward  # lazy: paramiko's errors

    forwards: list[PortForward] = []
    try:
        for name in PORTS:
            forwards.append(PortForward(through, where.ip, where.ports[name]))
    except BaseException:
        for forward in forwards:
            forward.close()
        raise
    return forwards


_HELD: dict[str, list["PortForward"]] = {}
_HELD_LOCK = threading.Lock()


def hold_forwards(token: str, transport: Transport, where: Ready) -> dict[str, int] | None:
    """Forwards of the node kernel ``token``'s ports held by this process for another (the notebook's kernel, when
    this is the Jupyter server): their local ports by name, None when ``transport`` reaches the node directly. The
    forwards held before for ``token`` are closed."""
    release_forwards(token)
    forwards = open_forwards(transport, where)
    if forwards is None:
        return None
    with _HELD_LOCK:
        _HELD[token] = forwards
    return {name: forward.local_port for name, forward in zip(PORTS, forwards)}


def release_forwards(token: str) -> None:
    """Close the forwards this process holds for the node kernel ``token`` (none is fine)."""
    with _HELD_LOCK:
        forwards = _HELD.pop(token, [])
    for forward in forwards:
        forward.close()


def attach(transport: "Transport | ForwardedBy", info: dict[str, Any], where: Ready,
           wait: float | None = 60.0) -> AttachedKernel:
    """A started client of the kernel ``where`` signed with ``info``'s key (over forwards for an SSH transport, or
    over those another process holds), once the kernel answered it (``wait``: for at most so many seconds; None: not
    waited for)."""
    from jupyter_client.blocking.client import BlockingKernelClient  # lazy: only a node kernel needs it

    forwards: list[PortForward] = []
    ports, ip = dict(where.ports), where.ip
    if isinstance(transport, ForwardedBy):
        given = transport.open()
        if given is not None:
            ports, ip = {name: int(given[name]) for name in PORTS}, "127.0.0.1"
    else:
        forwards = open_forwards(transport, where) or []
        if forwards:
            ports, ip = {name: forward.local_port for name, forward in zip(PORTS, forwards)}, "127.0.0.1"
    client = BlockingKernelClient()
    settings: Any = {**info, **ports, "ip": ip}  # a connection file's fields, as jupyter_client reads them
    client.load_connection_info(settings)
    client.start_channels()
    attached = AttachedKernel(client, where, info, transport, forwards)
    if wait:
        try:
            client.wait_for_ready(timeout=wait)  # its answers on every channel, iopub's subscription included
        except RuntimeError as error:
            attached.close()
            raise UsageError(f"the kernel on {where.host} did not answer within {wait:g} s ({error})") from None
    return attached


def ends_at(job: "Job") -> datetime | None:
    """When the allocation ends: its start plus its time limit (None before it starts)."""
    if job.started is None or job.time_limit is None:
        return None
    return job.started + job.time_limit


DEFAULT_WARN_MINUTES = 10
"""How many minutes before the allocation's end the notebook warns."""


def time_left(end: datetime, now: datetime, warn_minutes: int = DEFAULT_WARN_MINUTES) -> tuple[str, bool]:
    """``ends at 21:04 (118 min left)`` and whether the end is within ``warn_minutes`` (then the words say so; 0: never).

    The minutes are rounded up: ``1 min left`` until the very end, ``0 min left`` only once it is reached."""
    seconds = max((end - now).total_seconds(), 0.0)
    minutes = int(-(-seconds // 60))
    words = f"ends at {end:%H:%M} ({minutes} min left)"
    warning = warn_minutes > 0 and seconds <= warn_minutes * 60
    return (f"{words}: save what you need, the allocation ends soon" if warning else words), warning


def status_line(job: "Job", now: datetime | None = None) -> str:
    """``job 12 RUNNING on node1 · ends at 21:04 (118 min left)``, or its state while it waits or once it ended."""
    end = ends_at(job)
    where = f" on {job.nodelist}" if job.nodelist else ""
    if end is None or job.state.finished:
        return f"job {job.job_id} {job.state.value}{where}"
    words, _ = time_left(end, now or datetime.now(end.tzinfo), warn_minutes=0)
    return f"job {job.job_id} {job.state.value}{where} · {words}"


def _dumps(info: dict[str, Any]) -> bytes:
    return json.dumps(info).encode()
