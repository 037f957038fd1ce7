"""``betty llm check``: ask a model server what Betty needs of it, and say in one line each what will work.

:func:`check_endpoint` probes, each step bounded by a time limit:

1. ``GET {base_url}/models``: the server answers, takes the key, and lists the configured model;
2. which serving stack it is and the context one request may fill, where the server says so
   (vLLM's ``max_model_len`` in its model list, llama.cpp's ``GET /props``, Ollama's
   ``POST /api/show``);
3. Betty's real first request (the system prompt and the offered tools' schemas) with a reply of
   one token: its size as the server counts it, against that context;
4. one request offering one small tool: whether the model calls it, natively or written as text;
5. a streamed reply: whether it arrives in pieces.

Every answer is the server's, so hostile: JSON is parsed with
:func:`~betty_jupyter.json_text.parse_json`, at most :data:`READ_LIMIT` bytes of a body are read,
what a finding quotes of it is clipped to one short line, and the key is in no line.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Mapping, TypeGuard, TypeVar

from .agent.llm import NO_KEY, OPENAI_URL, ChatModel, LLMSettings, is_openai
from .agent.offer import MIN_CONTEXT
from .errors import ModelError
from .json_text import parse_json
from .safe_text import terminal_line

OK, WARN, FAIL = "ok", "warn", "fail"
"""A finding's status."""
READ_LIMIT = 1 << 20
"""The most of a body the check reads (1 MiB): a larger one is reported, not read."""
CLIP = 160
"""The most characters a finding quotes of what the server said."""
PROBE_TOOL = "cluster_partitions"
PROBE_QUESTION = "What partitions does the cluster have? Use your tool."
FIRST_QUESTION = "Which of my jobs are running?"
VLLM_TOOLS = "--enable-auto-tool-choice --tool-call-parser hermes|llama3_json|mistral"

T = TypeVar("T")


@dataclass(frozen=True)
class Finding:
    """One thing the check found: its status (ok, warn, fail), what it is about, and one line saying what to do."""

    status: str
    about: str
    line: str


@dataclass(frozen=True)
class Served:
    """What the server says of itself: its serving stack and the context one request may fill (None: unknown)."""

    stack: str | None = None
    context: int | None = None


class _Stop(Exception):
    """The server cannot be used at all (unreachable, the key refused): the check ends with this finding."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.line)
        self.finding = finding


async def check_endpoint(settings: LLMSettings, key_from: str = "the configured key",
                         context_tokens: int | None = None, offer_all: bool = False, cluster: str = "cluster",
                         timeout: float = 120.0, on_progress: Callable[[str], None] | None = None) -> list[Finding]:
    """Probe the server ``settings`` point at; one :class:`Finding` per step, in order.

    ``key_from`` says where the key comes from (:func:`key_source`), for a refused key;
    ``context_tokens`` is ``llm.context_tokens``; ``offer_all`` is ``llm.offer_tools == "all"``;
    ``cluster`` names the cluster in the system prompt. Each step may take ``timeout`` seconds.
    """
    progress = on_progress or (lambda line: None)
    probe = _Probe(settings, key_from, timeout)
    findings: list[Finding] = []
    try:
        progress(f"asking {probe.models_url} for its models")
        entry, found = await probe.bounded(probe.models())
        findings.append(found)
        served, said = await probe.bounded(probe.served(entry))
        findings.extend(said)
        context, said = _context(served, context_tokens)
        findings.extend(said)
        progress("sending Betty's first request (its system prompt and tools), with a reply of one token")
        findings.append(await probe.step("first request", probe.first_request(context, offer_all, cluster,
                                                                              served.stack)))
        progress("asking the model to call a tool")
        findings.append(await probe.step("tool calls", probe.tool_call(served.stack)))
        progress("asking for a streamed reply")
        findings.append(await probe.step("streaming", probe.streaming()))
    except _Stop as stop:
        findings.append(stop.finding)
    return findings


def summary(findings: list[Finding]) -> str:
    """The last line: whether Betty can use the server, and how many warnings and failures."""
    failed = sum(finding.status == FAIL for finding in findings)
    warned = sum(finding.status == WARN for finding in findings)
    if failed:
        return f"Betty cannot use this server as it is: {_count(failed, 'failure')}, {_count(warned, 'warning')}"
    if warned:
        return f"Betty can use this server, with {_count(warned, 'warning')}"
    return "Betty can use this server"


def key_source(llm: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """Where the key for ``llm``'s server comes from, in words naming the setting (never the key)."""
    if llm.get("api_key_file"):
        return f"the key in llm.api_key_file {terminal_line(llm['api_key_file'])[:CLIP]}"
    if llm.get("api_key_env"):
        name = terminal_line(llm["api_key_env"])[:64]
        if environ.get(str(llm["api_key_env"])):
            return f"the key in ${name} (llm.api_key_env)"
        return f"no key: llm.api_key_env names ${name}, which is not set"
    if is_openai(llm.get("base_url")):
        return "the key in $OPENAI_API_KEY"
    return "no key: name the server's key with llm.api_key_env (a variable) or llm.api_key_file (a file)"


