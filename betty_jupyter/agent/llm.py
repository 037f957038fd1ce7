"""The chat model: any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) through the `openai` client.

Streaming replies are reassembled here (text deltas as they come, tool calls from their
pieces); retries with exponential backoff on 429, 5xx, time-outs and dropped connections
are Betty's own, so a reply cut off mid-stream is retried too.

Each endpoint gets only its own key (:func:`endpoint_key`): ``$OPENAI_API_KEY`` goes only to
OpenAI itself; a server at another ``base_url`` gets the key ``llm.api_key_env`` or
``llm.api_key_file`` names, and no key at all when neither gives one.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from ..config import user_llm_file
from ..errors import ConfigError, ModelError
from .condense import estimate_tokens

log = logging.getLogger(__name__)

OPENAI_URL = "https://api.openai.com/v1"
"""OpenAI's own endpoint: the only one ``$OPENAI_API_KEY`` is sent to unless a setting names it."""
OPEN_MODEL_TEMPERATURE = 0.2
"""What Betty asks servers other than OpenAI's for: tool calls want little randomness, and open-model servers
default to 0.7–1.0."""
NO_KEY = "not-needed"
"""What the client sends when an endpoint has no key of its own (the ``openai`` client needs some text)."""

DEMO_MODEL = "betty-demo"
"""``llm.model`` for Betty's offline demo model (:mod:`.demo_model`): rules, not a language model."""


def no_model_text() -> str:
    """What a session without a model says when asked: the setting, the person's file for it, the restart, the page."""
    return (f"Betty's chat needs a model: set BettyConfig.llm = {{\"base_url\": …, \"model\": …}} (OpenAI, a vLLM "
            f"server, Ollama at http://localhost:11434/v1, a llama.cpp server, or \"betty-demo\", the offline demo "
            f"model) in {user_llm_file()}, then restart JupyterLab; docs/llm.md says how")


def uses_demo_model(llm: Mapping[str, Any]) -> bool:
    """Whether ``llm`` selects the offline demo model: ``model: "betty-demo"``, or ``demo: true`` and no model."""
    return llm.get("model") == DEMO_MODEL or (not llm.get("model") and llm.get("demo") is True)


@dataclass(frozen=True)
class LLMSettings:
    """Where the model is and how patiently to talk to it. The key is never printed."""

    model: str
    base_url: str | None = None
    api_key: str = field(default=NO_KEY, repr=False)
    summary_model: str | None = None
    timeout: float = 120.0
    max_retries: int = 3
    retry_base: float = 0.5
    stream_usage: bool = True
    reply_tokens: int = 1024
    """The most tokens one reply may take (sent as ``max_tokens``; ``max_completion_tokens`` to OpenAI)."""
    tool_choice: bool = True
    """Send ``tool_choice: "auto"`` with the tools (a server that refuses it: set ``llm.tool_choice`` false)."""
    temperature: float | None = None
    """Sent with every request when set; :meth:`from_config` sets :data:`OPEN_MODEL_TEMPERATURE` for servers other
    than OpenAI unless ``llm.temperature`` says otherwise (``null``: leave it to the server)."""

    @classmethod
    def from_config(cls, llm: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> "LLMSettings":
        """From ``BettyConfig.llm``, with the endpoint's own key (:func:`endpoint_key`)."""
        env = os.environ if environ is None else environ
        if uses_demo_model(llm):
            from .demo_model import SHOWN_NAME, demo_endpoint  # lazy: its server starts only when a session needs it

            demo_url, demo_key = demo_endpoint()
            return cls(model=SHOWN_NAME, base_url=demo_url, api_key=demo_key, max_retries=1, retry_base=0.2)
        if not llm.get("model"):
            raise ConfigError(no_model_text())
        base_url = str(llm["base_url"]) if llm.get("base_url") else None
        key = endpoint_key(llm, env)
        if key is None and is_openai(base_url):
            raise ConfigError("set OPENAI_API_KEY (or llm.api_key_env) to use OpenAI, or give llm.base_url for a local server")
        known = {"summary_model", "timeout", "max_retries", "retry_base", "stream_usage", "reply_tokens", "tool_choice",
                 "temperature"}
        extra = {name: llm[name] for name in known if name in llm}
        if "temperature" not in llm and not is_openai(base_url):
            extra["temperature"] = OPEN_MODEL_TEMPERATURE
        temperature = extra.get("temperature")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                        or not 0 <= temperature <= 2):
            raise ConfigError(f"llm.temperature must be a number from 0 to 2, or null, not {str(temperature)[:40]!r}")
        if "reply_tokens" in extra and (isinstance(extra["reply_tokens"], bool)
                                        or not isinstance(extra["reply_tokens"], int) or extra["reply_tokens"] < 16):
            raise ConfigError(f"llm.reply_tokens must be a whole number of tokens, 16 or more, "
                              f"not {str(extra['reply_tokens'])[:40]!r}")
        return cls(model=str(llm["model"]), base_url=base_url, api_key=key or NO_KEY, **extra)


