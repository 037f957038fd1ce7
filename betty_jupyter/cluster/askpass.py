"""``SSH_ASKPASS`` for the ``openssh`` transport: hands ssh's prompt to the Betty process that started ssh.

``ssh`` runs this program with the prompt as its one argument and reads the answer from its
stdout. It asks over the private Unix socket named in ``$BETTY_ASKPASS_SOCKET`` (a directory
only this user can enter) and prints what the person typed; it never writes the answer
anywhere else. Exit status 1 tells ssh nobody answered.

Only the standard library is imported: this runs once per prompt, while a login waits.
"""

from __future__ import annotations

import json
import os
import socket
import sys


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


if __name__ == "__main__":
    sys.exit(main(sys.argv))
