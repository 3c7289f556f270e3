"""Which schema nodes an object is written from, known from its path alone (for required keys in any order).

llguidance writes an object's required keys in declared order, before any patterned key
(json_key_order.py moves only optional keys to patterns). Valid instances put required keys
anywhere (`{"shape":"circle","radius":10}` where `radius` is declared first). A required key can
move too where something else enforces it: `required_keys.py` tracks every open object and
refuses the `}` that would close one without its required keys. That tracker must know every
node an object is validated against whose required keys moved, from the bytes alone, so they may
move only on *fixed* nodes: reached from the root along edges that hold for every value where
they apply (`$ref`, `allOf`, `properties`, `patternProperties` and `additionalProperties`
where every reader agrees on each pattern (the key's text tells which apply: docker-compose's
services under `^[a-zA-Z0-9._-]+$`), `items` for every element, an anyOf/oneOf branch that holds
wherever it can apply: the only branch, or the only one admitting objects (arrays), admitting
nothing else and saying nothing of the other container: `_typed_branches`) and along no other
edge (other anyOf/oneOf branches, conditions, `not`, patterns read differently (`\\w`, `.`),
tuple items, `contains`: which of those hold depends on the value). A node also reached through
such an edge is not fixed.

Contexts: the fixed nodes one value is validated against (a node with its `$ref` and `allOf`
parts), interned as small ints; 0 is the empty context (nothing tracked below it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .regular import agreed_search

__all__ = ["KeyContexts", "Released", "Way", "fixed_nodes"]

_SKIPPED = ("enum", "const", "default", "examples", "$defs", "definitions")  # hold no schema applied here


def _patterns(node: dict) -> list[tuple[Callable[[str], bool], Any]] | None:
    """`node`'s patternProperties as (a test of a key, its schema), where every reader agrees on
    each pattern (regular.agreed_search: the tracker decides from a key's text alone which apply,
    as llguidance does); None where one cannot be told so."""
    patterns = node.get("patternProperties", {})
    if not isinstance(patterns, dict):
        return None
    tests = [(agreed_search(p) if isinstance(p, str) else None, v) for p, v in patterns.items()]
    return None if any(test is None for test, _ in tests) else tests


def _every_extra(node: dict) -> dict | None:
    """The schema of every undeclared key's value matched by no pattern (additionalProperties,
    where the patterns can be told: _patterns)."""
    value = node.get("additionalProperties")
    return value if isinstance(value, dict) and _patterns(node) is not None else None


def _every_item(node: dict) -> dict | None:
    """The schema of every array element (items, where no tuple form numbers them)."""
    value = node.get("items")
    return value if isinstance(value, dict) and "prefixItems" not in node else None


# what the fixed walk and the tracker read of a node, by the kind of value it is for
_READS = {"object": ("properties", "additionalProperties", "patternProperties", "required"), "array": ("items", "prefixItems")}


def _reads_only(branch: dict, kind: str, resolve: Callable[[str], dict | None]) -> bool:
    """Whether `branch`, its references, parts and branches say nothing the tracker reads for
    the other kind of container (so a context holding it is right for both)."""
    other = _READS["array" if kind == "object" else "object"]
    parts, seen = [branch], set()
    while parts:
        part = parts.pop()
        if not isinstance(part, dict) or id(part) in seen:
            continue
        seen.add(id(part))
        if any(k in part for k in other):
            return False
        parts += [resolve(part["$ref"])] if isinstance(part.get("$ref"), str) else []
        parts += [sub for k in ("allOf", "anyOf", "oneOf") if isinstance(part.get(k), list) for sub in part[k]]
    return True


Kinds = Callable[[Any], "set[str] | None"]  # the JSON types a schema admits at most, None: any
Way = tuple[frozenset[str], frozenset[str]]  # a lifted branch: (the keys it needs, the keys that rule it out)


def _any_kind(schema: Any) -> None:
    return None


def _typed_branches(node: dict, resolve: Callable[[str], dict | None], kinds_of: Kinds) -> list[dict]:
    """The anyOf/oneOf branches that hold wherever they can apply: the only branch there is; the
    only one admitting objects (arrays) where it admits nothing else and says nothing of arrays
    (objects). Every object (array) meeting `node` meets that branch, and it cannot apply to any
    other value. Empty where neither holds."""
    keys = [k for k in ("anyOf", "oneOf") if isinstance(node.get(k), list)]
    if len(keys) != 1 or not all(isinstance(b, (dict, bool)) for b in node[keys[0]]):
        return []
    branches = node[keys[0]]
    if len(branches) == 1:
        return [branches[0]] if isinstance(branches[0], dict) else []
    kinds = [kinds_of(b) for b in branches]
    found = []
    for kind in ("object", "array"):
        admitting = [i for i, k in enumerate(kinds) if k is None or kind in k]
        if len(admitting) == 1 and kinds[admitting[0]] == {kind} and isinstance(branches[admitting[0]], dict) \
                and _reads_only(branches[admitting[0]], kind, resolve):
            found.append(branches[admitting[0]])
    return found


def _edges(node: dict, resolve: Callable[[str], dict | None], kinds: Kinds) -> tuple[list[dict], list[Any]]:
    """(the subschemas that apply wherever `node` applies or to every property/element of a
    given name, the subschemas whose application depends on the value)."""
    fixed: list[dict] = []
    chosen: list[Any] = []
    typed = _typed_branches(node, resolve, kinds)
    fixed += typed
    for key, value in node.items():
        if key in _SKIPPED:
            continue
        if key in ("anyOf", "oneOf") and typed:
            chosen += [v for v in value if isinstance(v, dict) and all(v is not b for b in typed)]
            continue
        if key == "$ref":
            target = resolve(value) if isinstance(value, str) else None
            if target is not None:
                fixed.append(target)
        elif key == "allOf" and isinstance(value, list):
            fixed += [v for v in value if isinstance(v, dict)]
        elif isinstance(value, dict) and (key == "properties" or key == "patternProperties" and _patterns(node) is not None):
            fixed += [v for v in value.values() if isinstance(v, dict)]
        elif (key == "additionalProperties" and value is _every_extra(node)) or (key == "items" and value is _every_item(node)):
            fixed.append(value)
        elif isinstance(value, dict):
            chosen.append(value)
        elif isinstance(value, list):
            chosen += [v for v in value if isinstance(v, (dict, list))]
    return fixed, chosen


def fixed_nodes(spec: Any, resolve: Callable[[str], dict | None], kinds: Kinds = _any_kind) -> set[int]:
    """The ids of the nodes of `spec` that are fixed (see the module docstring). `kinds`: the
    types a node admits (the compiler's reading, json_schema's `kinds`; by default any), which
    tells the branches every object or array meets."""
    if not isinstance(spec, dict):
        return set()
    reached: set[int] = set()
    chosen: list[Any] = []
    todo: list[dict] = [spec]
    while todo:
        node = todo.pop()
        if id(node) in reached:
            continue
        reached.add(id(node))
        fixed, more = _edges(node, resolve, kinds)
        todo += fixed
        chosen += more
    anywhere: set[int] = set()  # everything under a value-dependent edge, through every edge
    while chosen:
        node = chosen.pop()
        if isinstance(node, list):
            chosen += [v for v in node if isinstance(v, (dict, list))]
            continue
        if not isinstance(node, dict) or id(node) in anywhere:
            continue
        anywhere.add(id(node))
        fixed, more = _edges(node, resolve, kinds)
        chosen += fixed + more
    return reached - anywhere


class KeyContexts:
    """The tracker's tables: for a context, the required keys its nodes left to the tracker, the
    context of a key's value and of an array's elements. Built lazily, kept per compiled grammar."""

    def __init__(self, spec: dict, freed: dict[int, frozenset[str]], fixed: set[int], resolve: Callable[[str], dict | None],
                 kinds: Kinds = _any_kind, any_of: dict[int, tuple[Way, ...]] | None = None,
                 dependent: dict[int, dict[str, frozenset[str]]] | None = None) -> None:
        self._freed = freed
        self._any_of = any_of or {}
        self._dependent = dependent or {}
        self._fixed = fixed
        self._resolve = resolve
        self._kinds = kinds
        self._ids: dict[frozenset[int], int] = {frozenset(): 0}
        self._nodes: list[tuple[dict, ...]] = [()]  # context -> its nodes
        # context -> the key sets the tracker enforces, one of which an object must hold whole
        # (its nodes' freed keys, with one set of each lifted anyOf: Released.any_of)
        self.required: list[tuple[frozenset[str], ...]] = [(frozenset(),)]
        # context -> per way of `required`, the keys whose writing rules it out (None: no way has any)
        self.ruled_out: list[tuple[frozenset[str], ...] | None] = [None]
        # context -> key -> the keys an object holding it must hold too (Released.dependent)
        self.dependent: list[dict[str, frozenset[str]]] = [{}]
        self._by_key: dict[tuple[int, str], int] = {}
        self._by_item: dict[int, int] = {}
        self.root = self._intern(self._expand([spec]))

    def _expand(self, nodes: list[Any]) -> dict[int, dict]:
        """The fixed nodes among `nodes` with their `$ref` targets and `allOf` parts."""
        out: dict[int, dict] = {}
        todo = [n for n in nodes if isinstance(n, dict)]
        while todo:
            node = todo.pop()
            if id(node) in out or id(node) not in self._fixed:
                continue
            out[id(node)] = node
            if isinstance(node.get("$ref"), str):
                target = self._resolve(node["$ref"])
                if target is not None:
                    todo.append(target)
            if isinstance(node.get("allOf"), list):
                todo += [p for p in node["allOf"] if isinstance(p, dict)]
            todo += _typed_branches(node, self._resolve, self._kinds)
        return out

    def _intern(self, nodes: dict[int, dict]) -> int:
        key = frozenset(nodes)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._nodes)
            self._nodes.append(tuple(nodes.values()))
            ways = [(frozenset().union(*(self._freed.get(i, frozenset()) for i in nodes)), frozenset())]
            for i in nodes:
                if i in self._any_of:
                    ways = [(keys | more, out | ruled) for keys, out in ways for more, ruled in self._any_of[i]]
            # a way holding another's keys and the keys ruling it out is met only where that one is
            ways = list(dict.fromkeys(ways))
            ways = [w for w in ways if not any(o != w and o[0] <= w[0] and o[1] <= w[1] for o in ways)]
            self.required.append(tuple(keys for keys, _ in ways))
            self.ruled_out.append(tuple(out for _, out in ways) if any(out for _, out in ways) else None)
            dependent: dict[str, frozenset[str]] = {}
            for i in nodes:
                for name, needs in self._dependent.get(i, {}).items():
                    dependent[name] = dependent.get(name, frozenset()) | needs
            self.dependent.append(dependent)
        return found

    def of_key(self, context: int, key: str) -> int:
        """The context of the value of `key` in an object of `context`."""
        found = self._by_key.get((context, key))
        if found is None:
            values: list[Any] = []
            for node in self._nodes[context]:
                props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
                matched = [v for test, v in _patterns(node) or () if test(key)]
                extra = None if key in props or matched else _every_extra(node)
                values += ([props[key]] if key in props else []) + matched + ([extra] if extra is not None else [])
            found = self._by_key[(context, key)] = self._intern(self._expand(values))
        return found

    def of_item(self, context: int) -> int:
        """The context of every element of an array of `context`."""
        found = self._by_item.get(context)
        if found is None:
            values = [_every_item(n) for n in self._nodes[context] if _every_item(n) is not None]
            found = self._by_item[context] = self._intern(self._expand(values))  # context 0: no nodes, 0
        return found


@dataclass
class Released:
    """What json_key_order.any_order left to the tracker: per fixed node of `spec` (by id), the
    required keys it moved out of `required`. `unique_at`: given by the caller, the JSON pointers
    (in `spec`) of the arrays whose items unique_items.py keeps unique: no required key moves
    inside their items (that wrapper sees an item repeated in another key order only once it is
    complete: a dead end)."""

    unique_at: list[str] = field(default_factory=list)
    freed: dict[int, frozenset[str]] = field(default_factory=dict)
    # per fixed node (by id) whose anyOf of bare `required` branches (or overlapping oneOf of
    # them, as llguidance_schema writes it; or a union of closed objects, json_closed_unions)
    # any_order lifted out of `spec`: per branch, its keys (those of one branch the tracker
    # requires) and the keys whose writing rules the branch out
    any_of: dict[int, tuple[Way, ...]] = field(default_factory=dict)
    # per fixed node (by id) whose dependentRequired conditions any_order lifted out of `spec`:
    # each key with the keys an object holding it must hold too
    dependent: dict[int, dict[str, frozenset[str]]] = field(default_factory=dict)
    spec: Any = None
    fixed: set[int] = field(default_factory=set)
    resolve: Callable[[str], dict | None] | None = None
    kinds: Kinds = _any_kind

    def contexts(self) -> KeyContexts | None:
        """The tracker's tables, None where no required key moved."""
        if not (self.freed or self.any_of or self.dependent) or self.resolve is None:
            return None
        return KeyContexts(self.spec, self.freed, self.fixed, self.resolve, self.kinds, self.any_of, self.dependent)
