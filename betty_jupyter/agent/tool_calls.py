"""Tool calls as open models really write them, read one way before the gate sees them.

A serving stack turns a model's call into the reply's ``tool_calls`` field only when its parser
knows the model's format (vLLM's ``--tool-call-parser``, llama.cpp's ``--jinja`` templates,
Ollama's per-model templates). Otherwise the call arrives as text in the reply:

- ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` (Qwen, Hermes, and the templates that follow them),
- ``<|python_tag|>{"name": …, "parameters": {…}}`` (Llama 3.x),
- a fenced ```` ```json ```` block, or the bare JSON object as the whole reply,
- XML: ``<function><name>…</name><arguments>…</arguments></function>`` or Qwen3-Coder's
  ``<function=…><parameter=…>…</parameter></function>`` (arguments as JSON or one level of elements),

with ``arguments``/``parameters`` an object or JSON text, and a list of such objects for several
calls; or, from a small model that explains what it would do, the arguments alone in one JSON
block beside the name of the one tool they fit (``use `gpu_estimate` with {"model": …}``). :func:`read_reply` finds the calls in those forms, **only to tools the session has**
(anything else is left as text), and takes them out of the reply's text: a reply that was only
a call is not an answer to the person. Arguments whose JSON is broken in a way that has one
reading (a trailing comma, missing closing brackets at the end, a code fence, a raw line break
inside a string, a Python dict literal) are repaired by :func:`repaired_json`; anything else reaches the tool as it came and is
refused there in one line, which the model is told. The calls found are then decided exactly
as native ones: the same parse, policy, tiers, cards and action log.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Collection, Iterator, Mapping

from ..json_text import parse_json
from .llm import Reply, ToolCallRequest

_TAGGED = re.compile(r"<(tool_call|function_call|tools)>\s*(.*?)\s*(?:</\1>|$)", re.DOTALL)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>\s*(.*?)\s*(?:<\|eom_id\|>|<\|eot_id\|>|$)", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n(.*?)\n?```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_XML_CALL = re.compile(r"<function>\s*<name>\s*([^<]{1,64}?)\s*</name>\s*(?:<(arguments|parameters)>(.*?)</\2>)?\s*"
                       r"</function>", re.DOTALL)
_XML_ATTRIBUTE_CALL = re.compile(r"<function\s+name=([\"'])([^\"'<>]{1,64})\1(?:\s+arguments=([\"'])(.*?)\3)?\s*/?>", re.DOTALL)
_XML_EQUALS_CALL = re.compile(r"<function=([^>]{1,64})>(.*?)</function>", re.DOTALL)
_XML_ELEMENT = re.compile(r"<([A-Za-z_][\w-]{0,63})>(.*?)</\1>", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([A-Za-z_][\w-]{0,63})>(.*?)</parameter>", re.DOTALL)
_ECHOED_RESULT = re.compile(r"</?tool_response>")
"""The tags a chat template puts around a tool's result, which small models copy into their answer."""
_EMPTY_WRAPPER = re.compile(r"<(tool_call|function_call|tools)>\s*</\1>")
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
CALL_OPENERS = ("<tool_call", "<function_call", "<tools>", "<|python_tag|>", "```", "{", "[")
"""How a reply that may be a call written as text begins: its text is held back from the chat until it is read."""


@dataclass(frozen=True)
class ReadReply:
    """A reply as the loop acts on it: the text for the person, and every call (native, or found in the text)."""

    text: str
    tool_calls: list[ToolCallRequest]
    tokens: int
    from_text: int = 0
    """How many of the calls were written as text."""
    repaired: int = 0
    """How many calls' arguments were repaired JSON."""

    @property
    def note(self) -> str:
        """What reading the reply took, for the chat ("" when it was read as it came)."""
        notes = []
        if self.from_text:
            notes.append(f"{self.from_text} tool call{'s' if self.from_text > 1 else ''} written as text")
        if self.repaired:
            notes.append(f"{self.repaired} call{'s' if self.repaired > 1 else ''} with broken JSON repaired")
        return "read the model's reply: " + ", ".join(notes) if notes else ""


