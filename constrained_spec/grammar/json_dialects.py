"""A schema is read as the draft it declares (`$schema`), resource by resource (`in_declared_drafts`).

Validators of a declared draft ignore keywords later drafts added, as unknown annotations.
SchemaStore's web-manifest (draft 4) lists orientations as `oneOf` of `const`s; a draft-4
validator reads each branch as `{}`, every value meets all eight, so no orientation is valid, and
generating `"landscape"` would be an invalid output. So those keywords are left out (listed on
the log, or refused under `strict`); a nested `$schema` counts from where it stands. Drafts 3 to
7 read only the `$ref` of an object holding one: its siblings are left out too (a sibling `id`
moved the base URI the reference resolves against). A schema without `$schema`, or naming a
draft this module does not know, keeps every keyword (the compilers read the drafts alike).

Draft 3 differs in form, not only in additions, so a resource declaring it is rewritten in draft
4's words: `"required": true` in a property's schema makes the parent require that property,
`divisibleBy` is `multipleOf`, `extends` is `allOf`, `disallow` is a `not`, a `type` listing
schemas or `"any"` is an `anyOf` (or nothing), a `dependencies` string is a one-name list, and
its format names `host-name` and `ip-address` are `hostname` and `ipv4`. Read as later drafts,
these were ignored (invalid outputs; a GitHub schema with `"required": true` beside `"type":
"object"` crashed our compiler). Elsewhere a boolean `required` is draft 3's form in a schema
that does not declare draft 3: not a keyword there, left out and logged (validators of later
drafts ignore it, or fail).
"""

from __future__ import annotations

import re
from typing import Any

from .json_merge import DATA_KEYWORDS, NAME_MAPS, pointer

__all__ = ["declared_draft", "in_declared_drafts", "may_hold_older_forms"]

# keyword -> the first draft that has it (2019: 2019-09, 2020: 2020-12)
_ADDED = {
    "allOf": 4, "anyOf": 4, "oneOf": 4, "not": 4, "minProperties": 4, "maxProperties": 4, "multipleOf": 4,
    "const": 6, "contains": 6, "propertyNames": 6,
    "if": 7, "then": 7, "else": 7,
    "dependentRequired": 2019, "dependentSchemas": 2019, "unevaluatedProperties": 2019, "unevaluatedItems": 2019,
    "minContains": 2019, "maxContains": 2019,
    "prefixItems": 2020,
}  # fmt: skip
_DRAFTS = {"draft-03": 3, "draft-04": 4, "draft-06": 6, "draft-07": 7, "draft/2019-09": 2019, "draft/2020-12": 2020}
_OLDER_FORMS = re.compile(r'"\$schema": "https?://json-schema\.org/(?:draft-0[3467]|draft/2019-09)/|"required": (?:true|false)')
# beside a `$ref`, what drafts 3-7 still read: the pointers' targets, the declared draft
_KEPT_BESIDE_REF = frozenset({"$ref", "$schema", "definitions", "$defs"})
_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples"})  # left out unlisted
DRAFT4_URI = "http://json-schema.org/draft-04/schema#"
_DRAFT3_FORMATS = {"host-name": "hostname", "ip-address": "ipv4"}


def declared_draft(uri: Any) -> int | None:
    """The draft a `$schema` URI names (3, 4, 6, 7, 2019, 2020), or None."""
    if not isinstance(uri, str):
        return None
    found = re.match(r"https?://json-schema\.org/(draft-0\d|draft/\d{4}-\d\d)/schema#?$", uri.strip())
    return _DRAFTS.get(found.group(1)) if found else None


def may_hold_older_forms(text: str) -> bool:
    """A cheap test on the schema's `json.dumps` text: does a resource declare a draft older
    than 2020-12, or does a boolean `required` appear? (Only then has `in_declared_drafts` work.)"""
    return _OLDER_FORMS.search(text) is not None


