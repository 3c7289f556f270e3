"""JSON-schema algebra before translation: keyword classes, draft normalisation, allOf merging.

`clean` turns one schema object of any draft (4 .. 2020-12) into the 2020-12 spelling with its
annotations and unknown keywords removed; `merge` intersects several cleaned schemas into one,
keyword by keyword, exactly or not at all (GrammarError naming the keyword and its JSON pointer).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable
from urllib.parse import unquote

from .protocol import GrammarError
from .regular import intersection

__all__ = ["VALIDATION", "ANNOTATIONS", "STRUCTURAL", "clean", "merge", "discriminated_conditions", "pointer", "pointer_parts", "canonical", "enum_values", "written_text",
           "name_keywords", "listed_names", "NAME_MAPS", "DATA_KEYWORDS", "LEFT_OUT", "keywords_mapped", "rebased_refs"]

# keywords that constrain instances (drafts 4 .. 2020-12)
VALIDATION = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "contains", "maxProperties", "minProperties", "required", "dependentRequired",
    "dependentSchemas", "dependencies", "properties", "patternProperties", "additionalProperties",
    "propertyNames", "items", "prefixItems", "additionalItems", "unevaluatedItems", "unevaluatedProperties",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef",
})  # fmt: skip
# keywords that organise a schema without constraining instances by themselves
STRUCTURAL = frozenset({
    "$schema", "$id", "id", "$defs", "definitions", "$anchor", "$dynamicAnchor", "$recursiveAnchor",
    "$vocabulary", "$comment",
})  # fmt: skip
# keywords the specifications define as annotations
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    "contentMediaType", "contentEncoding", "contentSchema", "discriminator",
})  # fmt: skip


# keywords whose value maps names to schemas, and those whose value is data, not a schema
NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "required", "dependentRequired"})


def keywords_mapped(node: Any, fn: Callable[[str, Any], Any], after: Callable[[dict], dict] | None = None) -> Any:
    """`node` with each keyword of each schema object replaced by `fn(keyword, value)` (left out
    where that is LEFT_OUT); property names and data (enum, const, ...) are not keywords.
    `after`: applied to each object so rebuilt (its keywords mapped already)."""
    if isinstance(node, list):
        return [keywords_mapped(v, fn, after) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in DATA_KEYWORDS:
            out[key] = value
        elif key in NAME_MAPS and isinstance(value, dict):
            out[key] = {name: keywords_mapped(v, fn, after) for name, v in value.items()}
        elif (mapped := fn(key, value)) is not LEFT_OUT:
            out[key] = keywords_mapped(mapped, fn, after)
    return out if after is None else after(out)


LEFT_OUT = object()  # what a keywords_mapped function returns to leave a keyword out


def rebased_refs(schema: Any, base: str) -> Any:
    """`schema` as a part of a larger document at the JSON pointer `base` (`#/$defs/tool0`):
    every local reference (`#`, `#/...`) prefixed with it. None where a reference is something
    else (an anchor, a relative or remote URI) or an `$id` below the root moves the base."""
    refused = []

    def moved(keyword: str, value: Any) -> Any:
        if keyword == "$ref" and isinstance(value, str):
            if value == "#" or value.startswith("#/"):
                return base + value[1:]
            refused.append(value)
        elif keyword in ("$id", "$dynamicRef", "$recursiveRef"):  # (the root's $id is left out below)
            refused.append(value)
        return value

    if not isinstance(schema, dict):
        return schema
    root = {k: v for k, v in schema.items() if k not in ("$id", "$schema")}  # the base is the document's
    out = keywords_mapped(root, moved)
    return None if refused else out


def pointer(path: str, *keys: Any) -> str:
    """JSON pointer of `path` extended by `keys` (RFC 6901 escaping); the root is '/'."""
    for key in keys:
        path += "/" + str(key).replace("~", "~0").replace("/", "~1")
    return path


def pointer_parts(ref: str) -> list[str]:
    """The segments a local JSON-pointer reference names ("#/a~1b/c%25" -> ["a/b", "c%"]; "#" -> [])."""
    return [] if ref == "#" else [unquote(p).replace("~1", "/").replace("~0", "~") for p in ref[2:].split("/")]


def at(path: str) -> str:
    return path or "/"


def canonical(value: Any) -> str:
    """Equality key of a JSON value under JSON-schema equality (1 == 1.0, true != 1)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(int(value)) if float(value).is_integer() and abs(value) < 2**63 else repr(float(value))
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + canonical(v) for k, v in sorted(value.items())) + "}"
    raise GrammarError(f"enum/const value {value!r} is not JSON")


