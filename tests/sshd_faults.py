"""Break real SSH links from the server side: find the sshd processes that serve one connection."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def _socket_inodes(server_port: int, client_port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if local_port == server_port and remote_port == client_port:
                inodes.add(fields[9])
    return inodes


def sshd_pids_for(server_port: int, client_port: int) -> list[int]:
    """Pids of the processes holding the server end of the connection from ``client_port``."""
    wanted = {f"socket:[{inode}]" for inode in _socket_inodes(server_port, client_port)}
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if links & wanted:
            pids.append(int(proc.name))
    return pids


def kill_connection(server_port: int, client_port: int) -> list[int]:
    """SIGKILL the sshd processes serving one client connection; returns their pids."""
    pids = sshd_pids_for(server_port, client_port)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def client_port(transport: object) -> int:
    """The local port of an SSHTransport's live connection."""
    client = getattr(transport, "_client")
    return int(client.get_transport().sock.getsockname()[1])
