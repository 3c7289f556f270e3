"""Each keyword's value has the shape the meta-schemas give it: checked before any engine reads it.

A misshapen value (`"type": 3`, `"required": "a"`, `"minLength": "3"`) makes the schema invalid;
validators refuse it or fail (jsonschema raises TypeError on `"required": true` next to
`"type": "object"`), and our compiler failed with Python errors instead of naming it. So it is
refused here, once, by keyword, JSON pointer and the shape wanted. Draft 3's forms are rewritten
before this check (json_dialects.py); drafts 4 to 2020-12 agree on these shapes, except `items`
(a schema, or before 2020-12 a list of them) and the bounds `exclusiveMinimum`/`exclusiveMaximum`
(numbers, or in draft 4 booleans). Values of unknown keywords are annotations: not walked.
"""

from __future__ import annotations

import json
from typing import Any

from .json_merge import pointer
from .protocol import GrammarError

__all__ = ["check_keyword_shapes", "schema_children"]

_SCHEMA = frozenset({"additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then", "else",
                     "unevaluatedProperties", "unevaluatedItems"})
_SCHEMA_MAP = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_COUNT = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"})
_NUMBER = frozenset({"minimum", "maximum"})
_BOUND = frozenset({"exclusiveMinimum", "exclusiveMaximum"})
_STRING = frozenset({"pattern", "$ref", "format"})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def check_keyword_shapes(schema: Any) -> None:
    """Raise GrammarError naming the first keyword (and its JSON pointer) whose value has the
    wrong shape, walking every schema position reachable from the root (`definitions` too)."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            raise GrammarError(f"schema at {path or '/'} must be an object or a boolean, got {_shown(node)}")
        for key, value in node.items():
            if (shape := _misshapen(key, value)) is not None:
                raise GrammarError(f"keyword {key!r} at {pointer(path, key)} must be {shape}, got {_shown(value)}")
            if key == "dependencies":
                for name, sub in value.items():
                    if isinstance(sub, list) and not _is_names(sub):
                        at = pointer(pointer(path, key), name)
                        raise GrammarError(f"keyword 'dependencies' at {at} must list property names, got {_shown(sub)}")
        stack += schema_children(node, path)


def _misshapen(key: str, value: Any) -> str | None:
    """The shape `key`'s value should have, when it has another (None when it fits); the schemas
    inside containers are checked where schema_children leads the walk."""
    if key in _SCHEMA_MAP:
        return None if isinstance(value, dict) else "an object of schemas"
    if key in _SCHEMA_LIST:
        return None if isinstance(value, list) and value else "a non-empty array of schemas"
    if key == "dependencies":  # its arrays of names are checked by the caller, to name the entry
        return None if isinstance(value, dict) else "an object of schemas or arrays of property names"
    if key == "dependentRequired":
        fits = isinstance(value, dict) and all(_is_names(names) for names in value.values())
        return None if fits else "an object of arrays of property names"
    if key == "required":
        return None if _is_names(value) else "an array of property names"
    if key == "type":
        return None if isinstance(value, str) or (_is_names(value) and value) else "a type name or a non-empty array of them"
    if key == "enum":
        return None if isinstance(value, list) else "an array"
    if key == "uniqueItems":
        return None if isinstance(value, bool) else "a boolean"
    if key == "multipleOf":
        return None if _is_number(value) and value > 0 else "a number above 0"
    if key in _COUNT:
        return None if _is_number(value) and value >= 0 and float(value).is_integer() else "a non-negative integer"
    if key in _NUMBER:
        return None if _is_number(value) else "a number"
    if key in _BOUND:
        return None if _is_number(value) or isinstance(value, bool) else "a number (or, in draft 4, a boolean)"
    if key in _STRING:
        return None if isinstance(value, str) else "a string"
    return None


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_children(node: dict, path: str) -> list[tuple[str, Any]]:
    """(pointer, subschema) for the schema positions directly under the schema object `node`
    (what validation reads: unknown keywords' values, annotations, are not schemas)."""
    out: list[tuple[str, Any]] = []
    for key, value in node.items():
        at = pointer(path, key)
        if key in _SCHEMA:
            out.append((at, value))
        elif (key in _SCHEMA_MAP or key == "definitions" or key == "dependencies") and isinstance(value, dict):
            out += [(pointer(at, name), sub) for name, sub in value.items() if not isinstance(sub, list)]
        elif (key in _SCHEMA_LIST or key == "items") and isinstance(value, list):
            out += [(pointer(at, i), sub) for i, sub in enumerate(value)]
        elif key == "items":
            out.append((at, value))
    return out