def in_declared_drafts(schema: Any, left_out: dict[str, str], read: dict[str, str]) -> Any:
    """`schema` as each resource's declared draft reads it: keywords later drafts added left out;
    in drafts 3-7 a `$ref`'s siblings left out (those drafts ignore them, an `id` too: it does not
    move the base URI the `$ref` resolves against; `definitions` stay, pointers reach into them);
    a draft-3 resource rewritten in draft 4's words (its `$schema` then names draft 4); boolean
    `required`s elsewhere left out. `left_out` gets each keyword left out and its first JSON
    pointer; `read` each draft-3 keyword rewritten. Run before references are resolved
    (json_refs.bundle: a sibling `id`) and again over the documents bundled in."""

    def walk(node: Any, draft: int | None, path: str) -> Any:
        if isinstance(node, list):
            return [walk(v, draft, pointer(path, i)) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        draft = declared_draft(node.get("$schema")) or draft
        draft3 = draft == 3
        if draft in (3, 4, 6, 7) and isinstance(node.get("$ref"), str):
            for key in node:
                if key not in _KEPT_BESIDE_REF and key not in _ANNOTATIONS and not (draft3 and key == "required"):
                    left_out.setdefault(key, pointer(path, key))
            node = {key: value for key, value in node.items() if key in _KEPT_BESIDE_REF}
        out: dict[str, Any] = {}
        for key, value in node.items():
            at = pointer(path, key)
            if key == "required" and not isinstance(value, list):
                if not draft3 and isinstance(value, bool):  # draft 3's form where draft 3 is not declared
                    left_out.setdefault(key, at)
                elif not draft3:
                    out[key] = value  # malformed: json_shapes names it
                continue  # in draft 3, read by the parent's `properties`
            if not draft3:
                if draft is not None and _ADDED.get(key, 0) > draft:
                    left_out.setdefault(key, at)
                    continue
                out[key] = value if key in DATA_KEYWORDS else (
                    {name: walk(sub, draft, pointer(at, name)) for name, sub in value.items()}
                    if key in NAME_MAPS and isinstance(value, dict) else walk(value, draft, at))
                continue
            if key in _ADDED or key == "required":  # draft 4's (a list `required`) and later drafts' keywords
                left_out.setdefault(key, at)
            elif key == "$schema" and declared_draft(value) == 3:
                out[key] = DRAFT4_URI
            elif key == "divisibleBy":
                out["multipleOf"] = value
                read.setdefault(key, at)
            elif key == "extends":
                out["allOf"] = [walk(v, 3, pointer(at, i)) for i, v in enumerate(value if isinstance(value, list) else [value])]
                read.setdefault(key, at)
            elif key == "disallow":
                out["not"] = {"anyOf": _type_union(value, lambda v, i: walk(v, 3, pointer(at, i)))}
                read.setdefault(key, at)
            elif key == "type" and (value == "any" or isinstance(value, list) and any(not isinstance(t, str) or t == "any" for t in value)):
                if value != "any" and "any" not in value:  # a union with schemas; with "any": every value
                    out["anyOf"] = _type_union(value, lambda v, i: walk(v, 3, pointer(at, i)))
                read.setdefault(key, at)
            elif key == "dependencies" and isinstance(value, dict):
                out[key] = {name: [dep] if isinstance(dep, str) else walk(dep, 3, pointer(at, name)) for name, dep in value.items()}
            elif key == "properties" and isinstance(value, dict):
                out[key] = {name: walk(sub, 3, pointer(at, name)) for name, sub in value.items()}
                # jsonschema's draft-3 reading: a property whose schema holds a truthy `required`
                names = [name for name, sub in value.items() if isinstance(sub, dict) and sub.get("required")]
                if names:
                    out["required"] = names
                    read.setdefault("required", pointer(at, names[0], "required"))
            elif key == "format" and isinstance(value, str) and value in _DRAFT3_FORMATS:
                out[key] = _DRAFT3_FORMATS[value]
                read.setdefault(key, at)
            elif key in DATA_KEYWORDS:
                out[key] = value
            elif key in NAME_MAPS and isinstance(value, dict):
                out[key] = {name: walk(sub, 3, pointer(at, name)) for name, sub in value.items()}
            else:
                out[key] = walk(value, 3, at)
        return out

    return walk(schema, None, "")


def _type_union(types: Any, walk: Any) -> list[Any]:
    """Draft 3's `type`/`disallow` value (a name, a schema, or a list of them) as anyOf branches."""
    listed = types if isinstance(types, list) else [types]
    return [({} if t == "any" else {"type": t}) if isinstance(t, str) else walk(t, i) for i, t in enumerate(listed)]