def is_openai(base_url: str | None) -> bool:
    """Whether ``base_url`` is OpenAI's own endpoint (``https://api.openai.com``, or no ``base_url`` at all)."""
    if base_url is None:
        return True
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return False
    return parts.scheme == "https" and parts.hostname == "api.openai.com" and port in (None, 443) and not parts.username


def endpoint_key(llm: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """The key for the endpoint ``llm`` describes, or None when it has none of its own.

    ``api_key_file`` (a file holding the key) or ``api_key_env`` (a variable holding it) when
    the setting names one; otherwise ``$OPENAI_API_KEY``, for OpenAI's own endpoint only.
    """
    where = llm.get("base_url") or OPENAI_URL
    if llm.get("api_key_file") and llm.get("api_key_env"):
        raise ConfigError("llm has both api_key_file and api_key_env; keep the one that holds this server's key")
    if llm.get("api_key_file"):
        return _key_from_file(Path(str(llm["api_key_file"])).expanduser())
    if llm.get("api_key_env"):
        name = str(llm["api_key_env"])
        if not environ.get(name):
            log.warning("llm.api_key_env names %s, which is not set: no key is sent to %s", name, where)
        return environ.get(name) or None
    if is_openai(llm.get("base_url")):
        return environ.get("OPENAI_API_KEY") or None
    log.info("no key is sent to %s (llm.api_key_env or llm.api_key_file names one; "
             "$OPENAI_API_KEY goes to OpenAI only)", where)
    return None


def _key_from_file(path: Path) -> str:
    try:
        key = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the model server's key from llm.api_key_file {path}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from exc
    if not key or any(char.isspace() or not char.isprintable() for char in key):
        raise ConfigError(f"llm.api_key_file {path} must hold one key on one line")
    return key


@dataclass
class ToolCallRequest:
    """One tool call as the model asked for it (arguments still raw JSON text)."""

    call_id: str
    name: str
    arguments: str


@dataclass
class Reply:
    """The model's answer: text, tool calls, and the tokens it cost."""

    text: str
    tool_calls: list[ToolCallRequest]
    tokens: int


class ChatModel:
    """Chat completions with tools, streamed, retried."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._made: Any = None

    @property
    def _client(self) -> Any:
        """The OpenAI client, made on the first question: a session that only reads never imports openai."""
        if self._made is None:
            import openai  # lazy: openai is heavy; a session that asks nothing never needs it

            # Always an explicit base_url: left out, the client would take $OPENAI_BASE_URL, and the
            # OpenAI key with it, wherever that points.
            self._made = openai.AsyncOpenAI(api_key=self.settings.api_key,
                                            base_url=self.settings.base_url or OPENAI_URL,
                                            timeout=self.settings.timeout, max_retries=0)
        return self._made

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                       on_delta: Callable[[str], None], on_retry: Callable[[str], None]) -> Reply:
        """One reply; ``on_delta`` gets text as it streams, ``on_retry`` is told before a retry."""
        for attempt in range(self.settings.max_retries + 1):
            try:
                return await self._stream(messages, tools, on_delta)
            except ModelError as error:
                if not error.retryable or attempt == self.settings.max_retries:
                    raise
                on_retry(str(error))
                await asyncio.sleep(self.settings.retry_base * 2**attempt)
        raise AssertionError("unreachable")

    async def _stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                      on_delta: Callable[[str], None]) -> Reply:
        options: dict[str, Any] = {"model": self.settings.model, "messages": messages, "stream": True,
                                   **self.reply_cap(self.settings.reply_tokens)}
        if self.settings.temperature is not None:
            options["temperature"] = self.settings.temperature
        if tools:
            options["tools"] = tools
            if self.settings.tool_choice:
                options["tool_choice"] = "auto"
        if self.settings.stream_usage:
            options["stream_options"] = {"include_usage": True}
        text: list[str] = []
        calls: dict[int, ToolCallRequest] = {}
        usage = 0
        with _translated():
            stream = await self._client.chat.completions.create(**options)
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage.total_tokens
                for choice in chunk.choices:
                    _take(choice.delta, text, calls, on_delta)
        answer = "".join(text)
        tokens = usage or estimate_tokens(str(messages)) + estimate_tokens(answer + str([c.arguments for c in calls.values()]))
        return Reply(answer, [calls[index] for index in sorted(calls)], tokens)

    def reply_cap(self, tokens: int) -> dict[str, int]:
        """The option capping a reply at ``tokens``: ``max_completion_tokens`` for OpenAI, ``max_tokens`` elsewhere."""
        return {"max_completion_tokens" if is_openai(self.settings.base_url) else "max_tokens": tokens}

    async def create(self, **options: Any) -> Any:
        """One chat-completions request with ``options`` (the model is the settings'), not retried; errors as ModelError."""
        with _translated():
            return await self._client.chat.completions.create(model=self.settings.model, **options)

    async def summarise(self, text: str) -> str:
        """A short summary of earlier turns (by the summary model when one is set)."""
        with _translated():
            reply = await self._client.chat.completions.create(
                model=self.settings.summary_model or self.settings.model,
                messages=[{"role": "system", "content": "Summarise this conversation for your own later use. "
                           "Keep every job id, path, number and decision exactly; drop chatter."},
                          {"role": "user", "content": text}],
            )
        return reply.choices[0].message.content or ""


def _take(delta: Any, text: list[str], calls: dict[int, ToolCallRequest], on_delta: Callable[[str], None]) -> None:
    if delta.content:
        text.append(delta.content)
        on_delta(delta.content)
    for piece in delta.tool_calls or []:
        call = calls.setdefault(piece.index, ToolCallRequest(call_id="", name="", arguments=""))
        if piece.id:
            call.call_id = piece.id
        if piece.function is not None:
            call.name += piece.function.name or ""
            call.arguments += piece.function.arguments or ""


class _translated:
    """openai's exceptions → ModelError, once, at the boundary (retryable or not)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: object) -> None:
        import openai  # lazy: openai is heavy; a session without a model never needs it

        if exc is None or isinstance(exc, ModelError):
            return
        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
            raise ModelError(f"the model did not answer in time or the connection dropped ({type(exc).__name__})",
                             retryable=True) from exc
        if isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code == 429 or exc.status_code >= 500
            raise ModelError(f"the model's server answered {exc.status_code}: {_first_line(exc.message)}",
                             retryable=retryable) from exc
        if isinstance(exc, openai.OpenAIError):
            raise ModelError(f"the model's answer could not be read: {_first_line(str(exc))}") from exc


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]