def read_reply(reply: Reply, tools: Mapping[str, Collection[str]]) -> ReadReply:
    """``reply`` with calls written as text turned into calls and broken argument JSON repaired.

    ``tools`` maps each of the session's tools to the names of its arguments: only calls to them are read.
    """
    calls, text, from_text = list(reply.tool_calls), reply.text, 0
    if not calls:
        found, text = calls_in_text(reply.text, tools)
        if not found:
            found, text = arguments_beside_a_tool(reply.text, tools)
        calls, from_text = found, len(found)
    repaired = 0
    for call in calls:
        fixed = _repaired_arguments(call.arguments)
        if fixed is not None:
            call.arguments, repaired = fixed, repaired + 1
    return ReadReply(_ECHOED_RESULT.sub("", text).strip(), calls, reply.tokens, from_text, repaired)


def calls_in_text(text: str, tools: Collection[str]) -> tuple[list[ToolCallRequest], str]:
    """The calls to ``tools`` written in ``text``, and the text left when they are taken out."""
    calls: list[ToolCallRequest] = []
    spans: list[tuple[int, int]] = []
    for start, end, body, tagged in _candidates(text):
        if any(start < done_end and end > done_start for done_start, done_end in spans):
            continue  # inside a form already read (a fence within a tag)
        found = _calls_in(body, tools, tagged)
        if found:
            calls.extend(found)
            spans.append((start, end))
    for start, end, call in _xml_calls(text, tools):
        if not any(start < done_end and end > done_start for done_start, done_end in spans):
            calls.append(call)
            spans.append((start, end))
    if not calls:
        return [], text
    left, at = [], 0
    for start, end in sorted(spans):
        left.append(text[at:start])
        at = end
    left.append(text[at:])
    return calls, _EMPTY_WRAPPER.sub("", "".join(left)).strip()


def _xml_calls(text: str, tools: Collection[str]) -> Iterator[tuple[int, int, ToolCallRequest]]:
    """Calls to ``tools`` written as XML, with their places; their arguments as JSON or one level of elements."""
    for match in _XML_CALL.finditer(text):
        arguments = _xml_arguments(match.group(3) or "", _XML_ELEMENT)
        if match.group(1) in tools and arguments is not None:
            yield match.start(), match.end(), _request(match.group(1), arguments)
    for match in _XML_ATTRIBUTE_CALL.finditer(text):
        value = repaired_json(match.group(4)) if match.group(4) and match.group(4).strip() else {}
        if match.group(2).strip() in tools and isinstance(value, dict):
            yield match.start(), match.end(), _request(match.group(2).strip(), value)
    for match in _XML_EQUALS_CALL.finditer(text):
        arguments = _xml_arguments(match.group(2), _XML_PARAMETER)
        if match.group(1).strip() in tools and arguments is not None:
            yield match.start(), match.end(), _request(match.group(1).strip(), arguments)


def _xml_arguments(body: str, element: re.Pattern[str]) -> dict[str, Any] | None:
    """``{"a": 1}`` from a JSON body, or ``{"a": "1"}`` from ``<a>1</a>``; None when the body is neither."""
    if not body.strip():
        return {}
    if body.strip()[:1] == "{":
        value = repaired_json(body)
        return value if isinstance(value, dict) else None
    pairs = element.findall(body)
    if not pairs or element.sub("", body).strip():
        return None  # text outside the elements: not arguments
    arguments: dict[str, Any] = {}
    for key, value in pairs:
        text = value.strip()
        parsed = repaired_json(text) if text[:1] in "[{" else None
        arguments[key] = parsed if parsed is not None else text
    return arguments


def _request(name: str, arguments: dict[str, Any]) -> ToolCallRequest:
    return ToolCallRequest(call_id=f"call_{uuid.uuid4().hex[:12]}", name=name,
                           arguments=json.dumps(arguments, ensure_ascii=False))