def written_text(schema: Any) -> str:
    """A schema's text where the order its keys are written in counts: keywords sorted (their
    order says nothing), every `properties` map in its own order (declared keys are written in
    it). Equal texts: the same language and the same declared orders."""
    def kept(node: Any, names: bool = False) -> Any:
        if isinstance(node, list):
            return [kept(v) for v in node]
        if not isinstance(node, dict):
            return node
        if names:  # a properties map: property -> schema, in its order
            return {k: kept(v) for k, v in node.items()}
        return {k: kept(v, k == "properties") for k, v in sorted(node.items())}

    return json.dumps(kept(schema))


def same_json(a: Any, b: Any) -> bool:
    """canonical(a) == canonical(b), without writing either out: merges compare whole subschemas,
    which grow with every merge (a canonical string each time made merging quadratic)."""
    if a is b:
        return True
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, (bool, str)) or a is None or isinstance(b, (bool, str, dict, list)) or b is None:
        return type(a) is type(b) and a == b
    return canonical_or_none(a) == canonical_or_none(b) is not None


def clean(schema: dict, path: str, unknown: Callable[[str, str], None]) -> dict:
    """One schema object -> 2020-12 validation keywords only (annotations dropped, unknown keywords
    reported through `unknown(keyword, pointer)`, draft-4..2019 spellings rewritten)."""
    out: dict = {}
    for key, value in schema.items():
        if key in VALIDATION:
            out[key] = value
        elif key not in STRUCTURAL and key not in ANNOTATIONS:
            unknown(key, pointer(path, key))
    for key in ("$dynamicRef", "$recursiveRef", "unevaluatedItems", "unevaluatedProperties"):
        if key in out and not (key.startswith("uneval") and out[key] is True):
            raise GrammarError(f"{key} at {pointer(path, key)} is not supported")
        out.pop(key, None)
    # draft 4: exclusiveMinimum/Maximum are booleans that modify minimum/maximum
    for bound, excl in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if isinstance(out.get(excl), bool):
            if out.pop(excl) and bound in out:
                out[excl] = out.pop(bound)
    # up to 2019-09: items as an array = prefixItems, additionalItems = the rest
    if isinstance(out.get("items"), list):
        if "prefixItems" in out:
            raise GrammarError(f"items as an array next to prefixItems at {pointer(path, 'items')} is ambiguous")
        out["prefixItems"] = out.pop("items")
        if "additionalItems" in out:
            out["items"] = out.pop("additionalItems")
    out.pop("additionalItems", None)  # without an items array it has no effect
    if "dependencies" in out:  # draft 4-7: both kinds in one keyword
        deps = out.pop("dependencies")
        if not isinstance(deps, dict):
            raise GrammarError(f"dependencies at {pointer(path, 'dependencies')} must be an object")
        for name, dep in deps.items():
            kind = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
            out.setdefault(kind, {})[name] = dep
    for key in ("then", "else"):
        if "if" not in out:
            out.pop(key, None)  # without `if` they have no effect
    if "if" in out and "then" not in out and "else" not in out:
        out.pop("if")  # `if` alone constrains nothing
    if "minContains" in out or "maxContains" in out:
        if "contains" not in out:
            out.pop("minContains", None)
            out.pop("maxContains", None)
    return out


_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains")


def _types(value: Any) -> set[str]:
    return {value} if isinstance(value, str) else set(value)


def _intersect_types(a: Any, b: Any) -> list[str]:
    ta, tb = _types(a), _types(b)
    out = ta & tb
    if "integer" in ta and "number" in tb or "number" in ta and "integer" in tb:
        out.add("integer")
    return sorted(out)


def merge(parts: list[dict], path: str) -> dict:
    """The intersection of cleaned schemas (no $ref / allOf inside), as one schema; exact or a
    GrammarError naming the keyword that cannot be combined."""
    merged: dict = {}
    for part in parts:
        merged = _merge_two(merged, part, path)
    return merged


