"""Optional keys in any order, for schemas handed to llguidance.

llguidance writes an object's declared properties in the schema's order (its own, then those
merged from allOf parts and anyOf/oneOf branches), then undeclared and patterned keys in any
order. Valid instances put keys in any order (`{"name":..,"includePlatforms":..}` where a merged
branch declares includePlatforms first), so each optional declared key `k` that can move becomes
the patterned key `^k$` with the same schema: the same language for that schema node (k is still
not undeclared, and no other pattern of the node matches it), written in any order after the
declared keys. The unique-keys wrapper keeps a patterned key from repeating.

What may move, so that the schema's own order stays writable: an object is written from a
*family* of schema nodes (the node, then its allOf parts, then its anyOf/oneOf branches, through
references), and llguidance writes every key still declared before any moved one. So a key
stays declared where it is required anywhere in the family, matched by one of its patterns, or
`false` (a key declared by two nodes may move in one and stay in the other: llguidance
intersects its schemas either way, at the declared place). In family order, nodes before the
last one holding such a key move nothing, that node moves what it declares after its last kept
key, later nodes move all; at most 48 keys an object, the last ones (llguidance checks patterns
pairwise: 300 patterned keys took 5 s). A node in several families (a shared definition) moves
only what every family lets it. Nothing moves next to min/max/unevaluatedProperties, where a
reference cannot be followed, or in a closed object (`additionalProperties: false` in its
family, as `closed_objects` makes every object): there llguidance still offers a `,` once
every patterned key is used, and only repeats could follow it (a dead end for a sampler; in an
open object a new key can always follow).
"""

from __future__ import annotations

import re
from typing import Any

from .protocol import GrammarError

__all__ = ["any_order", "exact_key"]

_ONE = ("additionalProperties", "additionalItems", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
        "contains", "not", "if", "then", "else", "items")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_FIXED = {"minProperties", "maxProperties", "unevaluatedProperties"}
_MAX_WAYS = 32  # branch choices planned one by one per object
# llguidance checks an object's patterns pairwise (disjointness): 64 patterned keys compile in
# 0.03 s, 200 in 0.8 s, 300 in 5 s. Past this many, the earlier optional keys stay declared.
_MAX_MOVED = 48


def exact_key(name: str) -> str:
    """A pattern that matches the key `name` alone (read alike by llguidance, ECMA and Python)."""
    return "^" + "".join(c if c.isalnum() or c == "_" or ord(c) > 127 else f"\\x{ord(c):02x}" for c in name) + "$"


def _children(node: dict) -> list[Any]:
    """The subschemas of a schema node (every keyword that holds schemas)."""
    out: list[Any] = []
    for k in _ONE:
        if isinstance(node.get(k), dict):
            out.append(node[k])
    for k in _LIST:
        if isinstance(node.get(k), list):
            out += node[k]
    for k in _MAP:
        if isinstance(node.get(k), dict):
            out += [v for v in node[k].values() if isinstance(v, dict)]
    return out


