"""JSON schemas Betty evaluates, checked and applied without fetching anything.

A schema may come from outside Betty's code (the model writes ``delegate_tasks``'
``result_schema``). Left to itself, jsonschema fetches a ``$ref`` it cannot find in the
document (``http://…``, ``file://…``): a schema could send context to another host or read
a local file. Every schema Betty evaluates goes through :func:`offline_validator` instead:

- its ``$schema`` (at the root and in embedded resources) names a dialect jsonschema ships
  (draft 3 to 2020-12), or is left out (2020-12);
- every ``$ref``, ``$dynamicRef`` and ``$recursiveRef`` resolves inside the document (a JSON
  pointer, an ``$anchor``, an embedded ``$id``) or to a metaschema jsonschema ships; the
  first one that does not is refused, in one line naming it, before anything is evaluated;
- the validator's registry refuses every retrieval, so even a reference this check missed
  could not fetch anything.

A schema's regular expressions (``pattern``, the names of ``patternProperties``, and the
``regex`` format where the metaschema checks one) never run on Python's backtracking engine,
where ``(a+)+$`` takes hours on a few dozen characters: they are compiled and run by RE2, whose
time is linear in the text. A pattern RE2 cannot run (backreferences, lookarounds) is refused
in one line; ``unevaluatedProperties`` beside ``patternProperties`` is refused too, since
jsonschema would match those names with Python's engine. A model's schema is at most
:data:`MAX_SCHEMA_CHARS` long, and checking one value against any schema stops after
:data:`CHECK_SECONDS` (every keyword looks at the clock), so no schema holds a thread for long.
"""

from __future__ import annotations

import json
import threading
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn
from urllib.parse import urljoin

import re2
from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError as Malformed, ValidationError, best_match
from jsonschema.validators import extend, validator_for
from jsonschema_specifications import REGISTRY
from referencing import Registry
from referencing.exceptions import InvalidAnchor, NoSuchAnchor, NoSuchResource, PointerToNowhere, Unresolvable
from referencing.jsonschema import UnknownDialect, specification_with

from .errors import SchemaError
from .json_text import nested_deeper

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Resource
    from referencing._core import Resolver

DEFAULT_DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_DEPTH = 100
"""Schemas nested deeper than this (objects and lists) are refused: checking and validating recurse per level."""
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
MAX_SCHEMA_CHARS = 20_000
"""A model's schema longer than this, written as JSON, is refused: checking a value costs time in its size."""
CHECK_SECONDS = 5.0
"""Checking one value against a schema stops after this long, with one line saying so."""
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 8 << 20  # RE2's own default: a pattern whose program needs more is refused
_HOW = "define it under $defs and refer to it as '#/$defs/<name>'; Betty never fetches a schema"


def offline_validator(schema: Any, longest: int | None = None) -> "Validator":
    """A validator for ``schema`` that fetches nothing; SchemaError saying what is wrong with it.

    ``longest`` caps the schema's length as JSON (a model's schemas: :data:`MAX_SCHEMA_CHARS`).
    """
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON schema is an object (or true/false), not {type(schema).__name__}")
    _check_depth(schema)
    if longest is not None and len(json.dumps(schema, ensure_ascii=False, default=str)) > longest:
        raise SchemaError(f"the schema is longer than {longest} characters as JSON; keep it to what "
                          "the answer must hold")
    dialect = _dialect(schema)
    cls = validator_for({"$schema": dialect})
    try:
        cls.check_schema(schema, format_checker=_LINEAR_FORMATS)
    except Malformed as error:
        if error.validator == "format" and error.validator_value == "regex":
            linear_regex(str(error.instance))  # says why in one line
        raise SchemaError(f"not a JSON schema: {error.message}") from None
    except RecursionError:
        _too_deep()
    registry = offline_registry()
    _check_references(registry, _resource(schema, dialect))
    return _linear(cls)(schema, registry=registry)


def first_problem(validator: "Validator", value: Any, whole: str = "the value",
                  seconds: float = CHECK_SECONDS) -> str | None:
    """Where ``value`` fails the validator's schema and why (``items/0: 'x' is not of type 'integer'``), or None.

    ``whole`` names the value itself when the problem is at its top. A validator from
    :func:`offline_validator` gives up after ``seconds`` (SchemaError).
    """
    _CLOCK.deadline = time.monotonic() + seconds
    try:
        problem = best_match(validator.iter_errors(value))
    except _OutOfTime:
        raise SchemaError(f"checking the value against the schema took more than {seconds:g} s; "
                          "simplify the schema (fewer anyOf/oneOf branches, less nesting)") from None
    except Unresolvable as error:
        raise SchemaError(f"the schema refers to {error.ref!r}, which is not inside it; {_HOW}") from None
    except RecursionError:
        raise SchemaError("the schema refers to itself without end (a $ref loop that never checks a value)") from None
    finally:
        _CLOCK.deadline = float("inf")
    if problem is None:
        return None
    where = "/".join(str(part) for part in problem.absolute_path) or whole
    return f"{where}: {problem.message}"


def _dialect(schema: Any) -> str:
    """The ``$schema`` of ``schema`` when jsonschema ships it (the default when absent); SchemaError otherwise."""
    if not isinstance(schema, dict) or "$schema" not in schema:
        return DEFAULT_DIALECT
    dialect = schema["$schema"]
    if not isinstance(dialect, str):
        raise SchemaError(f"$schema must be the URI of a JSON Schema draft, not {type(dialect).__name__}")
    try:
        specification_with(dialect)
    except UnknownDialect:
        raise SchemaError(f"$schema {_shown(dialect)} is not a JSON Schema draft Betty knows; leave $schema out "
                          "(draft 2020-12) or name a published draft, such as " + DEFAULT_DIALECT) from None
    return dialect