class _Probe:
    """The requests of one check, to one server."""

    def __init__(self, settings: LLMSettings, key_from: str, timeout: float) -> None:
        self.settings, self.key_from, self.timeout = settings, key_from, timeout
        self.base_url = (settings.base_url or OPENAI_URL).rstrip("/")
        self.root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        self.models_url = f"{self.base_url}/models"
        self.model = ChatModel(replace(settings, max_retries=0, timeout=timeout))

    async def bounded(self, work: Awaitable[T]) -> T:
        """``work``, or a stop when it takes longer than the time limit."""
        try:
            return await asyncio.wait_for(work, self.timeout)
        except asyncio.TimeoutError:
            raise _Stop(Finding(FAIL, "server", f"{self.base_url} did not answer within {self.timeout:g} s: "
                                                "is the server running and not overloaded?")) from None

    async def step(self, about: str, work: Awaitable[Finding]) -> Finding:
        """``work``'s finding; a time-out or a refusal is the step's own one-line failure."""
        try:
            return await asyncio.wait_for(work, self.timeout)
        except asyncio.TimeoutError:
            return Finding(FAIL, about, f"no answer within {self.timeout:g} s "
                                        "(a slow server: `--timeout` gives it longer)")
        except ModelError as error:
            if _status(error) in (401, 403):
                raise _Stop(self.refused_key(_status(error))) from None
            return Finding(FAIL, about, self.clip(_said(error)))
        except Exception as error:  # a hostile answer the client could not make sense of: one line, not a traceback
            return Finding(FAIL, about, f"the server's answer could not be read ({type(error).__name__})")

    # -- the steps ---------------------------------------------------------------------------------

    async def models(self) -> tuple[dict[str, Any], Finding]:
        """The configured model's entry in the server's list (empty when absent), and what the list says."""
        status, body = await self.http("GET", self.models_url)
        if status in (401, 403):
            raise _Stop(self.refused_key(status))
        if status == 404:
            return {}, Finding(WARN, "server", f"{self.models_url} is not there (404): "
                                              "the server may not be OpenAI-compatible, or base_url lacks /v1")
        if status != 200:
            raise _Stop(Finding(FAIL, "server", f"{self.models_url} answered {status}: {self.error_text(body)}"))
        listing = _json(body)
        data = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(data, list):
            return {}, Finding(WARN, "server", f"{self.models_url} answered, but not with a model list "
                                               f"({_why_unreadable(body)})")
        entries = [item for item in data if isinstance(item, dict)]
        names = [str(item.get("id")) for item in entries]
        mine = next((item for item in entries if item.get("id") == self.settings.model), None)
        if mine is not None:
            return mine, Finding(OK, "server", f"{self.base_url} answers and lists {self.clip(self.settings.model)}")
        listed = ", ".join(names[:5]) + (f" … ({len(names)} models)" if len(names) > 5 else "") or "no model"
        return {}, Finding(WARN, "server", self.clip(f"{self.base_url} answers but lists {listed}, "
                                                     f"not {self.settings.model}") +
                           ": set llm.model to one of them (or try it with `--model`)")

    async def served(self, entry: Mapping[str, Any]) -> tuple[Served, list[Finding]]:
        """The serving stack and its context, from what the server says of itself."""
        if is_openai(self.settings.base_url):
            return Served("OpenAI"), [Finding(OK, "serving stack", "OpenAI: its models' contexts are far larger "
                                                                   "than Betty needs")]
        length = entry.get("max_model_len")
        if length is not None:
            return _with_context("vLLM", length, "max_model_len")
        status, body = await self.http("GET", f"{self.root}/props")
        if status == 200:
            return self.llama_cpp(body)
        status, body = await self.http("POST", f"{self.root}/api/show",
                                       json.dumps({"model": self.settings.model}).encode())
        if status == 200:
            return self.ollama(body)
        return Served(), [Finding(WARN, "serving stack", "unknown (no vLLM max_model_len, llama.cpp /props or "
                                                         "Ollama /api/show): its context is unknown; set "
                                                         "llm.context_tokens to it")]

    def llama_cpp(self, body: bytes) -> tuple[Served, list[Finding]]:
        props = _json(body)
        if not isinstance(props, dict):
            return Served("llama.cpp"), [Finding(WARN, "serving stack", f"{self.root}/props answered, but "
                                                 f"{_why_unreadable(body)}: the context is unknown")]
        settings = props.get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else props.get("n_ctx")
        served, findings = _with_context("llama.cpp (llama-server)", n_ctx, "n_ctx")
        template = props.get("chat_template")
        if isinstance(template, str) and "tools" not in template:
            findings.append(Finding(WARN, "chat template", "llama.cpp's chat template does not mention tools: start "
                                    "llama-server with --jinja, with a model whose template takes tools"))
        return served, findings

    def ollama(self, body: bytes) -> tuple[Served, list[Finding]]:
        shown = _json(body)
        if not isinstance(shown, dict):
            return Served("Ollama"), [Finding(WARN, "serving stack", f"{self.root}/api/show answered, but "
                                              f"{_why_unreadable(body)}: the context is unknown")]
        info = shown.get("model_info")
        trained = next((value for key, value in info.items() if str(key).endswith(".context_length")), None) \
            if isinstance(info, dict) else None
        parameters = shown.get("parameters")
        num_ctx = re.search(r"^\s*num_ctx\s+(\d{1,9})\s*$", parameters, re.M) if isinstance(parameters, str) else None
        if num_ctx:
            return _with_context("Ollama", int(num_ctx.group(1)), "num_ctx in its Modelfile")
        holds = f" (the model holds {trained})" if _whole(trained) else ""
        return Served("Ollama"), [Finding(WARN, "serving stack", f"Ollama: its OpenAI endpoint uses Ollama's default "
                                          f"context{holds} and silently cuts what does not fit: start it with "
                                          f"OLLAMA_CONTEXT_LENGTH={MIN_CONTEXT} or more, or set num_ctx "
                                          "in a Modelfile")]

    async def first_request(self, context: int | None, offer_all: bool, cluster: str, stack: str | None) -> Finding:
        """Betty's first request as a session sends it, with a reply of one token: its size against ``context``."""
        messages, tools = first_request(offer_all, cluster)
        options: dict[str, Any] = {"messages": messages, "tools": tools, **self.model.reply_cap(1)}
        if self.settings.tool_choice:
            options["tool_choice"] = "auto"
        try:
            reply = await self.model.create(**options)
        except ModelError as error:
            if _status(error) != 400:
                raise
            refused = f"the server refused Betty's first request: {self.clip(_said(error))}"
            advice = f"; {_tools_advice(stack)}" if "tool" in str(error).lower() else ""
            return Finding(FAIL, "first request", refused + advice)
        prompt = getattr(getattr(reply, "usage", None), "prompt_tokens", None)
        if not _whole(prompt):
            return Finding(WARN, "first request", f"the server does not count its tokens (no usage.prompt_tokens); "
                                                  f"Betty's first request ({len(tools)} tools) is designed to fit "
                                                  f"in 4096")
        size = f"{prompt} tokens (system prompt and {len(tools)} tools)"
        need = prompt + self.settings.reply_tokens
        if context is None:
            return Finding(OK, "first request", f"{size}; Betty needs a context of {max(need, MIN_CONTEXT)} tokens")
        if context < need:
            return Finding(FAIL, "first request", f"{size} + a reply of {self.settings.reply_tokens} do not fit in "
                                                  f"the context of {context}: start the server with a context of "
                                                  f"{MIN_CONTEXT} tokens or more")
        if context < MIN_CONTEXT:
            return Finding(WARN, "first request", f"{size} fits in the context of {context}, with little room for "
                                                  f"the conversation: Betty needs {MIN_CONTEXT}")
        return Finding(OK, "first request", f"{size} of the context's {context}")

    async def tool_call(self, stack: str | None) -> Finding:
        """One small tool offered, one question that needs it: called natively, written as text, or not at all."""
        from .agent.tool_calls import read_reply  # lazy: the agent's modules load only for this step

        schema = next(tool for tool in first_request(False, "cluster")[1] if tool["function"]["name"] == PROBE_TOOL)
        messages = [{"role": "system", "content": "You are Betty, an assistant on a Slurm cluster. Use your tools."},
                    {"role": "user", "content": PROBE_QUESTION}]
        try:
            reply = await _capped(self.model, 256).complete(messages, [schema], lambda _: None, lambda _: None)
        except ModelError as error:
            if _status(error) == 400:
                return Finding(FAIL, "tool calls", f"the server refused a request with tools: "
                                                   f"{self.clip(_said(error))}; {_tools_advice(stack)}")
            raise
        if reply.tool_calls:
            names = {call.name for call in reply.tool_calls}
            if names == {PROBE_TOOL}:
                return Finding(OK, "tool calls", "native tool calls")
            return Finding(WARN, "tool calls", self.clip(f"the model called {', '.join(sorted(names))}, "
                                                         f"not the one tool offered ({PROBE_TOOL})"))
        read = read_reply(reply, {PROBE_TOOL: ()})
        if read.tool_calls:
            return Finding(WARN, "tool calls", f"tool calls come as text ({_written_as(reply.text)}); Betty reads "
                                               f"them ({_native_advice(stack)})")
        quoted = self.clip(reply.text.strip() or "(nothing)")
        return Finding(FAIL, "tool calls", f"the model answered without calling the tool: {quoted!r}; "
                                           "Betty acts only through tools: use a model trained for tool calling")

    async def streaming(self) -> Finding:
        """One short streamed reply: how many pieces it came in."""
        pieces: list[str] = []
        await _capped(self.model, 32).complete([{"role": "user", "content": "Say hello in five words."}], [],
                                                   pieces.append, lambda _: None)
        if len(pieces) > 1:
            return Finding(OK, "streaming", f"replies stream ({len(pieces)} pieces)")
        if not pieces:
            return Finding(WARN, "streaming", "the streamed reply was empty")
        return Finding(WARN, "streaming", "the reply came in one piece: Betty shows it only once it is whole "
                                          "(a proxy in between that buffers?)")

    # -- talking to the server ---------------------------------------------------------------------

    async def http(self, method: str, url: str, data: bytes | None = None) -> tuple[int, bytes]:
        """``method url``: the status and at most :data:`READ_LIMIT` + 1 bytes of the body; a stop if unreachable."""
        try:
            return await asyncio.to_thread(_http, method, url, self.settings.api_key, self.timeout, data)
        except (OSError, http.client.HTTPException, ValueError) as error:
            raise _Stop(Finding(FAIL, "server", f"cannot reach {self.clip(url)}: {self.clip(_reason(error))}: "
                                                "is the server running, and is llm.base_url right?")) from None

    def refused_key(self, status: int | None) -> Finding:
        return Finding(FAIL, "server", f"{self.base_url} refused the key ({status}): Betty sent {self.key_from}")

    def error_text(self, body: bytes) -> str:
        """The message of an OpenAI-style error body, else its first line; clipped."""
        value = _json(body)
        error = value.get("error") if isinstance(value, dict) else None
        message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
        text = message if isinstance(message, str) else body[:CLIP * 4].decode("utf-8", "replace")
        return self.clip((text.strip().splitlines() or ["(no text)"])[0])

    def clip(self, text: str) -> str:
        """``text`` as part of one line: the key taken out, control characters written out, at most :data:`CLIP`."""
        if self.settings.api_key != NO_KEY and len(self.settings.api_key) >= 4:
            text = text.replace(self.settings.api_key, "[key]")
        line = terminal_line(text)
        return line if len(line) <= CLIP else line[:CLIP - 1] + "…"


