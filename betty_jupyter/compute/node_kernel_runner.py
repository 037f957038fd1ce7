"""The program a node kernel's job runs (``%betty kernel``): an IPython kernel on the compute node, watched.

Uploaded beside ``kernel.json`` (the connection file Betty wrote, with its key, mode 600 in a
directory of the person's alone) and run by the job's script in the chosen environment's
``python3``. It writes the node's address into the connection file, starts
``python -m ipykernel_launcher -f kernel.json`` (which binds its five ports there and writes
them back), checks in ``/proc/net/tcp`` that every listening port belongs to the job's own user,
then writes ``kernel.ready`` (the ports and what was checked; nothing secret).

While the kernel runs, it looks every few seconds for established connections to its ports from a
client (a client keeps its heartbeat connection open; the kernel's own connection to its shell port
does not count). When none has been seen for ``GRACE`` seconds the
kernel is stopped and the job ends: an allocation nobody reattaches to does not hold its node.
It uses the standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
LOOK_SECONDS = 3.0


def node_address() -> str:
    """The address other hosts of the cluster reach this node at: its name's, or where a name resolves to loopback
    only, the address of the interface that leads to the host the job was submitted from."""
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        address = "127.0.0.1"
    submitted_from = os.environ.get("SLURM_SUBMIT_HOST")
    if address.startswith("127.") and submitted_from:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # no packet is sent
                probe.connect((socket.gethostbyname(submitted_from), 9))
                address = probe.getsockname()[0]
        except OSError:
            pass
    return address


def sockets(state: str) -> list[tuple[int, int]]:
    """``(local port, uid)`` of this node's TCP sockets in ``state`` (``0A`` listening, ``01`` established)."""
    return [(local, uid) for local, _, uid, _ in _table(state)]


def clients(ports: set[int], kernel_pid: int) -> int:
    """How many connections to ``ports`` come from a client: not from the kernel itself (it connects to its own
    shell port), told apart by the socket of the connection's other end being one of the kernel's."""
    own = set()
    try:
        for name in os.listdir(f"/proc/{kernel_pid}/fd"):
            try:
                own.add(os.readlink(f"/proc/{kernel_pid}/fd/{name}"))
            except OSError:
                continue
    except OSError:
        pass
    table = _table("01")
    ends = {(local, remote): inode for local, remote, _, inode in table}
    return sum(1 for local, remote, _, _ in table
               if local in ports and f"socket:[{ends.get((remote, local), '')}]" not in own)


def _table(state: str) -> list[tuple[int, int, int, str]]:
    """``(local port, remote port, uid, inode)`` of this node's TCP sockets in ``state``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as file:
                lines = file.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == state:
                found.append((int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16),
                              int(fields[7]), fields[9]))
    return found


def read_ports(path: str) -> dict[str, int]:
    """The five ports once the kernel wrote them into the connection file (empty before)."""
    try:
        with open(path) as file:
            info = json.load(file)
    except (OSError, ValueError):
        return {}
    ports = {name: int(info.get(name) or 0) for name in PORTS}
    return ports if all(ports.values()) else {}


def main(argv: list[str]) -> int:
    """``node_kernel_runner.py GRACE``: run the kernel of ``kernel.json`` in this directory; its exit code."""
    grace = float(argv[1]) if len(argv) > 1 else 600.0
    with open("kernel.json") as file:
        info = json.load(file)
    info["ip"] = node_address()
    for name in PORTS:
        info[name] = 0
    descriptor = os.open("kernel.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(info, file)
    os.replace("kernel.json.tmp", "kernel.json")
    env = {name: value for name, value in os.environ.items() if name != "MPLBACKEND"}  # figures show inline
    kernel = subprocess.Popen([sys.executable, "-m", "ipykernel_launcher", "-f", "kernel.json"], env=env)
    signal.signal(signal.SIGTERM, lambda *_: kernel.terminate())
    ports: dict[str, int] = {}
    while kernel.poll() is None and not ports:
        time.sleep(0.2)
        ports = read_ports("kernel.json")
        listening = {port: uid for port, uid in sockets("0A")}
        if ports and not all(port in listening for port in ports.values()):
            ports = {}
    if kernel.poll() is not None:
        print(f"betty: the kernel exited ({kernel.returncode}) before it listened", file=sys.stderr)
        return 1
    owners = {port: uid for port, uid in sockets("0A") if port in ports.values()}
    if any(uid != os.getuid() for uid in owners.values()):
        print("betty: a kernel port is held by another user; the kernel was stopped", file=sys.stderr)
        kernel.terminate()
        return 1
    ready = {"ip": info["ip"], **ports, "host": socket.gethostname(), "pid": kernel.pid,
             "checked": "every listening port is owned by uid %d (from /proc/net/tcp)" % os.getuid()}
    with open("kernel.ready.tmp", "w") as file:
        json.dump(ready, file)
    os.replace("kernel.ready.tmp", "kernel.ready")
    print(f"betty: kernel ready on {ready['host']}; it stops after {grace:g} s without a client", flush=True)
    last_seen = time.monotonic()
    while kernel.poll() is None:
        time.sleep(LOOK_SECONDS)
        if clients(set(ports.values()), kernel.pid):
            last_seen = time.monotonic()
        elif time.monotonic() - last_seen > grace:
            print(f"betty: no client for {grace:g} s; the kernel is stopped", flush=True)
            kernel.terminate()
            try:
                kernel.wait(10)
            except subprocess.TimeoutExpired:
                kernel.kill()
            return 0
    return kernel.returncode or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