def _merge_two(a: dict, b: dict, path: str) -> dict:
    if not a:
        return dict(b)
    out = dict(a)
    if ("properties" in b or "additionalProperties" in b or "patternProperties" in b) and (
        "properties" in a or "additionalProperties" in a or "patternProperties" in a
    ):
        _merge_object_members(out, b, path)
        b = {k: v for k, v in b.items() if k not in ("properties", "additionalProperties", "patternProperties")}
    if ("prefixItems" in b or "items" in b) and ("prefixItems" in a or "items" in a):
        _merge_array_items(out, b)
        b = {k: v for k, v in b.items() if k not in ("prefixItems", "items")}
    if "if" in b and "if" in out and not same_json(b["if"], out["if"]):
        # a second condition: (if and then) or (not if and else), distributed by the translator
        cond, then, other = b["if"], b.get("then", True), b.get("else", True)
        out.setdefault("allOf", []).append({"anyOf": [{"allOf": [cond, then]}, {"allOf": [{"not": cond}, other]}]})
        b = {k: v for k, v in b.items() if k not in ("if", "then", "else")}
    for key, value in b.items():
        if key not in out:
            out[key] = value
            continue
        old = out[key]
        if same_json(old, value):
            continue
        if key == "type":
            out[key] = _intersect_types(old, value)
        elif key in _LOWER:
            out[key] = max(old, value)
        elif key in _UPPER:
            out[key] = min(old, value)
        elif key == "required":
            out[key] = list(dict.fromkeys([*old, *value]))
        elif key == "enum":
            keep = {canonical(v) for v in value}
            out[key] = [v for v in old if canonical(v) in keep]
        elif key == "const":
            out["enum"] = []  # two different constants: nothing matches
        elif key == "uniqueItems":
            out[key] = bool(old) or bool(value)
        elif key == "dependentRequired":
            deps = dict(old)
            for name, need in value.items():
                deps[name] = list(dict.fromkeys([*deps.get(name, []), *need]))
            out[key] = deps
        elif key in ("dependentSchemas", "propertyNames"):
            if key == "propertyNames":
                out[key] = {"allOf": [old, value]}
            else:
                deps = dict(old)
                for name, sub in value.items():
                    deps[name] = {"allOf": [deps[name], sub]} if name in deps else sub
                out[key] = deps
        elif key == "not":
            out[key] = {"anyOf": [old, value]}  # not A and not B == not (A or B)
        elif key in ("anyOf", "oneOf"):
            out.setdefault("allOf", []).append({key: value})  # the translator distributes these
        elif key == "contains":
            raise GrammarError(f"allOf at {pointer(path, 'allOf')}: two different `contains` cannot be combined exactly")
        elif key == "pattern" and isinstance(old, str) and isinstance(value, str):
            try:  # one regex for the strings both patterns find a match in
                both = intersection([old, value])
            except ValueError as exc:
                raise GrammarError(f"allOf at {pointer(path, 'allOf')} combines two 'pattern' values that cannot be intersected: {exc}") from exc
            if both is None:
                raise GrammarError(f"allOf at {pointer(path, 'allOf')} combines two 'pattern' values no string meets together")
            out[key] = both
        else:
            raise GrammarError(f"allOf at {pointer(path, 'allOf')} combines two different {key!r} values; not expressible")
    return out


def enum_values(s: Any) -> list | None:
    """The values `s` lists by `const` (one) or `enum` (both: the const where the enum lists it);
    None where it lists none."""
    if not isinstance(s, dict):
        return None
    values = s.get("enum")
    if "const" in s:
        if isinstance(values, list) and canonical_or_none(s["const"]) not in {canonical_or_none(v) for v in values}:
            return []
        return [s["const"]]
    return values if isinstance(values, list) else None


def name_keywords(names: dict, known_formats: Any) -> dict:
    """A propertyNames schema's keywords that constrain names: annotations, `type: string` and a
    format outside `known_formats` (it constrains nothing) left out."""
    return {k: v for k, v in names.items() if k not in ANNOTATIONS and k not in STRUCTURAL
            and not (k == "type" and v == "string") and not (k == "format" and v not in known_formats)}


