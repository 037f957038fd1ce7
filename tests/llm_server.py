"""A scripted OpenAI-compatible chat server on 127.0.0.1, for testing Betty's loop with the real ``openai`` client.

::

    with ScriptedLLM([say("Hello"), call("queue", {"user": "ada"}), fail(429), say("Done")]) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="test")
        ...
        assert llm.requests[1]["messages"][-1]["role"] == "tool"

Each ``POST /v1/chat/completions`` takes the next step of the script (``fail(…, times=n)``
answers n requests before the script moves on), streamed as server-sent events when the
request says ``"stream": true``. ``GET /v1/models`` lists the one model. When the script is
used up, the answer is a 500 saying so (with ``x-should-retry: false``), so a test never hangs.

``calls_as`` makes the server answer as a model whose serving stack leaves tool calls in the
text (``"tool_call"``: Qwen/Hermes tags, ``"python_tag"``: Llama 3's, ``"fenced"``: a ```json
block, ``"bare"``: the JSON object alone) instead of the native ``tool_calls`` field.

``key`` makes it accept only ``Authorization: Bearer <key>`` (any other is a 401). ``routes`` answers
more paths, as another serving stack would: ``{"GET /props": {...}, "POST /api/show": b"..."}`` (a
JSON value is sent as JSON, bytes as they are, with 200; ``"GET /v1/models"`` replaces the model
list). ``paths`` records every request's method and path (``"GET /props"``).

Usage figures are deterministic: ``prompt_tokens`` is the length of the request's
``messages`` as JSON (sorted keys) // 4, ``completion_tokens`` the characters of the reply's
text, tool names and arguments // 4. Tool call ids are ``call_1``, ``call_2``… unless given.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

from betty_jupyter.agent import chat_wire
from betty_jupyter.agent.chat_wire import chunks_of, error_body

ARGUMENT_PIECE = 7  # characters of tool arguments per streamed chunk, so every call spans several chunks


class Step:
    """One answer of the script."""


@dataclass
class Say(Step):
    """The assistant answers with text (streamed in ``pieces`` when given, else word by word)."""

    text: str
    pieces: list[str] | None = None


@dataclass
class ToolCall:
    """One tool call: ``arguments`` is sent exactly as given (JSON text, or not)."""

    tool: str
    arguments: str
    call_id: str | None = None


@dataclass
class Calls(Step):
    """The assistant asks for one or several tool calls in one answer (with optional text first)."""

    calls: list[ToolCall]
    text: str = ""


@dataclass
class Fail(Step):
    """An HTTP error for ``times`` requests (None: every request from now on)."""

    status: int
    times: int | None = 1
    body: Any = None
    retry_after: float | None = None


@dataclass
class Stall(Step):
    """Headers and a first chunk, then silence for ``seconds``; then ``then`` is sent, or the connection drops."""

    seconds: float
    then: Step | None = None


@dataclass
class Respond(Step):
    """The step is chosen by ``fn(request_json)`` when the request arrives and answers that request only.

    An exception in ``fn`` (a failed assertion) is a 500 without retry, and its text is kept in
    ``ScriptedLLM.errors``.
    """

    fn: Callable[[dict[str, Any]], Step]


def say(text: str) -> Say:
    """The assistant says ``text``."""
    return Say(text)


def say_in(pieces: Sequence[str]) -> Say:
    """The assistant says the joined ``pieces``, streamed exactly so: one delta each."""
    return Say("".join(pieces), list(pieces))


def call(tool: str, args: dict[str, Any] | str, call_id: str | None = None) -> Calls:
    """The assistant calls ``tool``; a dict is sent as JSON, a string exactly as given."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return Calls([ToolCall(tool, arguments, call_id)])


def calls(items: Sequence[Calls | ToolCall | tuple[str, dict[str, Any] | str]], text: str = "") -> Calls:
    """Several tool calls in one answer: each a ``call(…)`` or a ``(tool, args)`` pair."""
    gathered: list[ToolCall] = []
    for item in items:
        if isinstance(item, Calls):
            gathered.extend(item.calls)
        elif isinstance(item, ToolCall):
            gathered.append(item)
        else:
            gathered.extend(call(item[0], item[1]).calls)
    return Calls(gathered, text)


def fail(status: int, times: int | None = 1, body: Any = None, retry_after: float | None = None) -> Fail:
    """Answer ``status`` for ``times`` requests (None: for ever); ``retry_after`` seconds go in ``retry-after-ms``."""
    return Fail(status, times, body, retry_after)


def stall(seconds: float, then: Step | None = None) -> Stall:
    """Stop sending for ``seconds`` after the first chunk (a stalled stream), then send ``then`` or hang up."""
    return Stall(seconds, then)


def malformed_args(tool: str, raw: str, call_id: str | None = None) -> Calls:
    """A call to ``tool`` whose arguments are ``raw`` (text that is not valid JSON)."""
    return Calls([ToolCall(tool, raw, call_id)])


def respond(fn: Callable[[dict[str, Any]], Step]) -> Respond:
    """Choose the step from the request, e.g. after checking the tool result the client sent."""
    return Respond(fn)


