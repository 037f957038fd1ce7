"""The OpenAI chat-completions wire format as a server writes it: errors, streamed chunks and whole answers.

Betty's offline demo model (:mod:`.demo_model`) answers with these, and so does the scripted
server the tests drive Betty's loop with; the ``openai`` client on the other side reads them.
"""

from __future__ import annotations

import re
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterator, Sequence

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "invalid_request_error", 429: "rate_limit_error"}

Call = tuple[str, str, str]
"""One tool call of an answer: (id, tool name, arguments as JSON text)."""


def error_body(status: int, message: str) -> dict[str, Any]:
    """An error shaped like OpenAI's."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def chunks_of(text: str) -> Iterator[str]:
    """The pieces a reply's text is streamed in: words with their spaces."""
    yield from re.findall(r"\s*\S+\s*|\s+", text)


def finish_reason(calls: Sequence[Call]) -> str:
    """``tool_calls`` when the answer calls tools, else ``stop``."""
    return "tool_calls" if calls else "stop"


def chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None = None,
          with_usage: bool = False, fingerprint: str = "fp_betty") -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``with_usage`` adds the ``usage: null`` a stream that reports usage carries."""
    body: dict[str, Any] = {
        "id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
        "system_fingerprint": fingerprint,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if with_usage:
        body["usage"] = None
    return body


def stream_chunks(completion_id: str, model: str, text: str, calls: Sequence[Call], with_usage: bool,
                  pieces: Sequence[str] | None = None, argument_piece: int = 7) -> Iterator[dict[str, Any]]:
    """Every chunk after the first (the role's) of a streamed answer: the text in ``pieces`` (default: words), each
    call's name then its arguments ``argument_piece`` characters at a time, and the finishing chunk."""
    for piece in pieces if pieces is not None else chunks_of(text):
        yield chunk(completion_id, model, {"content": piece}, with_usage=with_usage)
    for index, (call_id, name, arguments) in enumerate(calls):
        first: dict[str, Any] = {"index": index, "id": call_id, "type": "function",
                                 "function": {"name": name, "arguments": ""}}
        yield chunk(completion_id, model, {"tool_calls": [first]}, with_usage=with_usage)
        for start in range(0, len(arguments), argument_piece):
            more: dict[str, Any] = {"index": index, "function": {"arguments": arguments[start:start + argument_piece]}}
            yield chunk(completion_id, model, {"tool_calls": [more]}, with_usage=with_usage)
    yield chunk(completion_id, model, {}, finish_reason(calls), with_usage=with_usage)


def completion(completion_id: str, model: str, text: str, calls: Sequence[Call], usage: dict[str, int],
               fingerprint: str = "fp_betty") -> dict[str, Any]:
    """A whole (not streamed) ``chat.completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                                 for call_id, name, args in calls]
    elif not text:
        message["content"] = ""
    return {
        "id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
        "system_fingerprint": fingerprint,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason(calls)}],
        "usage": usage,
    }


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """The ``usage`` object."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def send_body(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
    """Answer ``handler``'s request with ``data`` whole: status, type, length, ``headers``, then the body."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)
    handler.wfile.flush()
