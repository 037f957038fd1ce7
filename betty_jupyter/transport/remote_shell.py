"""A persistent shell on the cluster that runs one command after another over one SSH channel.

The channel is a paramiko session channel (``SSHTransport``) or the pipes of an ``ssh``
process multiplexed over a master connection (``OpenSSHTransport``); both look like
:class:`ShellChannel`.

Opening an SSH channel per command costs a round trip or more on every call; a shell kept
open costs one write and one read. Each command is framed with a fresh random token:

    <command> </dev/null; rc=$?; printf '\\n<token>\\n' >&2; printf '\\n<token> %d\\n' "$rc"

stderr's end mark is written first. SSH keeps a channel's data in order, so once stdout's
end mark has arrived, stderr's has too. A timed-out shell is closed, never reused: whatever
it was doing cannot leak into the next command's output.
"""

from __future__ import annotations

import os
import select
import shlex
import subprocess
import threading
import time
import uuid
from typing import Any, Callable, Protocol, Sequence

from ..errors import CommandTimeout, TransportError
from .interface import CommandResult, program_name, unset_slurm_output_variables

_CHUNK = 65536
_POLL = 0.05


class ShellClosed(TransportError):
    """The shell's channel ended (the link dropped or the remote side went away)."""


class LoginPostponed(TransportError):
    """A link opened ahead of its first command (:meth:`ShellPool.open_early`) met a login question: it asks nobody,
    and the command logs in itself when it runs, asking then."""


class ShellChannel(Protocol):
    """The part of a paramiko channel a :class:`RemoteShell` uses."""

    @property
    def closed(self) -> bool: ...

    def settimeout(self, timeout: float) -> None: ...
    def sendall(self, data: bytes) -> None: ...
    def recv(self, size: int) -> bytes: ...
    def recv_stderr_ready(self) -> bool: ...
    def recv_stderr(self, size: int) -> bytes: ...
    def exit_status_ready(self) -> bool: ...
    def close(self) -> None: ...


def shell_command(login_shell: bool) -> str:
    """What the remote side runs to become the shell (a login shell reads the site's profile)."""
    return "exec /bin/sh -l" if login_shell else "exec /bin/sh"


class RemoteShell:
    """One long-lived ``/bin/sh`` on the cluster, driven through a :class:`ShellChannel`."""

    def __init__(self, channel: ShellChannel) -> None:
        self._channel = channel
        self._channel.settimeout(_POLL)
        self.last_used = time.monotonic()
        self.on_sent: Callable[[], None] | None = None  # tests use this to break the link mid-command

    @classmethod
    def start(cls, paramiko_transport: Any, login_shell: bool, timeout: float) -> "RemoteShell":
        """Open a paramiko session channel, start the shell and wait until it answers."""
        try:
            channel = paramiko_transport.open_session(timeout=timeout)
            channel.exec_command(shell_command(login_shell))
        except Exception as exc:  # paramiko raises SSHException, EOFError, socket errors
            raise ShellClosed(f"could not open a shell on the cluster: {exc}") from exc
        return cls.over(channel, timeout)

    @classmethod
    def over(cls, channel: ShellChannel, timeout: float) -> "RemoteShell":
        """A shell on a channel whose remote side already runs :func:`shell_command`, once it answers."""
        shell = cls(channel)
        # A login profile may print banners: read past them to a first token.
        shell._call(f"{unset_slurm_output_variables()}; cd", timeout)
        return shell

    @property
    def alive(self) -> bool:
        """Whether the channel is still open (not a liveness proof: links can be half-open)."""
        return not self._channel.closed and not self._channel.exit_status_ready()

    def run(self, argv: Sequence[str], timeout: float) -> tuple[str, str, int]:
        """Run ``argv`` (quoted with ``shlex.join``); returns stdout, stderr and the exit code."""
        return self._call(shlex.join(argv), timeout)

    def _call(self, command_line: str, timeout: float) -> tuple[str, str, int]:
        token = f"BETTY-{uuid.uuid4().hex}"
        script = (
            f"{command_line} </dev/null; __betty_rc=$?; "
            f"printf '\\n%s\\n' '{token}' >&2; printf '\\n%s %d\\n' '{token}' \"$__betty_rc\"\n"
        )
        try:
            self._channel.sendall(script.encode())
        except Exception as exc:
            self.close()
            raise ShellClosed(f"the link to the cluster dropped: {exc}") from exc
        if self.on_sent is not None:
            self.on_sent()
        stdout, stderr, code = self._read_until(token, time.monotonic() + timeout)
        self.last_used = time.monotonic()
        return stdout, stderr, code

    def _read_until(self, token: str, deadline: float) -> tuple[str, str, int]:
        out, err = bytearray(), bytearray()
        end = f"\n{token} ".encode()
        while True:
            self._drain_stderr(err)
            position = out.find(end)
            finished = position >= 0 and out.find(b"\n", position + len(end)) >= 0
            # sshd forwards stdout and stderr from two pipes, so stderr's mark may lag a little.
            if finished and f"\n{token}\n".encode() in err:
                code = int(out[position + len(end):].split(b"\n", 1)[0])
                return _text(out[:position]), _text(_before_mark(err, token)), code
            if time.monotonic() >= deadline:
                self.close()
                raise CommandTimeout("the command did not finish in time and its shell was closed")
            if finished:
                time.sleep(0.001)
            else:
                self._receive(out)

    def _receive(self, out: bytearray) -> None:
        try:
            data = self._channel.recv(_CHUNK)
        except TimeoutError:
            return
        except OSError as exc:  # socket.timeout is TimeoutError on 3.10+; others are real faults
            self.close()
            raise ShellClosed(f"the link to the cluster dropped: {exc}") from exc
        if not data:
            self.close()
            raise ShellClosed("the link to the cluster dropped (the shell's channel closed)")
        out.extend(data)

    def _drain_stderr(self, err: bytearray) -> None:
        while self._channel.recv_stderr_ready():
            err.extend(self._channel.recv_stderr(_CHUNK))

    def close(self) -> None:
        """Close the channel; closing twice is fine."""
        try:
            self._channel.close()
        except Exception:  # closing a dead channel can raise anything paramiko-shaped
            pass


