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


def _shape_error(key: Any) -> str | None:
    """What `key`'s value must be, for the checks below that are simple predicates."""
    return ("a non-negative integer" if key in _COUNT else "a number" if key in _NUMBER else
            "a number (or, in draft 4, a boolean)" if key in _BOUND else "a string" if key in _STRING else None)


def _fits(key: str, value: Any) -> bool:
    if key in _COUNT:
        return _is_number(value) and value >= 0 and float(value).is_integer()
    if key in _NUMBER:
        return _is_number(value)
    if key in _BOUND:
        return _is_number(value) or isinstance(value, bool)
    return isinstance(value, str)  # _STRING


def check_keyword_shapes(schema: Any) -> None:
    """Raise GrammarError naming the first keyword (and its JSON pointer) whose value has the
    wrong shape, walking every schema position reachable from the root (`definitions` too)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            raise GrammarError(f"schema at {path or '/'} must be an object or a boolean, got {_shown(node)}")
        for key, value in node.items():
            at = pointer(path, key)

            def wrong(shape: str) -> GrammarError:
                return GrammarError(f"keyword {key!r} at {at} must be {shape}, got {_shown(value)}")  # noqa: B023 (raised at once)

            if key in _SCHEMA:
                stack.append((value, at))
            elif key in _SCHEMA_MAP or (key == "definitions" and isinstance(value, dict)):
                if not isinstance(value, dict):
                    raise wrong("an object of schemas")
                stack += [(sub, pointer(at, name)) for name, sub in value.items()]
            elif key in _SCHEMA_LIST:
                if not isinstance(value, list) or not value:
                    raise wrong("a non-empty array of schemas")
                stack += [(sub, pointer(at, i)) for i, sub in enumerate(value)]
            elif key == "items":
                stack += [(sub, pointer(at, i)) for i, sub in enumerate(value)] if isinstance(value, list) else [(value, at)]
            elif key == "dependencies":
                if not isinstance(value, dict):
                    raise wrong("an object of schemas or arrays of property names")
                for name, sub in value.items():
                    if isinstance(sub, list):
                        if not _is_names(sub):
                            raise GrammarError(f"keyword 'dependencies' at {pointer(at, name)} must list property names, got {_shown(sub)}")
                    else:
                        stack.append((sub, pointer(at, name)))
            elif key == "dependentRequired":
                if not isinstance(value, dict) or not all(_is_names(names) for names in value.values()):
                    raise wrong("an object of arrays of property names")
            elif key == "required":
                if not _is_names(value):
                    raise wrong("an array of property names")
            elif key == "type":
                if not (isinstance(value, str) or (_is_names(value) and value)):
                    raise wrong("a type name or a non-empty array of them")
            elif key == "enum":
                if not isinstance(value, list):
                    raise wrong("an array")
            elif key == "uniqueItems":
                if not isinstance(value, bool):
                    raise wrong("a boolean")
            elif key == "multipleOf":
                if not _is_number(value) or value <= 0:
                    raise wrong("a number above 0")
            elif (shape := _shape_error(key)) is not None and not _fits(key, value):
                raise wrong(shape)


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