def offline_registry() -> "Registry[Any]":
    """The metaschemas jsonschema ships, and a retrieval that refuses every URI: a registry that never fetches."""
    offline: "Registry[Any]" = Registry(retrieve=_refuse)  # type: ignore[call-arg]
    combined: "Registry[Any]" = REGISTRY.combine(offline)
    return combined


def _refuse(uri: str) -> NoReturn:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy does not see through


def _resource(schema: Any, dialect: str) -> "Resource[Any]":
    return specification_with(dialect).create_resource(schema)


def _check_references(registry: "Registry[Any]", root: "Resource[Any]") -> None:
    """Resolve every reference of every subschema where it stands; SchemaError on the first that leaves the schema."""
    stack: list[tuple["Resolver[Any]", "Resource[Any]", str]] = [
        (registry.resolver_with_root(root), root, root.id() or "")]
    seen: set[str] = set()
    while stack:
        resolver, resource, base = stack.pop()
        contents = resource.contents
        if isinstance(contents, dict):
            _dialect(contents)
            _check_patterns(contents, seen)
            for keyword in REFERENCES:
                ref = contents.get(keyword)
                if not isinstance(ref, str):
                    continue
                try:
                    resolver.lookup(ref)
                except Unresolvable as error:
                    _unresolvable(keyword, ref, urljoin(base, ref), error)
        for sub in resource.subresources():
            stack.append((resolver.in_subresource(sub), sub, urljoin(base, sub.id() or "")))


def linear_regex(pattern: str) -> "re2._Regexp":
    """``pattern`` compiled by RE2 (linear time, no backtracking); SchemaError in one line when RE2 cannot run it."""
    try:
        return _compiled(pattern)
    except re2.error as error:
        why = error.args[0].decode(errors="replace") if error.args and isinstance(error.args[0], bytes) else error
        raise SchemaError(f"pattern {_shown(pattern)} is not a regular expression Betty can run ({why}); patterns "
                          "run on RE2, in linear time: no backreferences, lookahead or lookbehind") from None


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> "re2._Regexp":
    return re2.compile(pattern, _RE2_OPTIONS)


def _check_patterns(contents: dict[str, Any], seen: set[str]) -> None:
    """Compile this subschema's regular expressions with RE2; refuse what jsonschema would match with ``re``."""
    pattern = contents.get("pattern")
    if isinstance(pattern, str):
        linear_regex(pattern)
    names = contents.get("patternProperties")
    if isinstance(names, dict):
        for name in names:
            linear_regex(name)
        seen.add("patternProperties")
    if "unevaluatedProperties" in contents:
        seen.add("unevaluatedProperties")
    if {"patternProperties", "unevaluatedProperties"} <= seen:
        raise SchemaError("unevaluatedProperties cannot stand in a schema with patternProperties; "
                          "use additionalProperties beside patternProperties instead")


# ----- keywords that run regular expressions, on RE2; every keyword looks at the clock ----------------

class _OutOfTime(Exception):
    """Checking a value ran past its deadline."""


_CLOCK = threading.local()


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not linear_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if linear_regex(pattern).search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = sorted(name for name in instance if name not in properties
                    and not any(linear_regex(pattern).search(name) for pattern in patterns))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = ", ".join(repr(extra) for extra in extras)
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{names} {verb} not match any of the regexes: "
                                  + ", ".join(repr(pattern) for pattern in sorted(patterns)))
        else:
            yield ValidationError(f"Additional properties are not allowed ({names} "
                                  f"{'was' if len(extras) == 1 else 'were'} unexpected)")


_ON_RE2 = {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties}


def _timed(keyword: Callable[..., Any]) -> Callable[..., Iterator[ValidationError]]:
    def timed(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if time.monotonic() > getattr(_CLOCK, "deadline", float("inf")):
            raise _OutOfTime
        yield from keyword(validator, value, instance, schema) or ()
    return timed


@lru_cache(maxsize=None)
def _linear(cls: Any) -> Any:
    """``cls`` with its regular expressions on RE2 and every keyword on the clock."""
    keywords = {**cls.VALIDATORS, **{name: keyword for name, keyword in _ON_RE2.items() if name in cls.VALIDATORS}}
    return extend(cls, {name: _timed(keyword) for name, keyword in keywords.items()})


def _regex_format(pattern: object) -> bool:
    if isinstance(pattern, str):
        _compiled(pattern)
    return True


_LINEAR_FORMATS = FormatChecker([name for name in FormatChecker.checkers if name != "regex"])
_LINEAR_FORMATS.checks("regex", raises=re2.error)(_regex_format)


def _check_depth(schema: Any) -> None:
    if nested_deeper(schema, MAX_DEPTH):
        _too_deep()


def _unresolvable(keyword: str, ref: str, target: str, error: Exception) -> NoReturn:
    leads = f" (it leads to {_shown(target)})" if target and target != ref else ""
    if isinstance(error, (PointerToNowhere, NoSuchAnchor, InvalidAnchor)):
        raise SchemaError(f"{keyword} {_shown(ref)}{leads} points to nothing in the schema")
    raise SchemaError(f"{keyword} {_shown(ref)}{leads} is not inside the schema; {_HOW}")


def _too_deep() -> NoReturn:
    raise SchemaError(f"the schema is nested more than {MAX_DEPTH} levels deep; flatten it with $defs")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:70] + "…")
