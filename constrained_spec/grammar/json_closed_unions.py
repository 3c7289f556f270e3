"""A union of closed objects, written as one object (its required keys then move like optional ones).

llguidance writes an object's required keys, and the optional keys declared before them, in
schema order. In a union branch they cannot move (json_required.py: which branch holds is known
only from the keys): F5's AS3 `frontend`, a `oneOf` of an iApp object and a virtual server
object, refused `partition` then `mode` where the server object declares `mode` first.

Where every branch is a closed object and a key several branches declare has one schema there,
the union is the one closed object declaring every branch's keys whose keys all come from one
branch and hold that branch's required keys:

    {properties: every branch's, additionalProperties: false,
     anyOf: [{allOf: [{required: R_i}, {properties: {k: false}} for each k branch i does not declare]}]}

the same language as the anyOf of the branches, and as their oneOf where no object meets two
branches (for each two, one requires a key the other does not declare). That anyOf is
json_key_order's "exactly one of these" (`_lifted`, `_branch_ways`): the tracker requires some
branch's keys whole, a branch dropping out once a key it does not declare is written, and the
keys move like optional ones. Only on fixed nodes (the tracker knows their objects from the
path) and where no `$ref` points inside the union.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from copy import deepcopy
from typing import Any

from .json_merge import ANNOTATIONS, same_json

__all__ = ["closed_unions_merged"]

_BESIDE = ANNOTATIONS | {"$comment", "type"}  # what a union's node may say besides its union
_BRANCH = ANNOTATIONS | {"$comment", "type", "properties", "required", "additionalProperties"}


def closed_unions_merged(spec: dict, fixed: set[int], own: Callable[[Any], Any],
                         pointed: Callable[[], set[tuple[str, ...]]]) -> tuple[dict, set[int]] | None:
    """A copy of `spec` with each fixed node that is only a union of closed objects (see the
    module docstring) written as one object, and the ids of those objects in the copy; None
    where no node is such. `fixed`: the ids of `spec`'s fixed nodes (json_required.fixed_nodes);
    `own`: a branch, the node it names where it is only a `$ref` (json_key_order._through_ref);
    `pointed`: the paths `spec`'s local `$ref`s name (asked once a union qualifies)."""
    found: list[tuple[dict, dict]] = []
    refs: set[tuple[str, ...]] | None = None
    for node, path in _nodes(spec, ()):
        if id(node) not in fixed or not ("anyOf" in node or "oneOf" in node):
            continue
        merged = _merged(node, own)
        if merged is None:
            continue
        refs = pointed() if refs is None else refs
        if not any(len(ref) > len(path) and ref[: len(path)] == path for ref in refs):
            found.append((node, merged))
    if not found:
        return None
    memo: dict[int, Any] = {}
    copy = deepcopy(spec, memo)
    for node, merged in found:
        target = memo[id(node)]
        target.clear()
        target.update(merged)
    return copy, {id(memo[id(node)]) for node, _ in found}


def _merged(node: dict, resolved: Callable[[Any], Any]) -> dict | None:
    """The one closed object a union node means (the module docstring), None where it is not such a node."""
    unions = [k for k in ("anyOf", "oneOf") if k in node]
    if len(unions) != 1 or set(node) - _BESIDE - {unions[0]} or node.get("type", "object") != "object":
        return None
    branches = node[unions[0]]
    if not isinstance(branches, list) or len(branches) < 2:
        return None
    objects: list[dict] = []
    for branch in branches:
        own = resolved(branch)
        if not isinstance(own, dict) or set(own) - _BRANCH or own.get("additionalProperties") is not False \
                or own.get("type", "object") != "object":
            return None
        props, required = own.get("properties"), own.get("required")
        if not isinstance(props, dict) or not props or not all(v is True or isinstance(v, dict) for v in props.values()) \
                or not isinstance(required, list) or not required or not all(isinstance(k, str) and k in props for k in required):
            return None
        objects.append(own)
    if "type" not in node and not all("type" in own for own in objects):
        return None  # a branch without a type takes every non-object: not one object
    declared: dict[str, list[Any]] = {}
    for own in objects:
        for name, value in own["properties"].items():
            declared.setdefault(name, []).append(value)
    if not all(same_json(_said(value), _said(values[0])) for values in declared.values() for value in values[1:]):
        return None  # a key two branches give different schemas: which one applies is the branch's
    if unions[0] == "oneOf" and any(set(a["required"]) <= set(b["properties"]) and set(b["required"]) <= set(a["properties"])
                                    for i, a in enumerate(objects) for b in objects[i + 1:]):
        return None  # an object may meet two branches: oneOf refuses it, the merged object would not
    ways = [{"allOf": [{"required": list(dict.fromkeys(own["required"]))},
                       *({"type": "object", "properties": {name: False}} for name in declared if name not in own["properties"])]}
            for own in objects]
    said = {k: deepcopy(v) for k, v in node.items() if k in ANNOTATIONS or k == "$comment"}
    return {**said, "type": "object", "properties": {name: deepcopy(values[0]) for name, values in declared.items()},
            "additionalProperties": False, "anyOf": ways}


def _said(schema: Any) -> Any:
    """A property's schema less its own annotations (a description differs, the values taken do not)."""
    return {k: v for k, v in schema.items() if k not in ANNOTATIONS and k != "$comment"} if isinstance(schema, dict) else schema


def _nodes(value: Any, path: tuple[str, ...]) -> Iterator[tuple[dict, tuple[str, ...]]]:
    """Every object under `value` (schemas and data alike: only fixed ones are merged) with its path."""
    todo = [(value, path)]
    while todo:
        value, path = todo.pop()
        if isinstance(value, dict):
            yield value, path
            todo += [(v, (*path, k)) for k, v in value.items() if isinstance(v, (dict, list))]
        elif isinstance(value, list):
            todo += [(v, (*path, str(i))) for i, v in enumerate(value) if isinstance(v, (dict, list))]
