"""What the model is shown of a session's tools: a small core first, the rest when it asks.

Thirty tool schemas are about ten thousand tokens: more than an 8k-context model holds, and
most of a small model's attention. A session with more than :data:`ALL_AT_ONCE` tools offers its model the :data:`CORE_TOOLS` it has
(the everyday reads, submitting, the GPU estimate) plus :data:`MORE_TOOLS`, whose one argument
lists the others by name; asking for some (or calling one by name) shows them from the next
request on. Tools only ever join the offer, so the request stays the same from one model turn to
the next and a server's prompt cache holds.

The schemas the model sees are :func:`model_schema`: the tool's own, without what only a
validator needs (titles, length limits, ``null`` alternatives) and without the properties a
tool marks :data:`~betty_jupyter.agent.models.ADVANCED_FIELD` (they keep their defaults; a person's call may still set them).
What the model is *allowed* to call is unchanged: the session's registry, decided by the gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..json_text import parse_json
from .models import ADVANCED

if TYPE_CHECKING:
    from .registry import ToolRegistry
    from .tools.base import Tool

CORE_TOOLS = ("cluster_queue", "cluster_history", "cluster_partitions", "cluster_why", "job_logs",
              "gpu_estimate", "cluster_submit")
"""Offered from the first request: what most questions need (in the registry's order when shown)."""
FIRST_REQUEST_TOKENS = 4096
"""The most the first request (system prompt and offered tool schemas) may take, in tokens: half of an 8k context."""
MIN_CONTEXT = 2 * FIRST_REQUEST_TOKENS
"""The least context a model server needs for Betty: the first request, a reply, and some history."""
ALL_AT_ONCE = 10
"""A session with this many tools or fewer (an automation's, a helper's) is offered them all from the start."""
MORE_TOOLS = "more_tools"
"""The name of the offer's own tool: lists the tools not shown yet and adds them."""
_VALIDATOR_ONLY = ("title", "maxLength", "minLength", "maxItems", "minItems")


class ToolOffer:
    """The tools one session's model is shown now; it only grows."""

    def __init__(self, registry: "ToolRegistry", progressive: bool = True, notes: Mapping[str, str] | None = None) -> None:
        """``progressive`` False offers every tool at once; ``notes`` are told with a tool when it is added
        (``cluster_run``'s allowlist)."""
        self._registry, self._notes = registry, dict(notes or {})
        self._offerable = [tool.name for tool in registry if not tool.person_only]
        """The tools a model may be shown: never one only a person calls."""
        names = self._offerable
        core = [name for name in names if name in CORE_TOOLS]
        everything = not progressive or len(names) <= ALL_AT_ONCE
        self._shown: set[str] = set(names) if everything else set(core)
        self._schemas: list[dict[str, Any]] | None = None
        """The tools list last made; made again only when a tool joins (every model turn sends it)."""

    @property
    def hidden(self) -> list[str]:
        """The session's tools not shown to the model yet, in the registry's order."""
        return [name for name in self._offerable if name not in self._shown]

    def shown(self, name: str) -> bool:
        """Whether ``name`` is offered now."""
        return name in self._shown

    def show(self, names: Iterable[str]) -> list[str]:
        """Offer ``names`` (those of the session's tools) from now on; the ones newly shown."""
        added = [name for name in dict.fromkeys(names) if name in self._offerable and name not in self._shown]
        self._shown.update(added)
        if added:
            self._schemas = None
        return added

    def schemas(self) -> list[dict[str, Any]]:
        """The ``tools=[…]`` list for the next request: the shown tools, then ``more_tools`` while any are hidden
        (the same list until a tool joins; do not change it)."""
        if self._schemas is None:
            shown = [model_schema(tool) for tool in self._registry if tool.name in self._shown]
            hidden = self.hidden
            self._schemas = shown + ([_more_tools_schema(hidden)] if hidden else [])
        return self._schemas

    def answers(self, name: str) -> bool:
        """Whether a call of ``name`` is the offer's own (``more_tools``, unless the session has a tool of that name):
        then :meth:`answer` answers it, and it runs nothing."""
        return name == MORE_TOOLS and name not in self._registry

    def own_arguments(self) -> dict[str, tuple[str, ...]]:
        """The offer's own tools and their argument names, as a call may spell them in its text."""
        return {} if MORE_TOOLS in self._registry else {MORE_TOOLS: ("tools",)}

    def answer(self, arguments: str) -> str:
        """What a ``more_tools`` call is told: the hidden tools, or which it asked for are now offered."""
        try:
            value = parse_json(arguments or "{}")
        except ValueError:
            value = {}
        asked = value.get("tools") if isinstance(value, dict) else None
        if not asked:
            return "Tools you can add (call more_tools with their names, or call one directly):\n" + "\n".join(
                f"- {name}: {self._registry.get(name).summary()}" for name in self.hidden)
        names = [str(name) for name in asked] if isinstance(asked, list) else [str(asked)]
        unknown = [name for name in names if name not in self._registry]
        added = self.show(names)
        them = "it" if len(added) == 1 else "them"
        told = f"Added {', '.join(added)}: call {them} now." if added else "Those tools were already offered."
        told += "".join(f"\n\n{self._notes[name]}" for name in added if name in self._notes)
        if unknown:
            told += f" Not tools of this session: {', '.join(repr(name[:64]) for name in unknown[:5])}."
        return told


def model_schema(tool: "Tool[Any]") -> dict[str, Any]:
    """``tool``'s schema as the model is shown it: only what a model needs to write a call, and its tier in words."""
    schema = tool.schema()
    function = schema["function"]
    parameters = _compact(_inlined(function["parameters"]))
    parameters.pop("description", None)  # the tool's description says it
    function["parameters"] = parameters
    function["description"] = " ".join(part for part in (tool.description, tool.asks()) if part)
    return schema


def _compact(node: Any) -> Any:
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        single = next(option for option in options if option != {"type": "null"})
        node = {**single, **{k: v for k, v in node.items() if k != "anyOf"}}  # the field's own words win
    compact: dict[str, Any] = {}
    for key, value in node.items():
        if key in _VALIDATOR_ONLY or (key == "default" and value is None) or key == ADVANCED:
            continue
        if key == "properties" and isinstance(value, dict):
            value = {name: prop for name, prop in value.items() if not (isinstance(prop, dict) and prop.get(ADVANCED))}
        compact[key] = _compact(value) if key != "properties" else {n: _compact(p) for n, p in value.items()}
    return compact


def _inlined(parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` with each ``#/$defs/…`` reference replaced by what it names (small models read no ``$ref``)."""
    defs = parameters.get("$defs", {})

    def inline(node: Any, depth: int) -> Any:
        if isinstance(node, list):
            return [inline(item, depth) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs and depth < 8:
            node = {**defs[ref[8:]], **{k: v for k, v in node.items() if k != "$ref"}}
            return inline(node, depth + 1)
        return {key: inline(value, depth) for key, value in node.items() if key != "$defs"}

    return inline(parameters, 0)  # type: ignore[no-any-return]


def _more_tools_schema(hidden: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": MORE_TOOLS,
        "description": "Betty's other tools: sweeps, notebooks, the wiki, read-only commands, cancelling, status, "
                       "GPU advice and more. Call with no arguments to list them, or name the ones to add.",
        "parameters": {"type": "object", "additionalProperties": False, "properties": {
            "tools": {"type": "array", "items": {"type": "string", "enum": hidden},
                      "description": "the tools to add (leave out to list them)"}}},
    }}