class ScriptedLLM:
    """A chat server on 127.0.0.1 that answers from a script and records every request body (and a digest of its key).

    A context manager: the server runs in a daemon thread between ``__enter__`` and ``__exit__``.
    """

    def __init__(self, steps: Sequence[Step] = (), model: str = "scripted-model", calls_as: str = "native",
                 key: str | None = None, routes: dict[str, Any] | None = None) -> None:
        if calls_as != "native" and calls_as not in CALL_TEXT:
            raise ValueError(f"calls_as is 'native' or one of {sorted(CALL_TEXT)}")
        self.model, self.calls_as, self.key, self.routes = model, calls_as, key, dict(routes or {})
        self.paths: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.unauthorized = 0
        self.authorization_digests: list[str] = []
        """SHA-256 of the Authorization header of every request: :meth:`received` says whether a key was sent,
        and the server keeps nothing of the key itself."""
        self._steps: list[Step] = list(steps)
        self._used: dict[int, int] = {}
        self._next_call = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, for ``openai.OpenAI(base_url=…)``."""
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not running: use it in a `with` block")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def remaining(self) -> int:
        """Steps not yet used up."""
        with self._lock:
            return len(self._steps)

    def __enter__(self) -> "ScriptedLLM":
        handler = type("Handler", (_Handler,), {"llm": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def next_step(self, request: dict[str, Any]) -> Step | None:
        """Record ``request`` and take the step that answers it (None when the script is used up)."""
        with self._lock:
            self.requests.append(request)
            if not self._steps:
                return None
            step = self._steps[0]
            if isinstance(step, Fail) and step.times is not None:
                used = self._used.get(id(step), 0) + 1
                self._used[id(step)] = used
                if used >= step.times:
                    self._steps.pop(0)
            elif not isinstance(step, Fail):
                self._steps.pop(0)
            return step

    def call_id(self, given: str | None) -> str:
        """``given``, or the next ``call_N``."""
        if given is not None:
            return given
        with self._lock:
            self._next_call += 1
            return f"call_{self._next_call}"

    def received(self, authorization: str) -> int:
        """How many requests carried exactly this Authorization header (e.g. ``"Bearer sk-…"``)."""
        with self._lock:
            return self.authorization_digests.count(_digest(authorization))

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the server is closing; True when it is closing."""
        return self._closing.wait(seconds)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is part of the tests, not an error.
        pass


@dataclass
class _Reply:
    """A step turned into what the model says."""

    text: str = ""
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments)
    pieces: list[str] | None = None

    def completion_tokens(self) -> int:
        return (len(self.text) + sum(len(name) + len(arguments) for _, name, arguments in self.calls)) // 4


