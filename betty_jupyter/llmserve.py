"""Your own chat model on your allocation: an OpenAI-compatible server (vLLM) run as a Slurm job.

``betty llm serve`` is this module plus a person's approval:

1. :func:`prepare` renders the batch script (checked against the cluster's partitions) and a
   fresh key for this one server;
2. :func:`submit_server` puts the key in a file only the person can read on the cluster and
   submits the job once;
3. the job reads the key into ``VLLM_API_KEY`` (never on a command line), picks the one address
   of its node that reaches the host sbatch ran on (``127.0.0.1`` when that is the node itself)
   and a free port there, writes ``address:port`` beside its log and starts the server, which
   listens there only; :func:`wait_until_serving` waits until the job runs and the server
   answers ``GET /v1/models`` with the key, reaching it directly (local transport) or through
   an SSH forward;
4. :func:`save_user_llm` points Betty's ``llm`` settings at it, with the key in a file of the
   person's (``api_key_file``), and the returned :class:`LLMSetting` puts the previous setting back.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shlex
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable


from .cluster.commands import checked_script, default_partition, request_summary
from .config import user_llm_file
from .transport.forward import PortForward
from .cluster.sbatch import SbatchScript
from .transport.interface import ForwardingTransport
from .errors import SlurmError, UsageError
from .cluster.jobs import JobState

if TYPE_CHECKING:
    from .cluster.slurm import SlurmClient
    from .transport.interface import Transport

USER_KEYS_DIR = "betty_llm_keys"
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_TOOL_PARSER = re.compile(r"^[a-z0-9_]{1,40}$")

# Bash, in the job: the address of this node on the route to the host sbatch ran on (the login
# node an SSH forward starts from, or Jupyter's node; 127.0.0.1 when it is this node). A UDP
# "connect" sends nothing: the kernel only picks the route.
_LISTEN_ADDRESS = """\
listen_address() {
  local python
  python=$(command -v python3 || command -v python) || return 1
  "$python" - "$1" <<'PY'
import socket, sys
family, kind, _, _, address = socket.getaddrinfo(sys.argv[1], 9, type=socket.SOCK_DGRAM)[0]
probe = socket.socket(family, kind)
probe.connect(address)
print(probe.getsockname()[0])
PY
}
HOST=$(listen_address "$SLURM_SUBMIT_HOST") || {
  echo "betty: cannot tell which address of $(hostname) reaches $SLURM_SUBMIT_HOST" >&2; exit 1; }"""

# Bash, in the job: a port nobody listens on at that address (bash's /dev/tcp connects or fails), below the range
# the kernel hands out to outgoing connections (whose ports nobody listens on, yet a server cannot bind them).
_PICK_PORT = """\
pick_port() {
  local port low=20000 high=32768 first
  if read -r first _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && ((first > low + 1000)); then
    high=$first
  fi
  for _ in $(seq 100); do
    port=$((low + RANDOM % (high - low)))
    if ! (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  return 1
}
PORT=$(pick_port) || { echo "betty: no free port found on $(hostname)" >&2; exit 1; }"""


@dataclass(frozen=True)
class ServeRequest:
    """What the person asked for: which model, where, for how long, with which command."""

    model: str
    partition: str
    gpus: int = 1
    time: str = "02:00:00"
    port: int | None = None
    command: str | None = None
    name: str = "betty-llm"
    tool_parser: str = "hermes"

    def __post_init__(self) -> None:
        if not self.model.strip() or any(ord(char) < 32 for char in self.model):
            raise UsageError("--model needs the model's path on the cluster (or a name the server can fetch)")
        if self.gpus < 0:
            raise UsageError(f"--gpus must be 0 or more, not {self.gpus}")
        if self.port is not None and not 1024 <= self.port <= 65535:
            raise UsageError(f"--port must be between 1024 and 65535, not {self.port}")
        if not _NAME.match(self.name):
            raise UsageError(f"--name {self.name!r} must be letters, digits, . _ - (at most 64)")
        if self.command is not None and not self.command.strip():
            raise UsageError("--command is empty; leave it out to run vLLM")
        if not _TOOL_PARSER.match(self.tool_parser):
            raise UsageError(f"--tool-parser {self.tool_parser!r} is not a vLLM tool-call parser name (e.g. hermes, llama3_json)")

    def server_command(self) -> str:
        """``--command``, or vLLM's OpenAI server with tool calling on (Betty's agent works through tools).

        vLLM takes its key from ``$VLLM_API_KEY``, which the script sets from the key file.
        """
        if self.command:
            return self.command
        words = ['exec python -m vllm.entrypoints.openai.api_server --model "$MODEL" --host "$HOST" --port "$PORT"',
                 f"--enable-auto-tool-choice --tool-call-parser {self.tool_parser}"]
        if self.gpus > 1:
            words.append(f"--tensor-parallel-size {self.gpus}")
        return " ".join(words)


@dataclass(frozen=True)
class ServerJob:
    """A rendered, checked server job: the script, the directory its log and address go to, its key.

    The key is in no text Betty shows: the script reads it from ``key_file``, which
    :func:`submit_server` writes only once the person said yes.
    """

    script: str
    directory: str
    summary: str
    key_file: str
    key: str = field(repr=False, default_factory=lambda: secrets.token_urlsafe(32))

    def log(self, job_id: str) -> str:
        """Where the job writes its output (stdout and stderr)."""
        return f"{self.directory}/{job_id}.log"

    def address_file(self, job_id: str) -> str:
        """Where the job writes ``host:port`` once it picked its port."""
        return f"{self.directory}/{job_id}.address"


@dataclass
class Served:
    """A server that answers: its job, its node, the address it listens on, and how Betty reaches it."""

    job_id: str
    node: str
    address: str
    port: int
    base_url: str
    model: str
    forward: "PortForward | None" = None

    def close(self) -> None:
        """Stop the SSH forward, if there is one."""
        if self.forward is not None:
            self.forward.close()


def render_script(request: ServeRequest, directory: str, key_file: str) -> str:
    """The batch script: directives, the key, the address and port, ``address:port`` beside the log, the server."""
    body = "\n".join([
        "#!/bin/bash",
        "# An OpenAI-compatible model server for Betty (`betty llm serve`). It writes address:port where",
        "# Betty looks for it, then serves until the job's time runs out or the job is cancelled.",
        f"MODEL={shlex.quote(request.model)}",
        "# The server's key, from a file only you can read: in the environment, not on a command line.",
        f"VLLM_API_KEY=$(cat -- {shlex.quote(key_file)}) ||",
        '  { echo "betty: cannot read the server\'s key" >&2; exit 1; }',
        "export VLLM_API_KEY",
        _LISTEN_ADDRESS,
        f"PORT={request.port}" if request.port else _PICK_PORT,
        f'echo "$HOST:$PORT" > {shlex.quote(directory)}/"$SLURM_JOB_ID.address.tmp"',
        f'mv {shlex.quote(directory)}/"$SLURM_JOB_ID.address.tmp" {shlex.quote(directory)}/"$SLURM_JOB_ID.address"',
        'echo "betty: starting the model server on $(hostname), listening on $HOST:$PORT"',
        request.server_command(),
        "",
    ])
    options: dict[str, str | None] = {"job_name": request.name, "partition": request.partition,
                                      "time": request.time, "output": f"{directory}/%j.log"}
    if request.gpus:
        options["gres"] = f"gpu:{request.gpus}"
    return SbatchScript.parse(body).with_options(**options).render()


async def prepare(client: "SlurmClient", request: ServeRequest) -> ServerJob:
    """Render the script for ``client``'s cluster and check it against its partitions (``ScriptError``)."""
    directory = f"{await _absolute(client.transport, client.work_dir)}/llm"
    key_file = f"{directory}/{secrets.token_hex(8)}.key"
    text = render_script(request, directory, key_file)
    partitions = await client.partitions()
    script = checked_script(text, partitions)
    return ServerJob(text, directory, request_summary(script, default_partition(partitions)), key_file)


