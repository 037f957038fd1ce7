"""Receivers for Betty's notifications on 127.0.0.1: an SMTP server and an HTTP server, each in its own thread.

Both keep what arrived and let a test wait until a number of messages have (a condition, never a fixed sleep).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import threading
import time
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class _Arrivals:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = threading.Condition()

    def add(self, item: Any) -> None:
        with self._changed:
            self.items.append(item)
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 60) -> list[Any]:
        """What arrived, once at least ``count`` things have (AssertionError after ``timeout``)."""
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.items) >= count, timeout), \
                f"{len(self.items)} of {count} arrived within {timeout} s: {self.items}"
            return list(self.items)


class HttpSink(_Arrivals):
    """An HTTP server that records every request (method, path, headers, body) and answers ``status``."""

    def __init__(self) -> None:
        super().__init__()
        self.status = 200
        self.hold = threading.Event()
        """Set: requests are held unanswered until ``released`` is set (a server that does not answer)."""
        self.released = threading.Event()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def _take(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if sink.hold.is_set():
                    sink.released.wait(30)
                status = sink.status
                if status == 200:
                    sink.add({"method": self.command, "path": self.path, "headers": dict(self.headers),
                              "body": body.decode()})
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_POST = do_PUT = _take

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


class SmtpSink(_Arrivals):
    """A small SMTP server (HELO/EHLO, MAIL, RCPT, DATA, QUIT) that keeps every message it accepts."""

    def __init__(self) -> None:
        super().__init__()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.port = 0

        async def serve() -> None:
            server = await asyncio.start_server(self._session, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._server = server
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(10), "the SMTP sink did not start"

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def say(line: str) -> None:
            writer.write(f"{line}\r\n".encode())

        say("220 sink ESMTP")
        recipients: list[str] = []
        while True:
            line = (await reader.readline()).decode(errors="replace").rstrip("\r\n")
            verb = line[:4].upper()
            if not line or verb == "QUIT":
                say("221 bye")
                break
            if verb in ("HELO", "EHLO"):
                say("250 sink")
            elif verb == "MAIL":
                recipients = []
                say("250 ok")
            elif verb == "RCPT":
                recipients.append(line.split(":", 1)[1].strip(" <>"))
                say("250 ok")
            elif verb == "DATA":
                say("354 go on")
                data = []
                while (part := (await reader.readline()).decode(errors="replace")) not in (".\r\n", ""):
                    data.append(part[1:] if part.startswith("..") else part)
                message = email.message_from_string("".join(data), policy=email.policy.default)
                self.add((recipients, message))
                say("250 kept")
            else:
                say("250 ok")
            await writer.drain()
        await writer.drain()
        writer.close()

    def messages(self) -> list[EmailMessage]:
        return [message for _, message in self.items]

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def wait_until(condition: Callable[[], bool], timeout: float = 60, what: str = "the condition") -> None:
    """Poll ``condition`` until it holds (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not hold within {timeout} s"
        time.sleep(0.05)