class _Handler(BaseHTTPRequestHandler):
    llm: ScriptedLLM
    protocol_version = "HTTP/1.0"  # one request per connection; a stream ends when the connection closes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (a bounded read of a large answer)

    def _get(self) -> None:
        with self.llm._lock:
            self.llm.paths.append(f"GET {self.path}")
        if not self._authorized() or self._routed("GET"):
            return
        if self.path.rstrip("/") != "/v1/models":
            self._json(404, error_body(404, f"no route GET {self.path}"))
            return
        self._json(200, {"object": "list", "data": [
            {"id": self.llm.model, "object": "model", "created": 0, "owned_by": "betty-tests"}]})

    def do_POST(self) -> None:
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a time-out); nothing to answer

    def _post(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.llm._lock:
            self.llm.paths.append(f"POST {self.path}")
        if not self._authorized() or self._routed("POST"):
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._json(404, error_body(404, f"no route POST {self.path}"))
            return
        try:
            request = json.loads(body)
            assert isinstance(request, dict)
        except (ValueError, AssertionError):
            self._json(400, error_body(400, "the request body is not a JSON object"))
            return
        step = self.llm.next_step(request)
        self._answer(request, step, len(self.llm.requests))

    def _answer(self, request: dict[str, Any], step: Step | None, number: int) -> None:
        if isinstance(step, Respond):
            try:
                step = step.fn(request)
            except Exception as exc:
                message = f"respond() raised {type(exc).__name__}: {exc}"
                self.llm.errors.append(message)
                self._json(500, error_body(500, message), {"x-should-retry": "false"})
                return
        if step is None:
            self._json(500, error_body(500, f"ScriptedLLM: the script has no step left for request {number}"),
                       {"x-should-retry": "false"})
        elif isinstance(step, Fail):
            self._fail(step)
        elif isinstance(step, Stall):
            self._stall(request, step)
        elif request.get("stream"):
            self._stream(request, self._reply(step))
        else:
            self._json(200, self._completion(request, self._reply(step)))

    def _routed(self, method: str) -> bool:
        """Whether ``routes`` answers this request (and then it was answered)."""
        answer = self.llm.routes.get(f"{method} {self.path.rstrip('/')}")
        if answer is None:
            return False
        if isinstance(answer, bytes):
            self._send(200, answer, "text/plain")
        else:
            self._json(200, answer)
        return True

    def _authorized(self) -> bool:
        value = self.headers.get("Authorization", "")
        with self.llm._lock:
            self.llm.authorization_digests.append(_digest(value))
        if re.fullmatch(r"Bearer \S+", value) and (self.llm.key is None or value == f"Bearer {self.llm.key}"):
            return True
        with self.llm._lock:
            self.llm.unauthorized += 1
        self._json(401, error_body(401, "missing or malformed Authorization: Bearer header"))
        return False

    def _reply(self, step: Step) -> _Reply:
        if isinstance(step, Say):
            return _Reply(text=step.text, pieces=step.pieces)
        if isinstance(step, Calls) and self.llm.calls_as != "native":
            return _Reply(text=calls_text(step, self.llm.calls_as))
        if isinstance(step, Calls):
            return _Reply(text=step.text, calls=[(self.llm.call_id(c.call_id), c.tool, c.arguments)
                                                 for c in step.calls])
        raise TypeError(f"ScriptedLLM cannot answer with {step!r}")

    def _fail(self, step: Fail) -> None:
        body = step.body if step.body is not None else error_body(step.status, f"scripted failure {step.status}")
        headers = {} if step.retry_after is None else {"retry-after-ms": str(int(step.retry_after * 1000))}
        if isinstance(body, (dict, list)):
            self._json(step.status, body, headers)
        else:
            self._send(step.status, str(body).encode(), "text/plain", headers)

    def _stall(self, request: dict[str, Any], step: Stall) -> None:
        if not request.get("stream"):
            if self.llm.sleep(step.seconds) or step.then is None:
                return  # hang up without an answer
            self._answer(request, step.then, len(self.llm.requests))
            return
        self._start_stream()
        self._event(self._chunk(request, {"role": "assistant", "content": ""}))
        if self.llm.sleep(step.seconds) or step.then is None:
            return
        self._stream_rest(request, self._reply(step.then))

    def _stream(self, request: dict[str, Any], reply: _Reply) -> None:
        self._start_stream()
        self._event(self._chunk(request, {"role": "assistant", "content": "" if not reply.calls else None}))
        self._stream_rest(request, reply)

    def _stream_rest(self, request: dict[str, Any], reply: _Reply) -> None:
        with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        for body in chat_wire.stream_chunks(self._completion_id(), request.get("model", self.llm.model), reply.text,
                                            reply.calls, with_usage, reply.pieces, ARGUMENT_PIECE):
            self._event({**body, "system_fingerprint": "fp_scripted"})
        if with_usage:
            usage_chunk = {**self._chunk(request, {}), "choices": [], "usage": self._usage(request, reply)}
            self._event(usage_chunk)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _chunk(self, request: dict[str, Any], delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return chat_wire.chunk(self._completion_id(), request.get("model", self.llm.model), delta, finish_reason,
                               bool((request.get("stream_options") or {}).get("include_usage")), "fp_scripted")

    def _completion(self, request: dict[str, Any], reply: _Reply) -> dict[str, Any]:
        return chat_wire.completion(self._completion_id(), request.get("model", self.llm.model), reply.text,
                                    reply.calls, self._usage(request, reply), "fp_scripted")

    def _completion_id(self) -> str:
        return f"chatcmpl-scripted-{len(self.llm.requests)}"

    @staticmethod
    def _usage(request: dict[str, Any], reply: _Reply) -> dict[str, int]:
        return chat_wire.usage(len(json.dumps(request.get("messages", []), sort_keys=True)) // 4,
                               reply.completion_tokens())

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _event(self, chunk: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        chat_wire.send_body(self, status, data, content_type, headers)


def _call_object(call: ToolCall, arguments_key: str = "arguments") -> str:
    try:
        arguments: Any = json.loads(call.arguments)
    except ValueError:
        return f'{{"name": {json.dumps(call.tool)}, "{arguments_key}": {call.arguments}}}'  # broken, as the model wrote it
    return json.dumps({"name": call.tool, arguments_key: arguments})


CALL_TEXT: dict[str, Callable[[Calls], str]] = {
    "tool_call": lambda step: "\n".join(f"<tool_call>\n{_call_object(c)}\n</tool_call>" for c in step.calls),
    "python_tag": lambda step: "".join(f"<|python_tag|>{_call_object(c, 'parameters')}<|eom_id|>" for c in step.calls),
    "fenced": lambda step: "```json\n" + (_call_object(step.calls[0]) if len(step.calls) == 1 else
                                          "[" + ", ".join(_call_object(c) for c in step.calls) + "]") + "\n```",
    "bare": lambda step: _call_object(step.calls[0]) if len(step.calls) == 1 else
                         "[" + ", ".join(_call_object(c) for c in step.calls) + "]",
}
"""How a model writes its calls into its reply's text, by serving stack (see ``ScriptedLLM(calls_as=…)``)."""


def calls_text(step: Calls, form: str) -> str:
    """``step``'s calls written into the reply as ``form`` says, after the step's own text."""
    written = CALL_TEXT[form](step)
    return f"{step.text}\n{written}" if step.text else written


def from_betty(request: dict[str, Any]) -> bool:
    """Whether ``request`` comes from a person's own session rather than a helper it started (by its system prompt)."""
    return not str(request["messages"][0]["content"]).startswith("You are a helper")
