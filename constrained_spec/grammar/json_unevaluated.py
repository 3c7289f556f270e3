"""`unevaluatedProperties` where the keys it sees are known before any instance is.

A key is evaluated when `properties`, `patternProperties`, `additionalProperties` or
`unevaluatedProperties` of the schema, or of a subschema applied in place (`allOf` members,
`$ref` targets, and so on down), took it. Where no conditional subschema (`anyOf`, `oneOf`,
`if`/`then`/`else`, `dependentSchemas`: they evaluate keys only when they hold) evaluates a key
and no dynamic reference is met, the evaluated keys are the names and patterns collected, or
every key where one of them has `additionalProperties` or `unevaluatedProperties`. Then
`unevaluatedProperties: U` says what `additionalProperties: U` says once the collected names and
patterns are declared beside it (as `true`): the modern "extends a base, then closed" form
(`allOf: [{$ref: base}], properties: ..., unevaluatedProperties: false`). Elsewhere the keyword
stays, and is refused by name later. `not` takes no keys (its annotations are dropped).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

from .json_merge import pointer_parts
from .protocol import GrammarError
from .json_shapes import schema_children

__all__ = ["unevaluated_as_additional"]

_CONDITIONAL = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas")
_EVERY_KEY = None  # collected: every key is evaluated
_MAX_REFERENCES = 64  # references followed from one schema


def unevaluated_as_additional(schema: Any) -> Any:
    """`schema` with each `unevaluatedProperties` whose evaluated keys are static rewritten as
    `additionalProperties` (a copy; `schema` itself where nothing changes)."""
    if not isinstance(schema, dict) or '"unevaluatedProperties"' not in json.dumps(schema):
        return schema
    found: dict[tuple[str, ...], tuple[set[str], set[str]] | None] = {}  # None: every key evaluated already
    deref: Callable[[Any], Any] | None = None

    def walk(node: Any, parts: tuple[str, ...]) -> None:
        nonlocal deref
        if not isinstance(node, dict):
            return
        if node.get("unevaluatedProperties") is True:
            found[parts] = None  # validates nothing (an enclosing one's keys were read off the original above)
        elif "unevaluatedProperties" in node:
            names: set[str] = set()
            patterns: set[str] = set()
            own = {k: v for k, v in node.items() if k not in ("properties", "patternProperties", "unevaluatedProperties")}
            if deref is None:
                from .json_schema import _Translator  # (heavy: only for schemas holding the keyword)

                deref = _Translator(schema, "compact").deref
            seen = _EVERY_KEY if "additionalProperties" in node else _collect(own, deref, names, patterns, frozenset(), top=True)
            if seen is not False:
                found[parts] = None if seen is not True else (names, patterns)
        for at, sub in schema_children(node, ""):
            walk(sub, parts + tuple(pointer_parts("#" + at)))

    walk(schema, ())
    if not found:
        return schema
    out = copy.deepcopy(schema)
    for parts, keys in found.items():  # in place, on the copy: no rewrite replaces another's node
        node: Any = out
        for part in parts:
            node = node[int(part)] if isinstance(node, list) else node[part]
        extra = node.pop("unevaluatedProperties")
        if keys is None:
            continue
        names, patterns = keys
        node["additionalProperties"] = extra
        own = node.get("properties") or {}
        if names - set(own):  # after its own (key order is generated as declared on closed objects)
            node["properties"] = {**own, **{n: True for n in sorted(names) if n not in own}}
        if patterns - set(node.get("patternProperties") or {}):
            node["patternProperties"] = {**(node.get("patternProperties") or {}),
                                         **{p: True for p in sorted(patterns) if p not in (node.get("patternProperties") or {})}}
    return out


def _collect(node: Any, deref: Callable[[Any], Any], names: set[str], patterns: set[str], seen: frozenset[str], top: bool = False) -> bool | None:
    """Add the names and patterns `node` evaluates in place; False where they depend on the
    instance (a branch, condition or dependent schema that evaluates keys), None (_EVERY_KEY)
    where every key is evaluated."""
    if not isinstance(node, dict):
        return True  # a boolean schema takes no key
    if {"$dynamicRef", "$recursiveRef"} & set(node) or len(seen) > _MAX_REFERENCES:
        return False
    if not top and ("additionalProperties" in node or "unevaluatedProperties" in node):
        return _EVERY_KEY
    if not isinstance(node.get("properties", {}), dict) or not isinstance(node.get("patternProperties", {}), dict):
        return False
    names.update(node.get("properties", {}))
    patterns.update(node.get("patternProperties", {}))
    for key in _CONDITIONAL:  # fine where they evaluate no key (a oneOf of `required`s)
        value = node.get(key)
        subs = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) and key == "dependentSchemas" else [value]
        for sub in subs if key in node else []:
            taken: tuple[set[str], set[str]] = (set(), set())
            if _collect(sub, deref, *taken, seen) is not True or any(taken):
                return False
    members = node.get("allOf", [])
    if not isinstance(members, list):
        return False
    for member in members:
        found = _collect(member, deref, names, patterns, seen)
        if found is not True:
            return found
    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str):
            return False
        if ref in seen:
            return True  # a cycle of in-place references adds nothing new
        try:
            target = deref({"$ref": ref})
        except (GrammarError, RecursionError):
            return False
        return _collect(target, deref, names, patterns, seen | {ref})
    return True
