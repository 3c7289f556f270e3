"""A conservative proof that one JSON schema's instances are all instances of another.

`within(p, q, deref)` is True only where every instance valid under `p` is valid under `q` by one
of a few syntactic rules (False: not proven, which is always safe). The llguidance rewrites use
it to leave out an intersection llguidance cannot build: a declared property that a pattern
matching every key also constrains (ANS's `related_content`: `redirect` and `.*`), where the
property's schema already lies within the pattern's, so the pattern may skip that name.

Rules (each sound for JSON Schema's conjunction of keywords):
- q says nothing (true, {}), or q's keywords are p's with the same values (p = q and more), where
  p's extra keywords do not change what a shared keyword means (`additionalProperties` reads
  `properties` and `patternProperties`; `items` and `additionalItems` read each other);
- references on either side followed (`deref`; cycles and depth give up);
- q an anyOf: p within q's other keywords and within one branch; p an anyOf: every branch
  within q; p an enum or const: every value valid under q's `type`, `enum` and `const`;
- objects: q constrains only `type`, `properties`, `required` and an open rest; p is an object
  that requires what q requires and whose every q-declared key p declares within q's schema for
  it or cannot hold (p closed, no patterns);
- arrays: q constrains only `type` and `items` (one schema); p is an array whose `items` (one
  schema) lies within it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .json_merge import ANNOTATIONS
from .json_schema import _json_type  # noqa: PLC2701 (the compiler's own reading of a value's type)

__all__ = ["within"]

_DEPTH = 24
_READS_SIBLINGS = {"additionalProperties": ("properties", "patternProperties"),
                   "items": ("prefixItems", "additionalItems"), "additionalItems": ("items",),
                   "minContains": ("contains",), "maxContains": ("contains",),
                   "exclusiveMaximum": ("maximum",), "exclusiveMinimum": ("minimum",)}  # (draft 4's booleans)
_CONDITIONAL = {"if", "then", "else", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"}


def _keywords(schema: dict) -> dict:
    return {k: v for k, v in schema.items() if k not in ANNOTATIONS and k not in ("$schema", "$id", "id", "$defs", "definitions")}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _kinds(schema: dict) -> set[str] | None:
    kind = schema.get("type")
    return {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else None


def within(p: Any, q: Any, deref: Callable[[Any], Any], depth: int = 0) -> bool:
    """True where every instance of `p` is an instance of `q` (proven by the module's rules)."""
    if depth > _DEPTH:
        return False
    if q is True or (isinstance(q, dict) and not _keywords(q)):
        return True
    if p is False:
        return True
    try:
        p, q = deref(p), deref(q)
    except Exception:  # noqa: BLE001 - an unresolvable reference proves nothing
        return False
    if not isinstance(p, dict) or not isinstance(q, dict):
        return False
    pk, qk = _keywords(p), _keywords(q)
    if not qk:
        return True
    if "$ref" in pk or "$ref" in qk or (_CONDITIONAL & (set(pk) | set(qk))):
        return False  # a reference beside other keywords (draft-dependent), or a condition
    if all(k in pk and _same(pk[k], v) for k, v in qk.items()) and all(
            _same(pk.get(s), qk.get(s)) for k in qk for s in _READS_SIBLINGS.get(k, ())):
        return True
    if isinstance(qk.get("anyOf"), list):
        rest = {k: v for k, v in qk.items() if k != "anyOf"}
        return within(p, rest, deref, depth + 1) and any(within(p, b, deref, depth + 1) for b in qk["anyOf"])
    if isinstance(pk.get("anyOf"), list) and pk["anyOf"] and all(within(b, q, deref, depth + 1) for b in pk["anyOf"]):
        return True  # p lies within the union of its branches
    values = pk["enum"] if isinstance(pk.get("enum"), list) else [pk["const"]] if "const" in pk else None
    if values is not None and set(qk) <= {"type", "enum", "const"}:
        return all(_value_valid(v, qk) for v in values)
    kinds = _kinds(pk)
    if kinds == {"object"} and set(qk) <= {"type", "properties", "required", "additionalProperties"}:
        return _object_within(pk, qk, deref, depth)
    if kinds == {"array"} and set(qk) <= {"type", "items"} and isinstance(qk.get("items", {}), dict):
        return (_kinds(qk) in (None, {"array"}) and isinstance(pk.get("items"), dict) and "prefixItems" not in pk
                and within(pk["items"], qk.get("items", True), deref, depth + 1))
    return False


def _value_valid(value: Any, qk: dict) -> bool:
    """`value` valid under q's `type`, `enum` and `const` (enum and const by the same JSON text:
    1 and 1.0 count as different, which only proves less)."""
    kinds = _kinds(qk)
    if kinds is not None:
        kind = _json_type(value)
        if not (kind in kinds or kind == "integer" and "number" in kinds):
            return False
    if isinstance(qk.get("enum"), list) and not any(_same(value, v) for v in qk["enum"]):
        return False
    return "const" not in qk or _same(value, qk["const"])


def _object_within(pk: dict, qk: dict, deref: Callable[[Any], Any], depth: int) -> bool:
    if _kinds(qk) not in (None, {"object"}) or qk.get("additionalProperties", True) not in (True, {}):
        return False
    required, declared = qk.get("required", []), pk.get("properties", {})
    if not isinstance(required, list) or not isinstance(declared, dict) or not isinstance(qk.get("properties", {}), dict):
        return False
    if not set(required) <= set(pk.get("required", []) if isinstance(pk.get("required"), list) else []):
        return False
    closed = pk.get("additionalProperties", True) is False and not pk.get("patternProperties")
    for name, schema in qk.get("properties", {}).items():
        if name in declared:
            if not within(declared[name], schema, deref, depth + 1):
                return False
        elif not closed and not within(True, schema, deref, depth + 1):
            return False
    return True