class _Planner:
    def __init__(self, spec: dict) -> None:
        from .json_schema import _Translator  # noqa: PLC0415 (its reference resolution, on `spec` itself)

        self.spec = spec
        self.keep: dict[int, int] = {}  # id(node) -> how many of its declared keys stay declared
        self.nodes: dict[int, dict] = {}
        self._refs = _Translator(spec, "compact")

    def resolve(self, ref: str) -> dict | None:
        """The node a local JSON-pointer `$ref` names in `spec` (the very object: planning is by
        identity), or None (anchors, other documents, a pointer that does not resolve)."""
        if ref != "#" and not ref.startswith("#/"):
            return None
        try:
            target = self._refs.resolve(ref, "")
        except GrammarError:
            return None
        return target if isinstance(target, dict) else None

    def families(self, node: dict, seen: frozenset = frozenset()) -> list[list[dict]] | None:
        """The ways an object is written from `node`: per choice of anyOf/oneOf branches, the
        nodes it is written from, in llguidance's order (the node, its reference, allOf parts,
        then the branch). None if a reference cannot be followed or loops back. Past
        _MAX_WAYS ways, the branches of a choice count as all taken (more keys stay declared)."""
        ways: list[list[dict]] = [[node]]
        groups: list[tuple[list[Any], bool]] = []
        if "$ref" in node:
            target = self.resolve(node["$ref"]) if isinstance(node["$ref"], str) else None
            if target is None or id(target) in seen:
                return None
            groups.append(([target], False))
        for k in ("allOf", "anyOf", "oneOf"):
            if isinstance(node.get(k), list):
                groups.append(([p for p in node[k] if isinstance(p, dict)], k != "allOf"))
        for parts, choice in groups:
            options: list[list[list[dict]]] = []
            for part in parts:
                if id(part) in seen:
                    return None
                sub = self.families(part, seen | {id(node)})
                if sub is None:
                    return None
                options.append(sub)
            if not choice:  # every part is written from: one after another
                for sub in options:
                    ways = [w + s for w in ways for s in sub][: _MAX_WAYS + 1]
            elif options:  # one branch
                alternatives = [s for sub in options for s in sub]
                if len(ways) * len(alternatives) > _MAX_WAYS:
                    alternatives = [[n for s in alternatives for n in s]]
                ways = [w + s for w in ways for s in alternatives]
            if len(ways) > _MAX_WAYS:
                ways = [[n for w in ways for n in w]]
        return ways

    def plan(self, root: dict) -> None:
        """Decides, for the object written from `root`'s family, what each node may move."""
        ways = self.families(root)
        if ways is None:  # an unfollowed reference: nothing in this family moves
            for node in self._flat(root):
                self._limit(node, len(node.get("properties", {}) if isinstance(node.get("properties"), dict) else {}))
            return
        for members in ways:
            self._plan_way(members)

    def _plan_way(self, members: list[dict]) -> None:
        required = {k for m in members if isinstance(m.get("required"), list) for k in m["required"] if isinstance(k, str)}
        try:
            patterns = [re.compile(p) for m in members if isinstance(m.get("patternProperties"), dict) for p in m["patternProperties"]]
        except (re.error, TypeError):
            patterns = None
        fixed = any(_FIXED & set(m) for m in members)
        kept_last = []  # per member: index after its last kept key (0: none kept)
        for m in members:
            props = m.get("properties") if isinstance(m.get("properties"), dict) else {}
            last = 0
            for i, (k, v) in enumerate(props.items()):
                if (patterns is None or fixed or k in required or v is False or any(p.search(k) for p in patterns)):
                    last = i + 1
            kept_last.append(last)
        owner = max((i for i, last in enumerate(kept_last) if last), default=-1)
        sizes = [len(m["properties"]) if isinstance(m.get("properties"), dict) else 0 for m in members]
        if any(m.get("additionalProperties", True) is False for m in members):
            owner = len(members)  # closed: after a `,` llguidance would offer used patterned keys only
        keeps = [size if i < owner else kept_last[i] if i == owner else 0 for i, size in enumerate(sizes)]
        budget = _MAX_MOVED  # moved keys come last in family order: a budget keeps a suffix of them
        for i in reversed(range(len(members))):
            moved = min(sizes[i] - keeps[i], budget)
            keeps[i] = sizes[i] - moved
            budget -= moved
        for m, keep in zip(members, keeps):
            self._limit(m, keep)

    def _flat(self, node: dict, seen: frozenset = frozenset()) -> list[dict]:
        """The family's nodes reachable without references."""
        out = [node]
        for k in ("allOf", "anyOf", "oneOf"):
            for part in node.get(k, []) if isinstance(node.get(k), list) else []:
                if isinstance(part, dict) and id(part) not in seen:
                    out += self._flat(part, seen | {id(node)})
        return out

    def _limit(self, node: dict, keep: int) -> None:
        self.nodes[id(node)] = node
        self.keep[id(node)] = max(self.keep.get(id(node), 0), keep)

    def walk(self) -> None:
        """Plans every family: an object may start at any node (a merge part also starts one:
        planning more families only keeps more keys declared)."""
        todo, seen = [self.spec], set()
        while todo:
            node = todo.pop()
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            self.plan(node)
            todo += _children(node)


def any_order(spec: Any) -> Any:
    """`spec` (a schema for llguidance) with the optional keys that can move as exact patterns;
    `spec` itself is not changed, and is what comes back where no key moves."""
    if not isinstance(spec, dict):
        return spec
    planner = _Planner(spec)
    planner.walk()
    if not any(keep < len(planner.nodes[i].get("properties", {})) for i, keep in planner.keep.items()):
        return spec

    def rebuild(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out = dict(node)
        for k in _ONE:
            if isinstance(out.get(k), dict):
                out[k] = rebuild(out[k])
        for k in _LIST:
            if isinstance(out.get(k), list):
                out[k] = [rebuild(v) for v in out[k]]
        for k in _MAP:
            if isinstance(out.get(k), dict):
                out[k] = {name: rebuild(v) for name, v in out[k].items()}
        props = node.get("properties")
        keep = planner.keep.get(id(node))
        if keep is None or not isinstance(props, dict) or keep >= len(props):
            return out
        names = list(props)
        moved = names[keep:]
        rebuilt = out["properties"]
        out["properties"] = {k: rebuilt[k] for k in names[:keep]}
        out["patternProperties"] = {**out.get("patternProperties", {}), **{exact_key(k): rebuilt[k] for k in moved}}
        if not out["properties"]:
            del out["properties"]
        return out

    return rebuild(spec)
