"""`not` of a JSON schema as a union of positive schemas, one keyword group at a time.

A cleaned schema is the conjunction of its keywords, grouped where keywords read each other
(properties with patternProperties and additionalProperties, prefixItems with items, contains with
its bounds, if with then and else, enum with const). So `not S` is the union of its groups'
complements (`split`), and one group's complement is a union of ways to fail it (`ways_to_fail`).
A way may hold a smaller `not` (a property value failing its schema): the translator conjoins
each way with the enclosing schema and negates again, so the recursion ends at keywords negated
in place. A type-specific keyword is passed by values of other types, so each way names the type
it fails for. None where no exact union exists (a pattern regular.py cannot complement, format, multipleOf, uniqueItems,
propertyNames, an undeclared key of an open object next to more than 3 declared ones).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable

from .json_merge import clean, enum_values
from .json_terminals import trie_complement
from .regular import complement as pattern_complement
from .protocol import GrammarError

__all__ = ["split", "ways_to_fail", "complement", "container_ways", "NON_INTEGER_NUMBER", "APPLIES"]

# numbers that are not integers, in the spellings a plain decimal or Python's float repr uses: a
# fraction with a non-zero digit, or d[.ddd]e-k (0 < |value| < 1); 1.5e0 is left out (spelling only)
NON_INTEGER_NUMBER = r"-?(?:(?:0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*|[1-9](?:\.[0-9]+)?[eE]-[0-9]*[1-9][0-9]*)"

_GROUPS = (
    frozenset({"properties", "patternProperties", "additionalProperties"}),
    frozenset({"prefixItems", "items"}),
    frozenset({"contains", "minContains", "maxContains"}),
    frozenset({"if", "then", "else"}),
    frozenset({"enum", "const"}),
)
# keyword -> (type it applies to, the keyword that holds the complement, offset to its bound)
_BOUNDS = {
    "minimum": ("number", "exclusiveMaximum", 0), "exclusiveMinimum": ("number", "maximum", 0),
    "maximum": ("number", "exclusiveMinimum", 0), "exclusiveMaximum": ("number", "minimum", 0),
    "minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1),
    "minProperties": ("object", "maxProperties", -1), "maxProperties": ("object", "minProperties", 1),
}  # fmt: skip
APPLIES = {key: kind for kind, keys in (
    ("object", ("properties", "patternProperties", "additionalProperties", "required", "dependentRequired", "dependentSchemas",
                "minProperties", "maxProperties", "propertyNames")),
    ("array", ("prefixItems", "items", "contains", "minContains", "maxContains", "minItems", "maxItems", "uniqueItems")),
    ("string", ("minLength", "maxLength", "pattern")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
) for key in keys}  # fmt: skip
MAX_ONE_OF = 6  # branches of a negated oneOf (pairs grow quadratically)
MAX_UNDECLARED_SPLIT = 3  # "a key outside these" in an open object: one way per subset present
MAX_DEPTH = 12  # nested negations followed by `complement`
MAX_CALLS = 2_000  # complements computed for one top-level `complement` call
MAX_PARTIAL_REF_DEPTH = 4  # a partial complement follows references only this deep
_calls = threading.local()
_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")


def split(part: dict) -> list[dict]:
    """`part`'s keyword groups, each a schema; their conjunction is `part`."""
    groups, taken = [], set()
    for key in part:
        if key in taken:
            continue
        group = next((g for g in _GROUPS if key in g), frozenset({key}))
        groups.append({k: v for k, v in part.items() if k in group})
        taken |= group
    return groups