def listed_names(names: Any, deref: Callable[[Any], Any], known_formats: Any, depth: int = 0) -> list | None:
    """The names a propertyNames schema admits where it lists them (an enum or const with no
    other constraining keyword, or an anyOf of such, each through its references), else None.
    An enum next to a length (`{"enum": ["a", "bb"], "maxLength": 1}`) lists nothing: read as
    its enum, "bb" was admitted."""
    try:
        names = deref(names)
    except (GrammarError, RecursionError):
        return None
    if not isinstance(names, dict) or depth > 8:
        return None
    kept = name_keywords(names, known_formats)
    if set(kept) in ({"enum"}, {"const"}, {"enum", "const"}):
        return enum_values(kept)
    if set(kept) == {"anyOf"} and isinstance(kept["anyOf"], list) and kept["anyOf"]:
        listed: list = []
        for branch in kept["anyOf"]:
            part = listed_names(branch, deref, known_formats, depth + 1)
            if part is None:
                return None
            listed += [v for v in part if v not in listed]
        return listed
    return None


def _single_string(schema: Any) -> str | None:
    """The one string `{"const": c}` or `{"enum": [c]}` admits, `type: string` beside it or not
    (SchemaStore writes both); None for any other schema."""
    kept = set(schema) - ANNOTATIONS if isinstance(schema, dict) else set()
    if "type" in kept and "string" not in _types(schema["type"]):
        return None
    values = enum_values(schema) if kept - {"type"} in ({"const"}, {"enum"}) else None
    return values[0] if values is not None and len(values) == 1 and isinstance(values[0], str) else None


def discriminated_conditions(node: dict) -> None:
    """An allOf of `if: {properties: {K: {const: c_i}}}, then: T_i` (no else; distinct string
    constants, `enum: [c_i]` alike) becomes one anyOf: an object with `K = c_i` and T_i for each
    i, or K none of them, or (where K is not required) K absent and every T_i (an `if` without
    `required` holds then; with `required: [K]` none does), or (where the node admits more than
    objects) a non-object and every T_i (each `if` holds vacuously; none where each `if` also
    says `type: object`, as v2ray's config does). GitHub's issue forms (six
    item kinds, K required) and minecraft's number providers (sixteen, K optional, numbers too):
    written as separate conditions, llguidance intersects their two-way choices, 2^n
    combinations, and refuses the schema as too large; our compiler built all 2^n, nearly all
    contradictory (minecraft-predicate: 145,000 schema nodes, 292 s). Changes `node` (a copy of
    the caller's) in place."""
    members = node.get("allOf")
    if not isinstance(members, list):
        return
    required = node.get("required") if isinstance(node.get("required"), list) else []
    key, chosen, branches, rest, thens, demands, typed = None, [], [], [], [], set(), set()
    for member in members:
        cond = member.get("if") if isinstance(member, dict) and not set(member) - {"if", "then"} - ANNOTATIONS else None
        props = (cond.get("properties") if isinstance(cond, dict) and not set(cond) - {"properties", "required", "type"} - ANNOTATIONS
                 and cond.get("type", "object") == "object" else None)
        if not (isinstance(props, dict) and len(props) == 1 and cond.get("required", [next(iter(props))]) == [next(iter(props))]):
            rest.append(member)
            continue
        name, value = next(iter(props.items()))
        const = _single_string(value)
        if const is None or const in chosen or (key is not None and name != key):
            rest.append(member)
            continue
        key = name
        chosen.append(const)
        thens.append(member.get("then", True))
        demands.add("required" in cond)
        typed.add("type" in cond)  # `type: object` in the if: a non-object meets no `then`
        branches.append({"type": "object", "required": [name], "properties": {name: {"const": const}}, "allOf": [thens[-1]]})
    if len(chosen) < 2 or len(demands) != 1 or len(typed) != 1:
        return
    branches.append({"type": "object", "required": [key], "properties": {key: {"not": {"enum": chosen}}}})
    # the other allOf members hold too: one that requires K, or says `type: object`, leaves the
    # branches below empty (anyRuleType in yippee-ki's config: its base member requires `name`;
    # the absent branch intersected nine recursive `then`s, 13 s to refuse the schema)
    plain = [m for m in rest if isinstance(m, dict)]
    required = [*required, *(k for m in plain if isinstance(m.get("required"), list) for k in m["required"])]
    if key not in required:
        absent = {"type": "object", "properties": {key: False}}
        branches.append(absent if demands == {True} else {**absent, "allOf": thens})
    if node.get("type") != "object" and all(m.get("type") != "object" for m in plain):
        branches.append({"type": ["null", "boolean", "number", "string", "array"], **({} if typed == {True} else {"allOf": thens})})
    if key in required:  # the node requires K anyway: a branch's `required: [K]` says nothing more (and,
        for b in branches:  # kept, pins K and the keys declared before it in place)
            if b.get("required") == [key]:
                del b["required"]
    node["allOf"] = [*rest, {"anyOf": branches}]


