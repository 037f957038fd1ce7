"""``PortForward``: a port on this machine that reaches a port on the cluster, like ``ssh -L``.

Each connection to the local port becomes a channel over the cluster's one SSH connection
(the one Betty already opened, with its host key checked: a ``direct-tcpip`` channel with
paramiko, ``ssh -W`` over the master with OpenSSH), so there is no second login. The forward lives as long as the object: close it to stop.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import TYPE_CHECKING, Any

from paramiko import SSHException

from ..errors import TransportError

if TYPE_CHECKING:
    from .interface import ForwardingTransport

_CHUNK = 65536


class PortForward:
    """Listens on ``127.0.0.1:local_port`` and carries each connection to ``host:port`` on the cluster."""

    def __init__(self, transport: "ForwardingTransport", host: str, port: int, local_port: int = 0) -> None:
        self.transport = transport
        self.host = host
        self.port = port
        self._closed = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._listener.bind(("127.0.0.1", local_port))
        except OSError as exc:
            self._listener.close()
            raise TransportError(f"cannot listen on 127.0.0.1:{local_port} ({exc.strerror or exc}); "
                                 "pick another local port") from exc
        self.dropped = 0
        """How many forwarded connections the cluster's side ended (a dropped link, or nothing listening any more)."""
        self._listener.listen(16)
        self.local_port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name=f"betty-forward-{self.local_port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<local port>``."""
        return f"http://127.0.0.1:{self.local_port}"

    def close(self) -> None:
        """Stop listening and end every forwarded connection; closing twice is fine."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(5)

    def __enter__(self) -> "PortForward":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            threading.Thread(target=self._carry, args=(client,), name="betty-forward-conn", daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        try:
            channel = self.transport.open_channel(self.host, self.port)
        except TransportError:
            client.close()  # nothing listens there (yet): the caller sees a closed connection
            return
        with client:
            try:
                if _pump(client, channel, self._closed) and not self._closed.is_set():
                    self.dropped += 1
            finally:
                with contextlib.suppress(OSError, EOFError, SSHException):  # a dropped link cannot say goodbye
                    channel.close()


def _pump(client: socket.socket, channel: Any, closed: threading.Event) -> bool:
    """Copy bytes both ways until either side ends or the forward is closed; whether the cluster's side ended it."""
    while not closed.is_set():
        try:
            readable, _, _ = select.select([client, channel], [], [], 0.5)
        except (OSError, ValueError):
            return True  # the channel's link is gone under it
        for source, sink in ((client, channel), (channel, client)):
            if source not in readable:
                continue
            try:
                data = source.recv(_CHUNK)
            except (OSError, EOFError, SSHException):
                return source is channel
            if not data:
                return source is channel
            try:
                sink.sendall(data)
            except (OSError, EOFError, SSHException):
                return sink is channel
    return False