def _before_mark(err: bytearray, token: str) -> bytes:
    mark = f"\n{token}\n".encode()
    position = err.rfind(mark)
    return bytes(err[:position]) if position >= 0 else bytes(err)


def _text(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


class PipeChannel:
    """A process's pipes (an ``ssh`` running the shell) as the :class:`ShellChannel` a :class:`RemoteShell` drives."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin and process.stdout and process.stderr
        self._process = process
        self._stdin, self._stdout, self._stderr = process.stdin, process.stdout, process.stderr
        self._timeout = 0.05
        self._closed = False
        self._stderr_ended = False
        self._said = bytearray()

    @property
    def closed(self) -> bool:
        """Whether the shell's ssh has ended or was closed."""
        return self._closed or self._process.poll() is not None

    def settimeout(self, timeout: float) -> None:
        """How long :meth:`recv` waits for output before ``TimeoutError``."""
        self._timeout = timeout

    def sendall(self, data: bytes) -> None:
        """Write ``data`` to the shell."""
        try:
            self._stdin.write(data)
            self._stdin.flush()
        except (OSError, ValueError) as exc:
            raise OSError(f"ssh ended: {exc}") from exc

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes of the shell's stdout; ``TimeoutError`` when none came in time."""
        ready, _, _ = select.select([self._stdout], [], [], self._timeout)
        if not ready:
            raise TimeoutError
        return os.read(self._stdout.fileno(), size)

    def recv_stderr_ready(self) -> bool:
        """Whether stderr has bytes to read now (never after its end: a closed pipe stays "readable")."""
        if self._stderr_ended or self._stderr.closed:
            return False
        ready, _, _ = select.select([self._stderr], [], [], 0)
        return bool(ready)

    def recv_stderr(self, size: int) -> bytes:
        """Up to ``size`` bytes of stderr (what ssh itself says lands here too)."""
        data = os.read(self._stderr.fileno(), size)
        if not data:
            self._stderr_ended = True
        self._said.extend(data[-4096:])
        return data

    def exit_status_ready(self) -> bool:
        """Whether ssh has exited."""
        return self._process.poll() is not None

    def stderr_text(self) -> str:
        """What ssh printed on stderr so far (its own complaints, when it gave up)."""
        try:
            while self.recv_stderr_ready():
                if not self.recv_stderr(_CHUNK):
                    break
        except (OSError, ValueError):
            pass
        return self._said.decode(errors="replace")

    def close(self) -> None:
        """End the shell's ssh; closing twice is fine."""
        if self._closed:
            return
        self._closed = True
        for stream in (self._stdin, self._stdout, self._stderr):
            try:
                stream.close()
            except OSError:
                pass
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()


class ShellPool:
    """What both SSH transports share: commands run in a small pool of persistent shells over one link.

    A subclass says how a new shell starts (:meth:`_new_shell`), what dropping the link closes
    beyond the idle shells (:meth:`_drop_link`) and how the cluster is named in messages
    (:attr:`where`). An idle shell is probed with a real command before reuse after
    ``probe_after`` seconds (a half-open link still looks open); a dropped link is reconnected
    and a read retried once, a write never. :meth:`open_early` logs in and starts the first
    shell in the background while the process does other work (a command loading Betty).
    """

    where: str

    def __init__(self, pool_size: int, connect_timeout: float, probe_after: float) -> None:
        self.connect_timeout = connect_timeout
        self.probe_after = probe_after
        self._slots = threading.BoundedSemaphore(pool_size)
        self._lock = threading.Lock()
        self._idle: list[RemoteShell] = []
        self._opening: threading.Thread | None = None
        self._opening_error: Exception | None = None
        # Called in the worker thread right after a command was written to the link;
        # fault-injection tests break the link here to test exactly-once submission.
        self.after_send: Callable[[], None] | None = None

    def _new_shell(self, timeout: float) -> RemoteShell:
        raise NotImplementedError

    def open_early(self) -> None:
        """Start logging in and opening a first shell now, in a background thread, unless the link is open or opening.

        The first command then finds that shell ready, or meets the error opening it met, as if it had opened it
        itself; meanwhile the process goes on with its own work. Nothing runs on the cluster but the shell."""
        with self._lock:
            if self._opening is not None or self._idle:
                return
            self._opening = threading.Thread(target=self._open_first, name=f"betty-open-{self.where}", daemon=True)
            self._opening.start()

    def _open_first(self) -> None:
        try:
            if not self._may_open_early():
                return
            shell = self._new_shell(self.connect_timeout)
        except LoginPostponed:
            return
        except Exception as error:  # the first command raises it as its own (a refused connection, an unknown host key)
            self._opening_error = error
            return
        with self._lock:
            self._idle.append(shell)

    def _may_open_early(self) -> bool:
        """Whether :meth:`open_early` may log in now (a subclass says no where only a person could answer)."""
        return True

    def _opening_early(self) -> bool:
        """Whether this thread opens the link ahead of its first command: a login question then asks nobody and
        raises :class:`LoginPostponed`."""
        return self._opening is not None and threading.current_thread() is self._opening

    def _wait_for_opening(self, keep_error: bool) -> None:
        """Wait until the link :meth:`open_early` is opening is open; with ``keep_error``, raise what opening it met."""
        with self._lock:
            opening = self._opening
        if opening is None or opening is threading.current_thread():
            return
        opening.join()
        with self._lock:
            if self._opening is not opening:
                return
            self._opening, error, self._opening_error = None, self._opening_error, None
        if error is not None and keep_error:
            raise error

    def _drop_link(self) -> None:
        """Close the idle shells (a subclass closes its connection too)."""
        self._wait_for_opening(keep_error=False)  # a shell still being opened is closed with the others
        with self._lock:
            for shell in self._idle:
                shell.close()
            self._idle.clear()

    def run_blocking(self, argv: tuple[str, ...], timeout: float = 60.0, idempotent: bool = True) -> CommandResult:
        """Run ``argv`` in a pooled shell, for callers that already own a thread."""
        with self._slots:
            began = time.perf_counter()
            try:
                stdout, stderr, code = self._run_in_shell(argv, timeout)
            except ShellClosed as dropped:
                self._drop_link()
                if not idempotent:
                    raise TransportError(
                        f"the link to {self.where} dropped while `{program_name(argv)}` ran; its outcome is unknown"
                    ) from dropped
                stdout, stderr, code = self._run_in_shell(argv, timeout)
            except CommandTimeout as late:
                raise CommandTimeout(
                    f"`{program_name(argv)}` did not finish within {timeout:g} s on {self.where}; it was stopped"
                ) from late
            return CommandResult(argv, stdout, stderr, code, (time.perf_counter() - began) * 1000)

    def _run_in_shell(self, argv: tuple[str, ...], timeout: float) -> tuple[str, str, int]:
        shell = self._checkout(timeout)
        shell.on_sent = self.after_send
        result = shell.run(argv, timeout)
        with self._lock:
            self._idle.append(shell)
        return result

    def _checkout(self, timeout: float) -> RemoteShell:
        """An idle shell that answers, or a new one (reconnecting when the link is gone)."""
        self._wait_for_opening(keep_error=True)
        while True:
            with self._lock:
                shell = self._idle.pop() if self._idle else None
            if shell is None:
                return self._new_shell(timeout)
            if not shell.alive:
                shell.close()
                continue
            if time.monotonic() - shell.last_used > self.probe_after and not self._answers(shell):
                self._drop_link()
                continue
            return shell

    def _answers(self, shell: RemoteShell) -> bool:
        """A timed real probe: a half-open link still looks open."""
        try:
            shell.run(("true",), timeout=min(5.0, self.connect_timeout))
        except TransportError:
            return False
        return True