def canonical_or_none(value: Any) -> str | None:
    try:
        return canonical(value)
    except (GrammarError, TypeError):
        return None


def _member_schema(s: dict, name: str, path: str) -> Any:
    if name in s.get("properties", {}):
        return s["properties"][name]
    matching = [sub for pat, sub in s.get("patternProperties", {}).items() if _search(pat, name, path)]
    if matching:
        return {"allOf": matching}
    return s.get("additionalProperties", True)


def _search(pattern: str, text: str, path: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error as exc:
        raise GrammarError(f"patternProperties key {pattern!r} at {at(path)} is not a valid regex: {exc}") from exc


def _both(a: Any, b: Any) -> Any:
    """The schema of values meeting `a` and `b` (boolean schemas and repeats folded)."""
    if a is True or a == b:
        return b
    if b is True:
        return a
    return False if False in (a, b) else {"allOf": [a, b]}


def _merge_object_members(out: dict, b: dict, path: str) -> None:
    a = dict(out)
    pa, pb = a.get("patternProperties"), b.get("patternProperties")
    if pa and pb and pa != pb:
        if set(pa) != set(pb):
            raise GrammarError(f"allOf at {pointer(path, 'allOf')} combines two different patternProperties; not expressible")
        # the same patterns: a key matches the same ones on both sides, and meets both schemas of each
        both = {p: _both(pa[p], pb[p]) for p in pa}
        a, b = {**a, "patternProperties": both}, {**b, "patternProperties": both}
    names = list(dict.fromkeys([*a.get("properties", {}), *b.get("properties", {})]))
    props = {}
    for name in names:
        sa, sb = _member_schema(a, name, path), _member_schema(b, name, path)
        props[name] = _both(sa, sb)
    out["properties"] = props
    patterned, other = (a, b) if a.get("patternProperties") else (b, a)
    if patterned.get("patternProperties"):
        # (equal patterns on both sides: a key matching one matches it on both; copied.) Else an
        # undeclared key matching one side's pattern p meets p's schema and the other side's
        # additionalProperties (that side has no patterns): p carries both, exact unless p also
        # matches a name the other side declares (p's schema reaches it; additionalProperties not)
        other_extra = True if other.get("patternProperties") else other.get("additionalProperties", True)
        merged = dict(patterned["patternProperties"])
        if other_extra is not True:
            for pattern, sub in merged.items():
                if any(_search(pattern, name, path) for name in other.get("properties", {})):
                    raise GrammarError(f"allOf at {pointer(path, 'allOf')} combines patternProperties with another branch's "
                                       f"additionalProperties, and pattern {pattern!r} matches a name that branch declares; "
                                       "not expressible")
                merged[pattern] = _both(sub, other_extra)
        if other_extra is False:  # every undeclared key is refused either way
            out.pop("patternProperties", None)
        else:
            out["patternProperties"] = merged
    xa, xb = a.get("additionalProperties", True), b.get("additionalProperties", True)
    extra = xa if xb is True else xb if xa is True else False if False in (xa, xb) else {"allOf": [xa, xb]}
    if extra is True:
        out.pop("additionalProperties", None)
    else:
        out["additionalProperties"] = extra


def _merge_array_items(out: dict, b: dict) -> None:
    a = dict(out)
    pa, pb = a.get("prefixItems", []), b.get("prefixItems", [])
    ia, ib = a.get("items", True), b.get("items", True)
    prefix = []
    for i in range(max(len(pa), len(pb))):
        sa = pa[i] if i < len(pa) else ia
        sb = pb[i] if i < len(pb) else ib
        prefix.append(sa if sb is True else sb if sa is True else {"allOf": [sa, sb]})
    if prefix:
        out["prefixItems"] = prefix
    items = ia if ib is True else ib if ia is True else False if False in (ia, ib) else {"allOf": [ia, ib]}
    if items is True:
        out.pop("items", None)
    else:
        out["items"] = items
