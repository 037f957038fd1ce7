"""Betty's offline demo model: a chat-completions server on 127.0.0.1 that answers the tour's requests by plain rules.

It is no language model. It lets a demo (``scripts/demo.sh``, Binder) show Betty's chat, its
tools and its approval cards without a key or a GPU: ``llm.model: "betty-demo"`` (or
``llm.demo: true`` with no model set) makes :meth:`LLMSettings.from_config
<betty_jupyter.agent.llm.LLMSettings.from_config>` start one such server per process
(:func:`demo_endpoint`) and point the real ``openai`` client at it, so the real agent loop,
approval gate and tools run exactly as with any model.

It recognises, in the person's last message:

- the partitions (``cluster_partitions``), the person's jobs (``cluster_queue``);
- "submit a test job" (``cluster_submit``: a two-minute script on the default partition; a card to approve);
- why a job failed (``cluster_history``, then ``job_logs`` for a job named by its id) or waits (``cluster_why``);
- how much GPU memory a model needs (``gpu_estimate``, e.g. "size Llama-3.1-8B for lora");

and after a tool's result writes a short answer quoting that result. Anything else gets a
plain note of what it is, what it can do, and how to configure a real model (docs/llm.md).

The server listens on 127.0.0.1 only and answers only requests carrying its key (fresh per
process). Everything it reads is treated as hostile: bodies over :data:`MAX_BODY` bytes are
refused, only the last :data:`MAX_PROMPT` characters of a message are looked at, and what it
quotes back is escaped (:func:`~betty_jupyter.safe_text.markdown_text`, :func:`~betty_jupyter.safe_text.fenced`).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..json_text import parse_json
from ..safe_text import fenced, markdown_text
from . import chat_wire

SHOWN_NAME = "betty-demo (offline demo model, not an LLM)"
"""The model name every answer carries (the panel shows it under each reply)."""
MAX_BODY = 4_000_000
"""The largest request body read, in bytes (a long conversation's history fits)."""
MAX_PROMPT = 2000
"""Characters of a message the rules look at."""
MAX_QUOTE = 1500
"""Characters of a tool's result quoted in an answer."""

TEST_SCRIPT = """#!/bin/bash
#SBATCH --job-name=betty-test
#SBATCH --time=00:02:00
#SBATCH --ntasks=1
#SBATCH --mem=100M
echo "Hello from $(hostname), job $SLURM_JOB_ID"
sleep 5
echo done
"""
"""The test job "submit a test job" proposes: small, short, on the cluster's default partition."""

HELP = (
    "I am **Betty's offline demo model**: a few plain rules, not a language model, so I understand only these "
    "requests:\n\n"
    "- *what partitions does this cluster have?*\n"
    "- *show my jobs*\n"
    "- *submit a test job* (a card to approve, then a real two-minute job)\n"
    "- *why did my job fail?* or *why is job 123 pending?*\n"
    "- *how much GPU memory does Llama-3.1-8B need for lora?*\n\n"
    "For anything else, configure a real model (OpenAI, a vLLM server, Ollama or llama.cpp): set "
    "`BettyConfig.llm` with `base_url` and `model` in `~/.jupyter/jupyter_server_config.d/betty_llm.json` "
    "and restart JupyterLab. docs/llm.md says how."
)

_CONTEXT = re.compile(r"\n*\[context from the person's JupyterLab[^\n]*\n.*?\n\[end of context\]", re.S)
_JOB_ID = re.compile(r"\b(\d{1,10}(?:_\d{1,7})?)\b")
_MODEL_NAME = re.compile(r"\b([A-Za-z][A-Za-z0-9.]{1,30}(?:-[A-Za-z0-9.]{1,20}){0,4}-\d{1,4}(?:\.\d)?[BbMm])\b")
_METHOD = re.compile(r"\b(qlora|lora|inference|full)\b")
_USER = re.compile(r"The person is `([A-Za-z0-9._-]{1,64})` on the cluster")


@dataclass
class Answer:
    """What the demo model says: text, or tool calls ``(name, arguments)``."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def answer(request: dict[str, Any]) -> Answer:
    """The demo model's answer to one chat-completions request (never raises on any JSON object)."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)] if isinstance(
        request.get("messages"), list) else []
    offered = _offered(request.get("tools"))
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return _after_tools(messages, offered)
    prompt = _prompt_text(last.get("content")) if last.get("role") == "user" else ""
    return _rule(prompt, _user(messages), offered)