def arguments_beside_a_tool(text: str, tools: Mapping[str, Collection[str]]) -> tuple[list[ToolCallRequest], str]:
    """The call a reply spells as one tool's name and, in one JSON block, arguments that all are that tool's; and
    the text left. Nothing when the reply names no tool or several, has no such block or several, or the block
    holds anything the tool does not take."""
    blocks = [(match.start(), match.end(), match.group(1)) for match in _FENCED.finditer(text)]
    if not blocks and text.strip()[:1] == "{":
        blocks = [(0, len(text), text.strip())]
    if len(blocks) != 1:
        return [], text
    start, end, body = blocks[0]
    arguments = repaired_json(body)
    outside = text[:start] + text[end:]
    named = [name for name in tools if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", outside)]
    if not isinstance(arguments, dict) or len(named) != 1 or not set(arguments) <= set(tools[named[0]]):
        return [], text
    return [_request(named[0], arguments)], outside.strip()


def _candidates(text: str) -> Iterator[tuple[int, int, str, bool]]:
    """Every place a call may be written (tagged, after Llama's python tag, fenced, or the whole reply), and
    whether the form itself says it is a call (a tag): then a call to a tool the session lacks is still a call,
    refused by name, rather than an answer."""
    for pattern, tagged in ((_TAGGED, True), (_PYTHON_TAG, True), (_FENCED, False)):
        for match in pattern.finditer(text):
            yield match.start(), match.end(), match.group(match.lastindex or 1), tagged
    stripped = text.strip()
    if stripped[:1] in "{[":
        yield 0, len(text), stripped, False


def _calls_in(body: str, tools: Collection[str], tagged: bool) -> list[ToolCallRequest]:
    value = repaired_json(body)
    items = value if isinstance(value, list) else [value]
    calls = [_call(item, tools, tagged) for item in items]
    if not calls or any(call is None for call in calls):
        return []  # all of it is calls, or none of it is: a list mixing calls and data is an answer
    return [call for call in calls if call is not None]


def _call(item: Any, tools: Collection[str], tagged: bool = False) -> ToolCallRequest | None:
    """One call from its JSON object, in any of the spellings models use; None when it is not a call to ``tools``
    (``tagged``: to any tool name, since the form says it is a call)."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # {"type": "function", "function": {"name": …, "arguments": …}}
        item = item["function"]
    name = item.get("name", item.get("tool", item.get("tool_name")))
    if not isinstance(name, str) or not (name in tools or (tagged and _TOOL_NAME.fullmatch(name))):
        return None
    arguments: Any = next((item[key] for key in ("arguments", "parameters", "args", "input") if key in item), {})
    if isinstance(arguments, str):
        text = arguments
    elif isinstance(arguments, dict):
        text = json.dumps(arguments, ensure_ascii=False)
    else:
        return None
    extra = set(item) - {"name", "tool", "tool_name", "arguments", "parameters", "args", "input", "type", "id"}
    if extra:
        return None  # an object with other fields is data that names a tool, not a call
    return ToolCallRequest(call_id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=text)


def repaired_json(text: str) -> Any:
    """The JSON value ``text`` holds, repaired where the repair has one reading; None when it holds none.

    Tried in order: as it is; without a surrounding code fence; without trailing commas; with
    the closing brackets a cut-off reply left out; as a Python literal (single quotes, True/None).
    """
    body = text.strip()
    fence = _FENCED.fullmatch(body)
    if fence:
        body = fence.group(1).strip()
    for attempt in (body, _TRAILING_COMMA.sub(r"\1", body)):
        for candidate in (attempt, _closed(attempt)):
            if candidate is None:
                continue
            try:
                return parse_json(candidate, strict=False)
            except ValueError:
                pass
    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return value if isinstance(value, (dict, list)) else None


def call_key(call: ToolCallRequest) -> str:
    """The call as one text: its tool and its arguments with keys sorted, so the same call spelt twice is one key."""
    try:
        arguments = json.dumps(parse_json(call.arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except ValueError:
        arguments = call.arguments
    return f"{call.name}\n{arguments}"


def _repaired_arguments(arguments: str) -> str | None:
    """New JSON text for a call's arguments when they needed a repair (None: they parse, or cannot be repaired)."""
    if not arguments.strip():
        return None
    try:
        parse_json(arguments)
        return None
    except ValueError:
        pass
    value = repaired_json(arguments)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None


def _closed(text: str) -> str | None:
    """``text`` with the brackets still open at its end closed, when it ends outside a string; else None."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
    if in_string or not stack:
        return None
    return text + "".join(reversed(stack))


class HeldText:
    """The reply's text as it streams, held back while it may still be a call written as text.

    Text that begins like a call (:data:`CALL_OPENERS`) is not shown as it streams: the reply,
    once read, shows only what is left when its calls are taken out. Any other text goes on at once.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._passing: bool | None = None

    def take(self, piece: str) -> str:
        """What of ``piece`` to show now ("" while held)."""
        if self._passing:
            return piece
        self._text.append(piece)
        begun = "".join(self._text).lstrip()
        if not begun:
            return ""
        if any(begun.startswith(opener) for opener in CALL_OPENERS):
            self._passing = False
            return ""
        if any(opener.startswith(begun) for opener in CALL_OPENERS):
            return ""  # "<tool" may still become a call
        self._passing = True
        return "".join(self._text)

    @property
    def held(self) -> bool:
        """Whether the text so far was held back (the read reply's text is then shown whole)."""
        return self._passing is False