async def submit_server(client: "SlurmClient", job: ServerJob) -> str:
    """Make the log directory (yours only), write the key file, and submit the job once; returns its id."""
    await _run_or_fail(client.transport, ["mkdir", "-p", "--", job.directory], f"cannot make {job.directory}")
    await _run_or_fail(client.transport, ["chmod", "700", "--", job.directory], f"cannot protect {job.directory}")
    await client.transport.put(job.key.encode(), job.key_file)
    await _run_or_fail(client.transport, ["chmod", "600", "--", job.key_file], f"cannot protect {job.key_file}")
    return await client.submit(job.script)


async def forget_key(transport: "Transport", job: ServerJob) -> None:
    """Remove the key file from the cluster (the server read it when it started)."""
    await transport.run(["rm", "-f", "--", job.key_file])


async def _run_or_fail(transport: "Transport", argv: list[str], what: str) -> None:
    result = await transport.run(argv, idempotent=True)
    if not result.ok:
        raise SlurmError(f"{what} on the cluster: {result.stderr.strip() or result.exit_code}")


async def wait_until_serving(client: "SlurmClient", job: ServerJob, job_id: str, model: str, *,
                             timeout: float, on_progress: Callable[[str], None],
                             local_port: int = 0, interval: float = 1.0) -> Served:
    """Wait until job ``job_id`` runs and its server answers ``GET /v1/models``.

    A job that ends first raises :class:`SlurmError` with the end of its log; so does waiting
    past ``timeout`` seconds. Over SSH the server is reached through a :class:`PortForward`.
    Every request carries the job's key.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen: JobState | None = None
    served: Served | None = None
    try:
        while True:
            record = await client.job(job_id)
            state = record.state
            if state.finished:
                raise SlurmError(f"the model server (job {job_id}) ended {state.value} before it answered; "
                                 f"its log ends: {await _log_end(client.transport, job.log(job_id))}")
            if state is not seen:
                why = f" ({record.reason})" if state is JobState.PENDING and record.reason else ""
                on_progress(f"job {job_id} is {state.value}{why}")
                seen = state
            if state is JobState.RUNNING and served is None:
                served = await _route(client.transport, job, job_id, record.nodelist or "?", local_port, on_progress)
            if served is not None:
                names = await asyncio.to_thread(served_models, served.base_url, job.key)
                if names:
                    served.model = model if model in names else names[0]
                    return served
            if loop.time() > deadline:
                raise SlurmError(f"the model server (job {job_id}) did not answer within {timeout:g} s "
                                 f"(last {state.value}); its log: {job.log(job_id)}")
            await asyncio.sleep(interval)
            interval = min(interval * 1.5, 10.0)
    except BaseException:
        if served is not None:
            served.close()
        raise


async def _route(transport: "Transport", job: ServerJob, job_id: str, node: str, local_port: int,
                 on_progress: Callable[[str], None]) -> Served | None:
    """Where Betty reaches the server, once the job has written its address (None before)."""
    result = await transport.run(["cat", "--", job.address_file(job_id)])
    address, _, port = result.stdout.strip().rpartition(":")
    if not result.ok or not re.fullmatch(r"[0-9A-Fa-f.:]+", address) or not port.isdigit():
        return None
    forward = None
    if isinstance(transport, ForwardingTransport):
        forward = PortForward(transport, address, int(port), local_port)
        url = forward.url
        on_progress(f"forwarding {url} to {address}:{port} on {node}; waiting for the server to answer")
    else:
        url = f"http://{f'[{address}]' if ':' in address else address}:{port}"
        on_progress(f"waiting for the server at {url} to answer")
    return Served(job_id, node, address, int(port), f"{url}/v1", "", forward)


def served_models(base_url: str, key: str, timeout: float = 5.0) -> list[str]:
    """The models a server lists at ``base_url``/models, asked with ``key``; [] when it does not answer."""
    request = urllib.request.Request(f"{base_url}/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            listing = json.loads(answer.read())
    except (OSError, ValueError):  # not up yet, reset by the forward, or not JSON yet
        return []
    data = listing.get("data") if isinstance(listing, dict) else None
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item] if isinstance(data, list) else []


async def _absolute(transport: "Transport", path: str) -> str:
    """``path`` with a leading ``~`` replaced by the home directory on the cluster (Slurm does not expand it)."""
    if not path.startswith("~"):
        return path.rstrip("/")
    home = (await transport.run(["printenv", "HOME"])).stdout.strip()
    if not home.startswith("/"):
        raise SlurmError("the cluster did not say where your home directory is; set the profile's work_dir to an absolute path")
    return (home + path[1:]).rstrip("/")


async def _log_end(transport: "Transport", log: str, lines: int = 2) -> str:
    result = await transport.run(["tail", "-n", "20", "--", log])
    ending = [line.strip() for line in result.stdout.splitlines() if line.strip()][-lines:]
    if not result.ok or not ending:
        return f"(nothing; see {log})"
    return " / ".join(ending)[-400:]


# ----- Betty's LLM setting ---------------------------------------------------------------------
@dataclass(frozen=True)
class LLMSetting:
    """What :func:`save_user_llm` wrote (the setting and the key file), and what the setting was before."""

    path: Path
    written: bytes
    previous: bytes | None
    key_file: Path

    def restore(self) -> str:
        """Put the previous setting back (or remove ours) unless someone changed it since; says what it did.

        The key file goes in any case: its server is gone.
        """
        self.key_file.unlink(missing_ok=True)
        try:
            if self.path.read_bytes() != self.written:
                return f"left {self.path} as it is (it changed since)"
        except FileNotFoundError:
            return f"{self.path} is gone already"
        if self.previous is None:
            self.path.unlink()
            return f"removed {self.path}"
        _write(self.path, self.previous)
        return f"restored the previous {self.path}"


def save_user_llm(base_url: str, model: str, key: str) -> LLMSetting:
    """Point Betty's chat at ``model`` on ``base_url``, with the server's ``key`` in a file only you can read.

    The setting names the file (``api_key_file``), never the key, so an OpenAI key in the
    environment is never sent to the server on the cluster, nor this key anywhere else.
    """
    path = user_llm_file()
    key_file = _write_key(path.parent.parent / USER_KEYS_DIR, key)
    previous = path.read_bytes() if path.exists() else None
    llm = {"base_url": base_url, "model": model, "api_key_file": str(key_file)}
    written = (json.dumps({"BettyConfig": {"llm": llm}}, indent=2) + "\n").encode()
    _write(path, written)
    return LLMSetting(path, written, previous, key_file)


def _write_key(directory: Path, key: str) -> Path:
    """A new file under ``directory`` (yours only) holding ``key``, created readable by you alone."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    path = directory / f"{secrets.token_hex(8)}.key"
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(key + "\n")
    return path


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)