def _offered(tools: Any) -> set[str]:
    names: set[str] = set()
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"][:80])
    return names


def _prompt_text(content: Any) -> str:
    """The person's words: text parts only, the context envelope left out, bounded, lower case."""
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    text = str(content or "")[:MAX_PROMPT * 4]
    return _CONTEXT.sub("", text)[:MAX_PROMPT]


def _user(messages: list[dict[str, Any]]) -> str | None:
    system = next((m for m in messages if m.get("role") == "system"), None)
    found = _USER.search(str(system.get("content", ""))[:50_000]) if system else None
    return found.group(1) if found else None


def _rule(prompt: str, user: str | None, offered: set[str]) -> Answer:
    words = prompt.lower()

    def wanted(tool: str, args: dict[str, Any]) -> Answer:
        if tool in offered or "more_tools" in offered:  # a tool more_tools would add may be called directly
            return Answer(calls=[(tool, args)])
        return Answer(f"This session does not offer `{tool}`, which that needs.\n\n{HELP}")

    job = _JOB_ID.search(words)
    if "partition" in words:
        return wanted("cluster_partitions", {})
    if "submit" in words and ("test" in words or "demo" in words or "hello" in words):
        return wanted("cluster_submit", {"script": TEST_SCRIPT, "goal": "a test job from Betty's demo",
                                         "name": "test-job"})
    if "why" in words and ("fail" in words or "crash" in words or "die" in words or "wrong" in words):
        return wanted("cluster_history", {"job_ids": [job.group(1)]} if job else {"since": "now-7days"})
    if "why" in words and ("pend" in words or "wait" in words or "queue" in words or "start" in words):
        return wanted("cluster_why", {"job_id": job.group(1)} if job else {})
    if ("gpu" in words or "memory" in words or "size" in words or "vram" in words) and (
            _MODEL_NAME.search(prompt) or "model" in words):
        named = _MODEL_NAME.search(prompt)
        method = _METHOD.search(words)
        return wanted("gpu_estimate", {"model": named.group(1) if named else "Llama-3.1-8B",
                                       "method": method.group(1) if method else "lora"})
    if re.search(r"\b(my jobs|the queue|queue|jobs)\b", words):
        return wanted("cluster_queue", {"user": user} if user else {})
    return Answer(HELP if prompt.strip() else f"I read no question there.\n\n{HELP}")


def _after_tools(messages: list[dict[str, Any]], offered: set[str]) -> Answer:
    """A short answer from the tool results since the person's last message; for "why did job N fail", the end of
    the job's error log first."""
    since = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), -1)
    called: dict[str, str] = {}
    for message in messages[since + 1:]:
        for item in message.get("tool_calls") or [] if isinstance(message.get("tool_calls"), list) else []:
            function = item.get("function") if isinstance(item, dict) else None
            if isinstance(function, dict):
                called[str(item.get("id"))[:100]] = str(function.get("name", ""))[:80]
    results = [(called.get(str(m.get("tool_call_id"))[:100], "a tool"), str(m.get("content") or ""))
               for m in messages[since + 1:] if m.get("role") == "tool"]
    if not results:
        return Answer(HELP)
    tool, text = results[-1]
    prompt = _prompt_text(messages[since].get("content")).lower() if since >= 0 else ""
    job = _JOB_ID.search(prompt)
    if (tool == "cluster_history" and job and len(results) == 1 and not text.startswith("error:")
            and ("job_logs" in offered or "more_tools" in offered)):
        return Answer(calls=[("job_logs", {"job_id": job.group(1), "stream": "err", "lines": 20})])
    if tool == "job_logs" and len(results) == 2 and results[0][0] == "cluster_history":
        return Answer(f"{_from_result(*results[0], signed=False)}\n\n{_from_result(tool, text)}")
    return Answer(_from_result(tool, text))