def first_request(offer_all: bool, cluster: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Betty's first request as a session on ``cluster`` sends it (its partitions and login not known yet):
    the messages and the offered tools' schemas."""
    # lazy: the tools and the prompt load only when a check gets this far
    from .agent.offer import ToolOffer
    from .agent.prompt import persona_text, system_prompt
    from .agent.registry import default_registry
    from .cluster.allowlist import CommandPolicy
    from .wiki import seed_dir

    offer = ToolOffer(default_registry(), progressive=not offer_all)
    prompt = system_prompt(persona_text(seed_dir()), offer, CommandPolicy(), cluster, None, None)
    return [{"role": "system", "content": prompt}, {"role": "user", "content": FIRST_QUESTION}], offer.schemas()


def _capped(model: ChatModel, tokens: int) -> ChatModel:
    """``model``'s endpoint and key with replies capped at ``tokens`` (a probe needs only a short one)."""
    return ChatModel(replace(model.settings, reply_tokens=tokens))


def _context(served: Served, configured: int | None) -> tuple[int | None, list[Finding]]:
    """The context the first request is measured against, and a finding when the setting disagrees with the server."""
    if served.context is None:
        return configured, []
    if configured is not None and configured > served.context:
        return served.context, [Finding(WARN, "context_tokens", f"llm.context_tokens is {configured}, but the server "
                                        f"holds {served.context}: set it to {served.context} or less")]
    return served.context, []


def _with_context(stack: str, value: Any, source: str) -> tuple[Served, list[Finding]]:
    if not _whole(value) or value <= 0:
        return Served(stack), [Finding(WARN, "serving stack", f"{stack}, but its {source} is not a context size "
                                       f"({terminal_line(str(value))[:40]}): the context is unknown")]
    return Served(stack, value), [Finding(OK, "serving stack", f"{stack}, context {value} tokens ({source})")]


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _json(body: bytes) -> Any:
    """The JSON value of ``body``, or None when it is too large, not JSON, or nested too deep."""
    if len(body) > READ_LIMIT:
        return None
    try:
        return parse_json(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _why_unreadable(body: bytes) -> str:
    if len(body) > READ_LIMIT:
        return f"its answer is larger than {READ_LIMIT // (1 << 20)} MiB"
    try:
        parse_json(body)
    except (ValueError, UnicodeDecodeError):
        return "its answer is not JSON"
    return "its answer is not what the server's API gives"


def _tools_advice(stack: str | None) -> str:
    """How to have a server take tools, by serving stack."""
    if stack == "vLLM":
        return f"start vLLM with {VLLM_TOOLS}, or set llm.tool_choice false"
    if stack and stack.startswith("llama.cpp"):
        return "start llama-server with --jinja"
    if stack == "Ollama":
        return "use a model whose Ollama template takes tools"
    return f"vLLM: start it with {VLLM_TOOLS}, or set llm.tool_choice false; llama.cpp: --jinja"


def _native_advice(stack: str | None) -> str:
    """What would turn calls written as text into native ones, by serving stack."""
    if stack == "vLLM":
        return "a --tool-call-parser for the model's format would make them native"
    if stack and stack.startswith("llama.cpp"):
        return "llama-server makes them native with --jinja and a chat template in the model's own call format"
    if stack == "Ollama":
        return "an Ollama template in the model's own call format would make them native"
    return "a tool-call parser for the model's format on the server would make them native"


def _written_as(text: str) -> str:
    """The form a call written as text took, in the model's own opening words."""
    for opener, form in (("<tool_call", "<tool_call> tags"), ("<function_call", "<function_call> tags"),
                         ("<tools>", "<tools> tags"), ("<|python_tag|>", "Llama's <|python_tag|>"),
                         ("```", "a fenced JSON block")):
        if opener in text:
            return form
    return "a bare JSON object"


def _status(error: BaseException) -> int | None:
    status = getattr(error.__cause__, "status_code", None)
    return status if _whole(status) else None


def _said(error: ModelError) -> str:
    """What the server said when it refused a request (its error's message), else the error's own line."""
    body = getattr(error.__cause__, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    status = _status(error)
    if isinstance(message, str) and message.strip() and status is not None:
        return f"it answered {status}: {message.strip().splitlines()[0]}"
    return str(error)


def _reason(error: BaseException) -> str:
    """Why a connection failed, in the system's words (``Connection refused``), else the error's own."""
    reason = getattr(error, "reason", None) or error
    return str(getattr(reason, "strerror", None) or reason or type(reason).__name__)


def _count(number: int, word: str) -> str:
    return f"{number} {word}{'' if number == 1 else 's'}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as it is (a status), never followed: the key goes to base_url's server only."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _http(method: str, url: str, key: str, timeout: float, data: bytes | None) -> tuple[int, bytes]:
    """One blocking request; the status and at most :data:`READ_LIMIT` + 1 bytes of the body."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url[:80]} is not an http(s) address")
    request = urllib.request.Request(url, data=data, method=method, headers={"Accept": "application/json"})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    request.add_unredirected_header("Authorization", f"Bearer {key}")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return int(response.status), response.read(READ_LIMIT + 1)
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), error.read(READ_LIMIT + 1)

