"""Approval rules: ``tool`` or ``tool(arg=glob)`` patterns in ordered ``deny``, ``ask`` and ``allow`` lists.

The person's rules (``BettyConfig.rules``) and the site's (its policy file's ``tools``) are written
alike and matched alike; :mod:`.policy` decides with them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Iterable, Mapping, Sequence

from ..errors import ConfigError

RULE_LISTS = ("deny", "ask", "allow")

Call = tuple[str, Mapping[str, Any]]
"""A tool's name and the arguments its rules see."""

_RULE = re.compile(r"^\s*([A-Za-z0-9_*?\[\]-]+)\s*(?:\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*\))?\s*$", re.S)


@dataclass(frozen=True)
class Rule:
    """``tool`` or ``tool(arg=glob)``."""

    tool: str
    arg: str | None = None
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Rule":
        """A rule from its text; ConfigError saying the expected shape."""
        match = _RULE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ConfigError(f"rule {text!r} is not 'tool' or 'tool(argument=pattern)', e.g. "
                              "'cluster_run(command=squeue*)'")
        tool, arg, pattern = match.groups()
        return cls(tool, arg, pattern)

    def matches(self, tool: str, args: Mapping[str, Any]) -> bool:
        """Whether this rule covers a call of ``tool`` with ``args``."""
        if not fnmatchcase(tool, self.tool):
            return False
        if self.arg is None:
            return True
        value = args.get(self.arg)
        return value is not None and fnmatchcase(_text(value), self.pattern or "")

    def __str__(self) -> str:
        return self.tool if self.arg is None else f"{self.tool}({self.arg}={self.pattern})"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class Rules:
    """The person's ordered ``deny``, ``ask`` and ``allow`` lists."""

    deny: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    allow: tuple[Rule, ...] = ()

    @classmethod
    def from_config(cls, data: Mapping[str, Sequence[str]] | None) -> "Rules":
        """Rules from plain configuration ``{"deny": [...], "ask": [...], "allow": [...]}``."""
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError("rules must be a mapping with the lists deny, ask and allow")
        unknown = set(data) - set(RULE_LISTS)
        if unknown:
            raise ConfigError(f"rules have unknown lists {', '.join(sorted(unknown))}; use deny, ask and allow")
        lists = {}
        for name in RULE_LISTS:
            items = data.get(name) or []
            if isinstance(items, str):
                raise ConfigError(f"rules.{name} must be a list of patterns, not one string")
            lists[name] = tuple(Rule.parse(item) for item in items)
        return cls(**lists)

    @staticmethod
    def first(rules: Iterable[Rule], tool: str, args: Mapping[str, Any]) -> Rule | None:
        """The first rule of ``rules`` that covers the call."""
        return next((rule for rule in rules if rule.matches(tool, args)), None)

    @staticmethod
    def covering(rules: Iterable[Rule], calls: Sequence[Call]) -> str | None:
        """``deny cluster_run(…)``-style text for the first rule that covers one of ``calls``, or None.

        ``calls[0]`` is the call itself; a later one is a read made on its behalf, and is named.
        """
        for rule in rules:
            for index, (tool, args) in enumerate(calls):
                if rule.matches(tool, args):
                    return str(rule) if index == 0 else f"{rule} (it covers the read {_shown(tool, args)})"
        return None



def _shown(tool: str, args: Mapping[str, Any]) -> str:
    text = " ".join(_text(value) for value in args.values())
    return f"{tool} {text if len(text) <= 120 else text[:110] + '…'}"