def ways_to_fail(group: dict, context: dict, partial: bool = False) -> list[dict] | None:
    """Schemas whose union is exactly the values failing `group` (one keyword group, cleaned) among
    the values of `context`, the enclosing schema each way is conjoined with (read only for the
    keys a closed object can hold). [] where no value fails; None where not expressible.
    `partial`: an object's ways through undeclared or patterned keys, where they cannot be
    written, are left out and its declared keys' ways kept (a subset: still only failing values)."""
    keys = set(group)
    applies = {APPLIES.get(k) for k in keys}
    if None not in applies and not applies & _kinds(context):
        return []  # a keyword of a type the context never holds: every value passes it
    if keys == {"not"}:
        return [group["not"]]
    if keys <= _GROUPS[0]:
        return _member_ways(group, context, partial)
    if keys <= _GROUPS[1]:
        return _item_ways(group)
    if keys <= _GROUPS[2]:
        low, high = group.get("minContains", 1), group.get("maxContains")
        if high is not None or not isinstance(low, int) or low > 1:
            return None
        return [] if low == 0 else [{"type": "array", "items": {"not": group["contains"]}}]
    if keys <= _GROUPS[3]:
        cond, then, other = group.get("if", True), group.get("then", True), group.get("else", True)
        ways = [{"allOf": [cond, {"not": then}]}] if then is not True else []
        return ways + ([{"allOf": [{"not": cond}, {"not": other}]}] if other is not True else [])
    if len(keys) != 1:
        return None
    (key, value), = group.items()
    if key == "pattern" and isinstance(value, str):
        try:  # a string the pattern finds no match in, in either reading (regular.py)
            other = pattern_complement(value)
        except ValueError:
            return None
        return [] if other is None else [{"type": "string", "pattern": other}]
    if key in _BOUNDS and isinstance(value, (int, float)) and not isinstance(value, bool):
        kind, other, step = _BOUNDS[key]
        if step and value + step < 0:
            return []  # e.g. minLength 0: every string has it
        return [{"type": kind, other: value + step}]
    if key == "required" and isinstance(value, list):
        return [{"type": "object", "properties": {name: False}} for name in dict.fromkeys(value)]
    if key == "dependentRequired" and isinstance(value, dict):
        return [{"type": "object", "required": [name], "properties": {need: False}} for name, needs in value.items() for need in needs]
    if key == "dependentSchemas" and isinstance(value, dict):
        return [{"type": "object", "required": [name], "not": sub} for name, sub in value.items()]
    if key == "allOf" and isinstance(value, list):
        return [{"not": sub} for sub in value]
    if key == "anyOf" and isinstance(value, list):
        return [{"allOf": [{"not": sub} for sub in value]}]
    if key == "oneOf" and isinstance(value, list) and len(value) <= MAX_ONE_OF:
        # none matches, or two do
        pairs = [{"allOf": [a, b]} for i, a in enumerate(value) for b in value[i + 1 :]]
        return [{"allOf": [{"not": sub} for sub in value]}, *pairs]
    if key == "uniqueItems" and value is False:
        return []
    return None


def _member_ways(group: dict, context: dict, partial: bool = False) -> list[dict] | None:
    """An object fails properties/additionalProperties by holding a key whose value fails the
    schema that key gets. A declared key: one way each. An undeclared key (additionalProperties
    false): one of the keys a closed context may hold, or in an open context, per subset S of
    the declared keys present, S present, the others absent and more than |S| keys."""
    props, extra = group.get("properties", {}), group.get("additionalProperties", True)
    if not isinstance(props, dict):
        return None
    held = _held_keys(context)
    ways = [{"type": "object", "required": [name], "properties": {name: {"not": sub}}}
            for name, sub in props.items() if sub is not True and (held is None or name in held)]  # fmt: skip
    if group.get("patternProperties"):
        return ways if partial else None
    if extra is True:
        return ways
    if held is None:  # an open context: some key outside props, counted (2^|props| ways)
        if extra is not False or len(props) > MAX_UNDECLARED_SPLIT:
            return ways if partial else None
        names = list(props)
        for mask in range(1 << len(names)):
            present = [n for i, n in enumerate(names) if mask >> i & 1]
            ways.append({"type": "object", "required": present, "minProperties": len(present) + 1,
                         "properties": {n: False for n in names if n not in present}})  # fmt: skip
        return ways
    for name in held:
        if name not in props:
            ways.append({"type": "object", "required": [name], **({} if extra is False else {"properties": {name: {"not": extra}}})})
    return ways


def _held_keys(context: dict) -> list[str] | None:
    """The keys an object of `context` can hold, where it says (closed, no patterns)."""
    if context.get("additionalProperties") is False and not context.get("patternProperties"):
        props = context.get("properties", {})
        return [name for name, sub in props.items() if sub is not False] if isinstance(props, dict) else None
    return None