def _from_result(tool: str, text: str, signed: bool = True) -> str:
    lines = text.strip().splitlines() or [""]
    first = markdown_text(lines[0][:300])
    rest = "\n".join(lines[1:]).strip()
    quoted = fenced(rest[:MAX_QUOTE] + ("\n…" if len(rest) > MAX_QUOTE else ""), "text") if rest else ""
    if text.startswith("error:") or "did not run" in text[:400] or "not approved" in text[:400]:
        return f"That did not work out: {first}\n\n(Betty's offline demo model: I only quote what the tool said.)"
    lead = {
        "cluster_partitions": f"This cluster has {first}.",
        "cluster_queue": f"Your jobs in the queue: {first}.",
        "cluster_submit": f"{first[:1].upper()}{first[1:]}. The Jobs tab follows it; ask *show my jobs* to see it "
                          "in the queue.",
        "cluster_history": f"From accounting: {first}. With a job's id (*why did job 123 fail?*) I add the end of "
                           "its error log.",
        "job_logs": f"The end of its error log: {first}",
        "cluster_why": f"Why it waits: {first}",
        "gpu_estimate": f"GPU memory: {first}.",
    }.get(tool, f"`{markdown_text(tool)}` answered: {first}")
    if tool == "cluster_submit":
        quoted = ""  # its first line says it all; the card and the tool's row show the rest
    shown = f"{lead}\n\n{quoted}" if quoted else lead
    return f"{shown}\n\n_Betty's offline demo model wrote this from the tool's result._" if signed else shown


# ----- the server ------------------------------------------------------------------------------------------------


class DemoServer:
    """The demo model on 127.0.0.1, answering only requests with its key; serves in a daemon thread."""

    def __init__(self) -> None:
        self.key = secrets.token_urlsafe(32)
        handler = type("DemoHandler", (_Handler,), {"server_key": self.key})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="betty-demo-model", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


_running: DemoServer | None = None
_lock = threading.Lock()


def demo_endpoint() -> tuple[str, str]:
    """This process's demo model (started on the first call): its ``base_url`` and key."""
    global _running
    with _lock:
        if _running is None:
            _running = DemoServer()
        return _running.base_url, _running.key


class _Handler(BaseHTTPRequestHandler):
    server_key: str
    protocol_version = "HTTP/1.0"  # one request per connection: a stream ends when the connection closes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/models":
            self._json(404, chat_wire.error_body(404, "no such route"))
            return
        self._json(200, {"object": "list", "data": [
            {"id": SHOWN_NAME, "object": "model", "created": 0, "owned_by": "betty"}]})

    def do_POST(self) -> None:
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up

    def _post(self) -> None:
        if not self._authorized():
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._json(404, chat_wire.error_body(404, "no such route"))
            return
        if not 0 < length <= MAX_BODY:
            self._json(413, chat_wire.error_body(413, f"the request must have a body of at most {MAX_BODY} bytes"),
                       {"x-should-retry": "false"})
            return
        try:
            request = parse_json(self.rfile.read(length))
        except (ValueError, UnicodeDecodeError):
            request = None
        if not isinstance(request, dict):
            self._json(400, chat_wire.error_body(400, "the request body is not a JSON object"),
                       {"x-should-retry": "false"})
            return
        said = answer(request)
        calls = [(f"call_demo_{secrets.token_hex(6)}", name, json.dumps(args)) for name, args in said.calls]
        ident = f"chatcmpl-demo-{secrets.token_hex(6)}"
        spent = chat_wire.usage(min(length, MAX_BODY) // 4, (len(said.text) + sum(len(c[2]) for c in calls)) // 4)
        if request.get("stream") is True:
            self._stream(ident, said.text, calls, spent, bool((request.get("stream_options") or {}).get(
                "include_usage")) if isinstance(request.get("stream_options"), dict) else False)
        else:
            self._json(200, chat_wire.completion(ident, SHOWN_NAME, said.text, calls, spent))

    def _stream(self, ident: str, text: str, calls: list[chat_wire.Call], spent: dict[str, int],
                with_usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        role = {"role": "assistant", "content": None if calls else ""}
        self._event(chat_wire.chunk(ident, SHOWN_NAME, role, with_usage=with_usage))
        for body in chat_wire.stream_chunks(ident, SHOWN_NAME, text, calls, with_usage):
            self._event(body)
        if with_usage:
            self._event({**chat_wire.chunk(ident, SHOWN_NAME, {}), "choices": [], "usage": spent})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, body: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(body).encode() + b"\n\n")
        self.wfile.flush()

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "")
        if secrets.compare_digest(given.encode(), f"Bearer {self.server_key}".encode()):
            return True
        self._json(401, chat_wire.error_body(401, "this is Betty's demo model; it answers its own server only"),
                   {"x-should-retry": "false"})
        return False

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        chat_wire.send_body(self, status, json.dumps(body).encode(), "application/json", headers)
