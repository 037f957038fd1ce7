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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urljoin

from jsonschema.exceptions import SchemaError as Malformed, best_match
from jsonschema.validators import validator_for
from jsonschema_specifications import REGISTRY
from referencing import Registry
from referencing.exceptions import InvalidAnchor, NoSuchAnchor, NoSuchResource, PointerToNowhere, Unresolvable
from referencing.jsonschema import UnknownDialect, specification_with

from .errors import SchemaError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Resource
    from referencing._core import Resolver

DEFAULT_DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_DEPTH = 100
"""Schemas nested deeper than this (objects and lists) are refused: checking and validating recurse per level."""
REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
_HOW = "define it under $defs and refer to it as '#/$defs/<name>'; Betty never fetches a schema"


def offline_validator(schema: Any) -> "Validator":
    """A validator for ``schema`` that fetches nothing; SchemaError saying what is wrong with it."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON schema is an object (or true/false), not {type(schema).__name__}")
    _check_depth(schema)
    dialect = _dialect(schema)
    cls = validator_for({"$schema": dialect})
    try:
        cls.check_schema(schema)
    except Malformed as error:
        raise SchemaError(f"not a JSON schema: {error.message}") from None
    except RecursionError:
        _too_deep()
    registry = offline_registry()
    _check_references(registry, _resource(schema, dialect))
    return cls(schema, registry=registry)


def first_problem(validator: "Validator", value: Any, whole: str = "the value") -> str | None:
    """Where ``value`` fails the validator's schema and why (``items/0: 'x' is not of type 'integer'``), or None.

    ``whole`` names the value itself when the problem is at its top.
    """
    try:
        problem = best_match(validator.iter_errors(value))
    except Unresolvable as error:
        raise SchemaError(f"the schema refers to {error.ref!r}, which is not inside it; {_HOW}") from None
    except RecursionError:
        raise SchemaError("the schema refers to itself without end (a $ref loop that never checks a value)") from None
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
    while stack:
        resolver, resource, base = stack.pop()
        contents = resource.contents
        if isinstance(contents, dict):
            _dialect(contents)
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


def _check_depth(schema: Any) -> None:
    stack = [(schema, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            _too_deep()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _unresolvable(keyword: str, ref: str, target: str, error: Exception) -> NoReturn:
    leads = f" (it leads to {_shown(target)})" if target and target != ref else ""
    if isinstance(error, (PointerToNowhere, NoSuchAnchor, InvalidAnchor)):
        raise SchemaError(f"{keyword} {_shown(ref)}{leads} points to nothing in the schema")
    raise SchemaError(f"{keyword} {_shown(ref)}{leads} is not inside the schema; {_HOW}")


def _too_deep() -> NoReturn:
    raise SchemaError(f"the schema is nested more than {MAX_DEPTH} levels deep; flatten it with $defs")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:70] + "…")