def _item_ways(group: dict) -> list[dict] | None:
    """An array fails prefixItems/items by an item failing the schema of its position (or by
    being longer than `items: false` allows)."""
    prefix, items = group.get("prefixItems", []), group.get("items", True)
    if not isinstance(prefix, list):
        return None
    ways = [{"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [{"not": sub}]} for i, sub in enumerate(prefix) if sub is not True]
    if items is True:
        return ways
    if items is False:
        return [*ways, {"type": "array", "minItems": len(prefix) + 1}]
    if prefix:
        return None  # an item after the prefix failing `items`: contains cannot skip the prefix
    return [{"type": "array", "contains": {"not": items}}]


def complement(negated: Any, context: dict, resolve: Callable[[str], Any], depth: int = 0, partial: bool = False) -> Any:
    """A schema without `not` that admits exactly the values of `context` failing `negated`,
    once conjoined with `context` (for engines without `not`, such as llguidance); None where
    no exact one is known. `resolve` maps a `$ref` to its schema.

    `partial`: where a part is not expressible, it admits nothing (False) instead, so the result
    is never None but may admit fewer values: a narrowing, sound only where the result is used
    positively (every step here is monotone: unions and intersections of narrower parts)."""
    found = _complement(negated, context, resolve, depth, partial)
    return False if found is None and partial else found


def _complement(negated: Any, context: dict, resolve: Callable[[str], Any], depth: int, partial: bool) -> Any:
    if depth == 0:
        _calls.budget = MAX_CALLS
    _calls.budget -= 1
    if depth > MAX_DEPTH or _calls.budget < 0:
        return None  # nested negations multiply: refused rather than grown without bound
    if isinstance(negated, bool) or not isinstance(negated, dict):
        return {} if negated is False else False if negated is True else None
    try:
        body = clean(negated, "", lambda key, where: None)
    except GrammarError:
        return None
    groups = split(body)
    if not groups:
        return False  # every value matches `negated`
    if len(groups) > 1:
        return _union([complement(g, context, resolve, depth + 1, partial) for g in groups])
    (group,) = groups
    if set(group) == {"$ref"}:
        if partial and depth > MAX_PARTIAL_REF_DEPTH:  # (the exact complement was tried first: this one cycles or grows)
            return None
        try:
            target = resolve(group["$ref"])
        except (GrammarError, RecursionError, KeyError, TypeError, ValueError):
            return None
        return complement(target, context, resolve, depth + 1, partial)
    if set(group) == {"type"}:
        gone = {group["type"]} if isinstance(group["type"], str) else set(group["type"]) if isinstance(group["type"], list) else None
        if gone is None:
            return None
        said = context.get("type", "number")
        if "integer" in gone and "number" not in gone and "number" in ([said] if isinstance(said, str) else said):
            return None  # numbers that are not integers: no type says it
        # (where integers go, numbers go too: the context holds no other numbers)
        kept = [t for t in _TYPES if t not in gone and not (t in ("integer", "number") and {"integer", "number"} & gone)]
        return {"type": kept} if kept else False
    if set(group) in ({"enum"}, {"const"}):
        return _all_but(enum_values(group), context, resolve, depth, partial)
    if set(group) == {"anyOf"} and isinstance(group["anyOf"], list):
        return _intersection([complement(sub, context, resolve, depth + 1, partial) for sub in group["anyOf"]])
    ways = ways_to_fail(group, context, partial)
    if ways is None:
        return None
    return _union([positive(way, context, resolve, depth + 1, partial) for way in ways])


def positive(schema: Any, context: dict, resolve: Callable[[str], Any], depth: int = 0, partial: bool = False) -> Any:
    """`schema` (a way to fail, from ways_to_fail) with every `not` replaced by its complement;
    None where one is not expressible (`partial`: see `complement`)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "not" in out:
        rest = complement(out.pop("not"), context, resolve, depth + 1, partial)
        if rest is None or rest is False:
            return rest
        out["allOf"] = [*out.get("allOf", []), rest]
    for key in ("allOf", "anyOf", "prefixItems"):
        if isinstance(out.get(key), list):
            subs = [positive(sub, context if key != "prefixItems" else {}, resolve, depth + 1, partial) for sub in out[key]]
            if any(sub is None for sub in subs):
                return None
            out[key] = subs
    props = out.get("properties")
    if isinstance(props, dict):
        known = context.get("properties") if isinstance(context.get("properties"), dict) else {}
        subs = {k: positive(v, known[k] if isinstance(known.get(k), dict) else {}, resolve, depth + 1, partial) for k, v in props.items()}
        if any(sub is None for sub in subs.values()):
            return None
        out["properties"] = subs
    for key in ("items", "contains", "additionalProperties"):
        if isinstance(out.get(key), dict):
            sub = positive(out[key], {}, resolve, depth + 1, partial)
            if sub is None:
                return None
            out[key] = sub
    return out


def _union(parts: list[Any]) -> Any:
    if any(p is None for p in parts):
        return None
    parts = [p for p in parts if p is not False]
    return False if not parts else parts[0] if len(parts) == 1 else {"anyOf": parts}


def _intersection(parts: list[Any]) -> Any:
    if any(p is None for p in parts):
        return None
    if any(p is False for p in parts):
        return False
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def _kinds(context: dict) -> set[str]:
    kinds = context.get("type")
    found = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else set(_TYPES)
    return found | ({"number"} if "integer" in found else set())


def container_ways(value: dict | list, context: dict) -> list[dict]:
    """Ways a value of `context` fails `const: value` for an object or array `value` (each may
    hold a smaller `not const`). An object: a key of `value` absent, one holding another value, or
    a key `value` lacks (one the closed context holds, else more keys than `value` has). An array:
    another length, or another item at some position."""
    if isinstance(value, dict):
        ways = [{"type": "object", "properties": {name: False}} for name in value]
        ways += [{"type": "object", "required": [name], "properties": {name: {"not": {"const": item}}}} for name, item in value.items()]
        held = _held_keys(context)
        if held is None:
            return [*ways, {"type": "object", "minProperties": len(value) + 1}]
        return ways + [{"type": "object", "required": [name]} for name in held if name not in value]
    ways = [{"type": "array", "minItems": len(value) + 1}, *([{"type": "array", "maxItems": len(value) - 1}] if value else [])]
    return ways + [{"type": "array", "minItems": i + 1, "prefixItems": [*[True] * i, {"not": {"const": item}}]} for i, item in enumerate(value)]


def _all_but(values: Any, context: dict, resolve: Callable[[str], Any], depth: int, partial: bool) -> Any:
    """Every JSON value of `context` except `values`, one branch per type (objects and arrays
    except the listed ones: every way to differ from each, intersected)."""
    if not isinstance(values, list):
        return None
    ways: list[Any] = []
    for kind, python_type in (("object", dict), ("array", list)):
        mine = [v for v in values if isinstance(v, python_type)]
        differing = [_union([positive(way, context, resolve, depth + 1, partial) for way in container_ways(v, context)]) for v in mine]
        ways.append(_intersection(differing) if mine else {"type": kind})
    if not any(v is None for v in values):
        ways.append({"type": "null"})
    ways += [{"enum": [b]} for b in (True, False) if not any(v is b for v in values)]
    numbers = sorted({v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)})
    edges = [None, *numbers, None]
    for low, high in zip(edges, edges[1:]):  # the open intervals between excluded numbers
        ways.append({"type": "number", **({"exclusiveMinimum": low} if low is not None else {}),
                     **({"exclusiveMaximum": high} if high is not None else {})})  # fmt: skip
    texts = [v for v in values if isinstance(v, str)]
    ways.append({"type": "string", **({"pattern": "^" + _strings_except(texts) + "$"} if texts else {})})
    return _union(ways)


def _strings_except(texts: list[str]) -> str:
    """A regex (no lookaround) for every string but `texts`, one unit per character."""
    other = lambda children: "[^" + "".join(_class_char(c) for c in sorted(children)) + "]" if children else "[\\s\\S]"  # noqa: E731
    return trie_complement([list(text) for text in texts], re.escape, other, "[\\s\\S]")


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch
