"""``SSH_ASKPASS`` for the ``openssh`` transport: both ends of how ssh's prompt reaches the person.

* :class:`AskpassListener` runs in Betty: a Unix socket in a private (0700) directory, and a
  small program there that ``ssh`` runs as ``SSH_ASKPASS``; each question that arrives goes to
  :func:`~betty_jupyter.transport.login.ask`.
* :func:`main` is that program: ``ssh`` runs it with the prompt as its one argument and reads
  the answer from its stdout. It asks over the socket named in ``$BETTY_ASKPASS_SOCKET`` and
  prints what the person typed, nowhere else. Exit status 1 tells ssh nobody answered.

The protocol is one JSON line each way: ``{"prompt", "echo"}``, then ``{"answer"}`` or ``{"error"}``.
The program imports only the standard library and this module: it runs while a login waits.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import tempfile
import threading

from ..errors import TransportError
from .login import LoginQuestion, ask


def main(argv: list[str]) -> int:
    """Ask the Betty process ``argv[1]`` and print its answer for ssh."""
    prompt = argv[1] if len(argv) > 1 else ""
    if os.environ.get("SSH_ASKPASS_PROMPT") == "none":
        return 0  # a notice ("confirm user presence for key …"): ssh does not wait for an answer
    path = os.environ.get("BETTY_ASKPASS_SOCKET", "")
    if not path:
        print("betty askpass: no BETTY_ASKPASS_SOCKET; run by Betty's ssh only", file=sys.stderr)
        return 1
    question = {"prompt": prompt, "echo": os.environ.get("SSH_ASKPASS_PROMPT") == "confirm"}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(path)
            connection.sendall(json.dumps(question).encode() + b"\n")
            reply = bytearray()
            while not reply.endswith(b"\n"):
                chunk = connection.recv(4096)
                if not chunk:
                    break
                reply.extend(chunk)
        answer = json.loads(reply)
    except (OSError, ValueError) as exc:
        print(f"betty askpass: cannot reach Betty: {exc}", file=sys.stderr)
        return 1
    if not isinstance(answer, dict) or not isinstance(answer.get("answer"), str):
        reason = answer.get("error") if isinstance(answer, dict) else None
        print(f"betty askpass: {reason or 'no answer'}", file=sys.stderr)
        return 1
    sys.stdout.write(answer["answer"] + "\n")
    return 0


class AskpassListener:
    """A private Unix socket that ``betty_jupyter.transport.askpass`` (ssh's ``SSH_ASKPASS``) asks through."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._directory = tempfile.mkdtemp(prefix="betty-askpass-")  # 0700: only this user may ask or answer
        self.socket_path = os.path.join(self._directory, "socket")
        self.program = os.path.join(self._directory, "askpass")
        with open(self.program, "w") as script:
            script.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m betty_jupyter.transport.askpass \"$@\"\n")
        os.chmod(self.program, 0o700)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.socket_path)
        self._server.listen(4)
        self.refusal: TransportError | None = None  # why the last question got no answer
        self.asked: list[str] = []  # the prompts, never the answers
        self._thread = threading.Thread(target=self._serve, name=f"betty-askpass-{cluster}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            request = _read_line(connection)
            try:
                asked = json.loads(request)
                question = LoginQuestion(self.cluster, str(asked["prompt"]), echo=bool(asked.get("echo", False)))
                if self.refusal is not None:
                    raise self.refusal  # ssh asks again after a refusal: the person already said no
                self.asked.append(question.prompt)
                reply = {"answer": ask(question)}
            except (ValueError, KeyError, TypeError):
                reply = {"error": "malformed question"}
            except TransportError as nobody:
                self.refusal = nobody
                reply = {"error": str(nobody)}
            try:
                connection.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass

    def close(self) -> None:
        """Stop listening and remove the socket and the program."""
        try:
            self._server.close()
        finally:
            for path in (self.socket_path, self.program):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            try:
                os.rmdir(self._directory)
            except OSError:
                pass


def _read_line(connection: socket.socket, limit: int = 65536) -> bytes:
    data = bytearray()
    while b"\n" not in data and len(data) < limit:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data.extend(chunk)
    return bytes(data.split(b"\n", 1)[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
