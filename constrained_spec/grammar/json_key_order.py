"""Optional keys in any order, for schemas handed to llguidance.

llguidance writes an object's declared properties in the schema's order (its own and those
merged from a `$ref`, allOf parts and anyOf/oneOf branches, in the order the node writes those
keywords), then undeclared and patterned keys in any order. The planner below takes a family
in a reader's order instead (the node's own `properties` first, then the rest): where a node
writes `allOf`/`anyOf` before `properties`, llguidance's own declared order may then be the one
not kept, but a reader's is (measured: the bench corpus' asmdef instances, `name` first, are
accepted so and refused the other way; on every 3rd JSONSchemaBench schema the two differ by 2
of 4,600 valid instances). Valid instances put keys in any order (`{"name":..,"includePlatforms":..}` where a merged
branch declares includePlatforms first), so each optional declared key `k` that can move becomes
the patterned key `^k$` with the same schema: the same language for that schema node (k is still
not undeclared, and no other pattern of the node matches it), written in any order after the
declared keys. The unique-keys wrapper keeps a patterned key from repeating.

What may move, so that the schema's own order stays writable: an object is written from a
*family* of schema nodes (the node, its allOf parts, its anyOf/oneOf branches, through
references), and llguidance writes every key still declared before any moved one. So a key
stays declared where it is required anywhere in the family or matched by one of its patterns
(a key declared by two nodes may move in one and stay in the other: llguidance intersects its
schemas either way, at the declared place); a key `false` stays declared too, but is never
written, so it holds no place in the order. In family order, nodes before the last one holding
a kept key it declares first move nothing (llguidance writes a key where it is first declared: a
key an earlier node declares holds no place of its own), that node moves what it declares after
its last kept key, later nodes what they declare after their last kept key. Moved keys of one node with the same schema share one pattern
`^(?:a|b)$`; at most 48 patterns an object, the last keys (llguidance checks patterns pairwise:
300 took 5 s; one of 10,000 alternatives 0.1 s). A node in several families (a shared
definition) moves only what every family lets it. Nothing moves next to
min/max/unevaluatedProperties or where a reference cannot be followed, nor inside the value of a
key two merged members declare (llguidance merges those values, patterns included, and refuses
overlapping ones: jfrog-pipelines), nor in what such a value references. A closed object
(`additionalProperties: false`, as `closed_objects` makes every object) moves only where its
key count tells when it is full (see `_counted`): it gets `maxProperties` = its key count, as
llguidance would otherwise still offer a `,` once every patterned key is used, and only
repeats could follow (a dead end for a sampler; in an open object a new key can always follow).
A `$ref` pointing into a moved key follows its schema to `$defs`. The branches of a union
told apart by a required key's constant are also written with that key first
(`_discriminator_first`): their required keys cannot move; where the union's node declares the
keys itself, they go into each branch first (`_spreads`). A union of closed objects those leave
as it is becomes one closed object (json_closed_unions.py) whose branches' required keys `_lifted`
gives to the tracker.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from copy import deepcopy
from typing import Any
from urllib.parse import quote

from .json_closed_unions import closed_unions_merged
from .json_merge import ANNOTATIONS, STRUCTURAL, VALIDATION, enum_values, pointer_parts, written_text
from .json_required import Released, Way, fixed_nodes
from .json_schema import _required  # noqa: PLC2701 (the compiler's own reading of `required`)
from .protocol import GrammarError

__all__ = ["any_order", "exact_key", "exact_keys"]

_ONE = ("additionalProperties", "additionalItems", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
        "contains", "not", "if", "then", "else", "items")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_FIXED = {"minProperties", "maxProperties", "unevaluatedProperties"}
_MAX_WAYS = 64  # branch choices planned one by one per object (past it: planned as one; 226 ways took 0.2 s more)
_MAX_DISCRIMINATED = 32  # unions written kind first per schema
_MAX_CHOICES = 32  # branches a lifted closed object's "exactly one" parts are written out as
# llguidance checks an object's patterns pairwise (disjointness): 64 patterns compile in 0.03 s,
# 200 in 0.8 s, 300 in 5 s; one pattern of 10,000 alternatives in 0.1 s. So moved keys with the
# same schema share one pattern, and past this many patterns an object's earlier optional keys
# stay declared.
_MAX_PATTERNS = 48
_COUNT_BLOCKERS = {"patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
                   "dependentSchemas", "dependencies", "unevaluatedProperties", "if"}
_FAMILY = frozenset({"properties", "$ref", "allOf", "anyOf", "oneOf"})
_CONSTRAINING = VALIDATION - {"$ref", "allOf", "anyOf", "oneOf"}  # those make the family
_MOVED_DEFS = "constrained_spec_moved"  # where a moved key's schema goes when a $ref points into it


def _signature(schema: Any) -> str | None:
    """Equal for two property schemas that admit the same values by their validation keywords
    (top-level annotations and unknown keywords aside), None where it cannot tell."""
    if isinstance(schema, dict):
        schema = {k: v for k, v in schema.items() if k in VALIDATION or (k in STRUCTURAL and k != "$comment")}
    try:
        return written_text(schema)  # keys sorted would give a nested object's order to its twin
    except (TypeError, ValueError):
        return None


def exact_key(name: str) -> str:
    """A pattern that matches the key `name` alone (read alike by llguidance, ECMA and Python)."""
    return "^" + "".join(c if c.isalnum() or c == "_" or ord(c) > 127 else f"\\x{ord(c):02x}" for c in name) + "$"


def exact_keys(pattern: str) -> list[str] | None:
    """The keys a pattern written by exact_key (or `^(?:a|b)$`) matches, None for other patterns."""
    body = pattern[4:-2] if pattern.startswith("^(?:") and pattern.endswith(")$") else pattern[1:-1] if pattern.startswith("^") and pattern.endswith("$") else None
    if body is None:
        return None
    names = []
    for part in body.split("|"):
        name = re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), part)
        if exact_key(name)[1:-1] != part:
            return None
        names.append(name)
    return names


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


def _every_node(*roots: Any, resolve: Callable[[str], dict | None] | None = None) -> Iterator[dict]:
    """Each schema node under `roots` once (their subschemas by keyword; with `resolve`, the
    targets of their references too)."""
    todo, seen = list(roots), set()
    while todo:
        node = todo.pop()
        if isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            if resolve is not None and isinstance(node.get("$ref"), str):
                todo.append(resolve(node["$ref"]))
            todo += _children(node)
            yield node


def _counted(members: list[dict], required: set[str], kept_last: list[int], counting: set[int]) -> int | None:
    """Which member of a closed object's family can move its optional keys with `maxProperties`
    set to its key count, or None. It must be the only member that constrains anything (the
    others plain references to it, saying only that the value is an object, or `_lifted`'s
    branches leaving keys out with their own count: `counting`), its keys
    exactly its properties (no patterns, no key false, nothing that constrains keys or their
    count), and those that stay declared (up to its last required key) all required. Then the
    count of keys written reaches the maximum exactly when every key is used, and llguidance
    offers no `,` there."""
    active = [i for i, m in enumerate(members) if set(m) & _CONSTRAINING and not _only_an_object(m) and id(m) not in counting]
    if len(active) != 1:
        return None
    node = members[active[0]]
    props = node.get("properties")
    if not isinstance(props, dict) or node.get("additionalProperties", True) is not False or _COUNT_BLOCKERS & set(node) or False in props.values():
        return None
    return active[0] if all(k in required for k in list(props)[: kept_last[active[0]]]) else None


def _only_an_object(node: dict) -> bool:
    """Whether all `node` constrains is that the value is an object (a union's parent node beside
    its branches: nothing about keys or their count)."""
    return set(node) & _CONSTRAINING == {"type"} and node["type"] in ("object", ["object"])


_LONG_KEYS = [prefix + body for prefix in ("", "x-", "/", "v", "_", "@", "$") for body in ("a" * 60, "b" * 59, "0" * 58, "ab" * 30)]


def _endless(node: dict) -> bool:
    """Whether `node`'s patternProperties admit keys beyond counting: a pattern (as Python reads
    it) with a schema other than `false` that matches three keys of 58 to 62 characters written
    differently among a fixed set (`^x-`, `.+`, `^[a-zA-Z0-9._-]+$`, `^[0-9a-zA-Z_-]{1,255}$`), or
    whose automaton matches infinitely many keys of plain ASCII (`^\\.`, _infinite_plain).
    A closed object with one always has a new key to write after a `,`, so its keys move as an
    open object's do (no `maxProperties` needed to keep a sampler out of a dead end)."""
    patterns = node.get("patternProperties")
    if not isinstance(patterns, dict):
        return False
    for pattern, schema in patterns.items():
        if schema is False or not isinstance(pattern, str) or exact_keys(pattern) is not None:
            continue
        try:
            compiled = re.compile(pattern)
        except (re.error, RecursionError):
            continue
        if sum(1 for key in _LONG_KEYS if compiled.search(key)) >= 3 or _infinite_plain(pattern):
            return True
    return False


def _infinite_plain(pattern: str) -> bool:
    """Whether `pattern` (the narrow reading, regular.pattern_dfa) matches infinitely many keys
    of printable ASCII characters JSON does not escape (`^\\.`: every key starting with a dot)."""
    from .regular import meet, pattern_dfa  # noqa: PLC0415

    try:
        return meet(pattern_dfa(pattern), pattern_dfa(r"^[ !#-\[\]-~]*$")).infinite()
    except (ValueError, RecursionError):
        return False


class _Planner:
    def __init__(self, spec: dict, forced_order: bool = False) -> None:
        from .json_schema import _Translator  # noqa: PLC0415 (its reference resolution, on `spec` itself)

        self.spec = spec
        self.forced_order = forced_order  # closed objects whose declared keys are all required keep schema order
        self.keep: dict[int, int] = {}  # id(node) -> how many of its declared keys stay declared
        self.nodes: dict[int, dict] = {}
        self._refs = _Translator(spec, "compact")
        self._signatures: dict[int, str | None] = {}
        self.merged: set[str] = set()  # keys declared by two members of one family
        self.fixed: set[int] = set()  # ids of the nodes whose required keys may move (json_required.py)
        self.frozen: set[int] = set()  # ids of their values: no key moves anywhere inside them
        self.lent: dict[int, dict[str, list[dict]]] = {}  # fixed node -> its required key -> the members declaring it
        self.counting: set[int] = set()  # ids of _lifted's branches that leave keys out with their count

    def signature(self, schema: Any) -> str | None:
        if id(schema) not in self._signatures:
            self._signatures[id(schema)] = _signature(schema)
        return self._signatures[id(schema)]

    def freeable(self, node: dict, key: str, falsified: set[str], declarers: dict[str, list[dict]]) -> bool:
        """Whether `node`'s required `key` may move: the node is fixed (the required-keys tracker
        knows every object it applies to), members of the family declare the key (the node
        itself, its `$ref` target, allOf parts, a branch: `declarers`), none as `false`,
        and none bounds key names (a required key left unwritable would keep an object open
        forever). It moves only where every member declaring it moves it (`lent`, checked once
        the plan is done): one still declared could no longer be written after a later key."""
        owners = declarers.get(key)
        if (id(node) not in self.fixed or not owners or key in falsified or "propertyNames" in node
                or any("propertyNames" in owner for owner in owners)):
            return False
        for owner in owners:
            if owner is not node:
                self.lent.setdefault(id(node), {}).setdefault(key, []).append(owner)
        return True

    def moves(self, node: dict, key: str) -> bool:
        """Whether the plan moves `node`'s declared `key` to a pattern."""
        keep = self.keep.get(id(node))
        names = list(node["properties"])
        return keep is not None and id(node) not in self.frozen and key in names[keep:] and node["properties"][key] is not False

    def kinds(self, schema: Any) -> set[str] | None:
        """The JSON types `schema` admits at most (the compiler's own reading), None: any."""
        try:
            return self._refs.kinds(schema)
        except (GrammarError, RecursionError):
            return None

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
        nodes it is written from: the node, its reference, allOf parts, then the branch (the
        order a reader takes them in; see the module docstring). None if a reference cannot be
        followed or loops back. Past
        _MAX_WAYS ways, each branch's own choices count as taken at once (a branch written as
        copies in every key order: one way), then, still past it, all branches of the choice
        (more keys stay declared)."""
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
                if len(ways) * len(alternatives) > _MAX_WAYS:  # each branch's own choices as taken at once
                    alternatives = [[n for s in sub for n in s] for sub in options]
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
        declared: set[str] = set()
        twice: set[str] = set()
        falsified: set[str] = set()  # declared `false` by some member: never written, never freed
        declarers: dict[str, list[dict]] = {}
        for m in members:  # a key two members declare keeps a pattern of its own (llguidance merges equal patterns only)
            props = m["properties"] if isinstance(m.get("properties"), dict) else {}
            names = {k for k, v in props.items() if v is not False}  # `false` beside a schema: nothing to merge
            falsified |= set(props) - names
            twice |= declared & names
            declared |= set(props)
            for name in props:
                declarers.setdefault(name, []).append(m)
        self.merged |= twice
        every = {k for m in members if isinstance(m.get("required"), list) for k in m["required"] if isinstance(k, str)}
        required = {k for m in members if isinstance(m.get("required"), list) for k in m["required"]
                    if isinstance(k, str) and not self.freeable(m, k, falsified, declarers)}
        # none moves where llguidance writes a required undeclared key (before every pattern), nor,
        # with forced_order, in a closed object whose declared keys are all required (OpenAI's
        # strict tools): there they stay in schema order, forced text the forced proposer drafts
        # at no model cost (xgrammar and llguidance write them so too)
        strict = declared <= every and any(m.get("additionalProperties", True) is False for m in members)
        if required - declared or (strict and self.forced_order):
            required = every
        for m in members:  # llguidance merges their values too: nothing moves inside them, nor in what
            for name in twice & (set(m["properties"]) if isinstance(m.get("properties"), dict) else set()):
                self._freeze(m["properties"][name])  # they reference (moved keys could meet in overlapping patterns)
        try:
            patterns = [re.compile(p) for m in members if isinstance(m.get("patternProperties"), dict) for p in m["patternProperties"]]
        except (re.error, TypeError):
            patterns = None
        fixed = any(_FIXED & set(m) for m in members if id(m) not in self.counting)
        # a key an earlier member declares sits at that member's place (llguidance merges a key
        # into its first declaration, meeting a pattern `^k$` of a later member together with it;
        # that member keeps it: `required`, patterns, `fixed` are the family's): it pins no keys
        # of earlier members, only keys first declared here do
        kept_last = []  # per member: index after its last kept key (0: none kept)
        pinning = []  # per member: the same, counting only keys no earlier member declares
        earlier: set[str] = set()
        for m in members:
            props = m.get("properties") if isinstance(m.get("properties"), dict) else {}
            last = 0
            for i, k in enumerate(props):
                if props[k] is False and not fixed and patterns is not None:
                    continue  # never written, it holds no place (required too: no object meets the member)
                if patterns is None or fixed or any(p.search(k) for p in patterns) or (k in required and k not in earlier):
                    last = i + 1
            kept_last.append(last)
            pinning.append(max((i + 1 for i, k in enumerate(list(props)[:last]) if k not in earlier), default=0))
            earlier |= set(props)
        sizes = [len(m["properties"]) if isinstance(m.get("properties"), dict) else 0 for m in members]
        counted = None
        closers = [m for m in members if m.get("additionalProperties", True) is False]
        closed = bool(closers) and not all(_endless(m) for m in closers)  # an endless pattern: always a new key
        if closed:
            counted = _counted(members, required, kept_last, self.counting)
        owner = max((i for i, last in enumerate(pinning) if last), default=-1)
        if closed and counted is None:
            owner = len(members)  # after a `,` llguidance would offer used patterned keys only
        keeps = [size if i < owner else kept_last[i] for i, size in enumerate(sizes)]
        # moved keys come last in family order: the pattern budget keeps a suffix of them
        patterns_left = _MAX_PATTERNS
        for i in reversed(range(len(members))):
            schemas = list(members[i]["properties"].values()) if sizes[i] else []
            shared: set[str] = set()  # this node's moved keys with one schema share a pattern
            j = sizes[i]
            while j > keeps[i]:
                if schemas[j - 1] is False:  # stays declared, needs no pattern
                    j -= 1
                    continue
                sig = self.signature(schemas[j - 1])
                if sig is None or sig not in shared:
                    if not patterns_left:
                        break
                    patterns_left -= 1
                    if sig is not None:
                        shared.add(sig)
                j -= 1
            keeps[i] = j
        if counted is not None and keeps[counted] > kept_last[counted]:  # an optional key kept: the count would not tell
            keeps[counted] = sizes[counted]
        for m, keep in zip(members, keeps):
            self._limit(m, keep)

    def _freeze(self, value: Any) -> None:
        """No key moves in `value`, in any node under it, nor in what their references reach
        (minecraft-predicate: two `predicate` keys referencing definitions that share keys)."""
        todo = [value]
        while todo:
            node = todo.pop()
            if not isinstance(node, dict) or id(node) in self.frozen:
                continue
            self.frozen.add(id(node))
            todo += _children(node)
            if isinstance(node.get("$ref"), str):
                todo.append(self.resolve(node["$ref"]))

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
        for node in _every_node(self.spec):
            if not _FAMILY.isdisjoint(node):  # only these make an object's family
                self.plan(node)


def _ref_path(ref: Any) -> tuple[str, ...] | None:
    """The segments of a local JSON-pointer `$ref` ("#/a/b" -> ("a", "b")), None for others."""
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        return None
    return tuple(pointer_parts(ref))


def _refs_in(node: Any, out: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Every local pointer a `$ref` under `node` names."""
    if isinstance(node, dict):
        path = _ref_path(node.get("$ref"))
        if path is not None:
            out.add(path)
        for v in node.values():
            _refs_in(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs_in(v, out)
    return out


def _within(roots: list[dict], resolve: Callable[[str], dict | None]) -> set[int]:
    """The ids of every schema object inside `roots`, their references followed."""
    return {id(node) for node in _every_node(*roots, resolve=resolve)}


def _fixed(spec: dict, planner: "_Planner", released: Released) -> set[int]:
    """The fixed nodes of `spec` (json_required.fixed_nodes), none inside unique arrays
    (Released.unique_at; none at all where one is not found)."""
    fixed = fixed_nodes(spec, planner.resolve, planner.kinds)
    if released.unique_at:
        arrays = [planner.resolve("#" + where) for where in released.unique_at]
        fixed = set() if None in arrays else fixed - _within(arrays, planner.resolve)
    return fixed


# beside an anyOf of bare `required` branches, what could leave a branch's key unwritable or
# the node's object decided elsewhere: no lift there
_NOT_BESIDE_LIFTED = {"allOf", "$ref", "oneOf", "not", "if", "propertyNames", "minProperties", "maxProperties",
                      "unevaluatedProperties", "dependentSchemas", "dependencies", "patternProperties"}


def _vacuous_properties(branch: dict) -> bool:
    """Whether a branch's `properties` (if any) say nothing: `true` or `{}` each (what
    llguidance_schema declares a branch's undeclared required keys with)."""
    props = branch.get("properties", {})
    return isinstance(props, dict) and all(v is True or v == {} for v in props.values())


def _dependency(member: Any) -> tuple[str, frozenset[str]] | None:
    """(A, {B, ...}) for `{"anyOf": [{"properties": {A: false}}, {"required": [A, B, ...]}]}`,
    llguidance_schema's spelling of `dependentRequired` (A absent, or A and B... present); None
    for any other schema."""
    branches = member.get("anyOf") if isinstance(member, dict) and set(member) == {"anyOf"} else None
    if not isinstance(branches, list) or len(branches) != 2 or not all(isinstance(b, dict) for b in branches):
        return None
    absent, present = branches
    props, names = absent.get("properties"), present.get("required")
    if (set(absent) != {"properties"} or not {"required"} <= set(present) <= {"required", "properties"} or not _vacuous_properties(present)
            or not isinstance(props, dict) or len(props) != 1
            or not isinstance(names, list) or not all(isinstance(k, str) for k in names)):
        return None
    name, value = next(iter(props.items()))
    return (name, frozenset(names) - {name}) if value is False and names[:1] == [name] else None


def _absent_keys(part: Any) -> list[str] | None:
    """The keys of one of llguidance_schema's "not all of these keys" parts, at least one of which
    an object must leave out: `{"type": "object", "properties": {k: false}}`, or an anyOf of
    those; None for any other schema."""
    options = part["anyOf"] if isinstance(part, dict) and set(part) == {"anyOf"} and isinstance(part["anyOf"], list) else [part]
    keys = []
    for option in options:
        props = option.get("properties") if isinstance(option, dict) and set(option) <= {"type", "properties"} else None
        if not isinstance(props, dict) or option.get("type", "object") != "object" or len(props) != 1 or False not in props.values():
            return None
        keys += props
    return keys


def _absent_part(keys: list[str]) -> dict:
    one = [{"type": "object", "properties": {k: False}} for k in keys]
    return one[0] if len(one) == 1 else {"anyOf": one}


def _branch_ways(branches: list[Any], props: dict, required: frozenset[str], count: int | None) -> tuple[tuple[Way, ...], list[dict] | None] | None:
    """An anyOf whose branches require keys `props` declares, each branch perhaps with
    "not all of these keys" parts (llguidance_schema writes an overlapping `oneOf` of bare
    `required` branches so: branch i and not branch j, for every j; json_closed_unions a union
    of closed objects: branch i and none of the keys it does not declare), as (per branch, its
    keys and the keys whose writing rules it out: its one-key parts; the anyOf left for
    llguidance: the parts alone, None where nothing is left); None where the branches are of
    another shape, or lifting them would not be exact. `required`: the keys the node requires
    anyway (every valid object holds them too). `count`: the node is a closed object of this
    many keys (see `_counted`); the parts are then written out as one branch per choice of
    left-out keys F, each with `maxProperties` = count - |F| (so that llguidance offers no `,`
    once every key it still allows is used), at most _MAX_CHOICES.

    Lifted, the tracker closes an object only where some branch's keys R_k (and the node's
    required keys Q) are all written and none of the keys ruling k out, and llguidance keeps
    only parts: some branch i's parts hold. A part's keys in R_i or Q are dropped (with them
    written, leaving one out is impossible; a part left empty: branch i can never hold,
    dropped). Exact where k's parts all hold once R_k is written and none ruling k out is (k
    has no part of two keys or more), or, for branches i != k, a part of i lies within R_k and
    Q (those written: i's parts fail, so the branch whose parts hold is the one whose keys are
    written). Never a dead end: a branch whose parts hold leaves out only keys outside R_i and
    Q, which can all still be written, and no key ruling it out is written."""
    ways: list[tuple[frozenset[str], list[list[str]]]] = []
    for branch in branches:
        if not isinstance(branch, dict):
            return None
        parts = branch["allOf"] if set(branch) == {"allOf"} and isinstance(branch["allOf"], list) and branch["allOf"] else [branch]
        head, rest = parts[0], parts[1:]
        names = _bare_required(head, props)
        if not names or any(props[k] is False for k in names):
            return None
        absent = [_absent_keys(part) for part in rest]
        if None in absent:
            return None
        written = frozenset(names) | required  # in every object this branch holds for
        absent = [[k for k in keys if k not in written] for keys in absent]
        if all(absent):  # otherwise the branch can never hold
            ways.append((frozenset(names), absent))
    if not ways:
        return None
    for i, (_, absent) in enumerate(ways):
        for k, (names_k, other) in enumerate(ways):
            if i != k and any(len(keys) > 1 for keys in other) and not any(set(keys) <= names_k | required for keys in absent):
                return None
    kept = tuple((names, frozenset(keys[0] for keys in absent if len(keys) == 1)) for names, absent in ways)
    if not all(absent for _, absent in ways):
        return kept, None
    if count is not None:
        choices = list(dict.fromkeys(frozenset(choice) for _, absent in ways for choice in itertools.product(*absent)))
        if len(choices) > _MAX_CHOICES:
            return None
        return kept, [{"type": "object", "properties": {k: False for k in sorted(left_out)}, "maxProperties": count - len(left_out)}
                      for left_out in choices]
    left = []
    for _, absent in ways:
        parts = [_absent_part(keys) for keys in absent]
        left.append(parts[0] if len(parts) == 1 else {"allOf": parts})
    return kept, left


def _bare_required(part: Any, props: dict) -> list[str] | None:
    """The keys a schema that only requires keys `props` declares names (its `properties`, if
    any, saying nothing: `_vacuous_properties`); None for any other schema."""
    if not isinstance(part, dict) or set(part) - ANNOTATIONS - {"required", "properties"} or not _vacuous_properties(part):
        return None
    names = part.get("required")
    return names if isinstance(names, list) and all(isinstance(k, str) and k in props for k in names) else None


def _parts_flattened(parts: list[Any], props: dict) -> tuple[list[Any], frozenset[str]] | None:
    """(the branches, the keys required) where an allOf holds only bare `required` parts over
    keys the node declares and one anyOf part: the same as the node requiring those keys with
    that anyOf beside (one object meets them all). None for any other allOf."""
    branches, required = None, frozenset()
    for part in parts:
        if isinstance(part, dict) and set(part) == {"anyOf"} and isinstance(part["anyOf"], list) and branches is None:
            branches = part["anyOf"]
        elif (names := _bare_required(part, props)) is not None:
            required |= frozenset(names)
        else:
            return None
    return (branches, required) if branches is not None else None


def _lifted(spec: dict, fixed: set[int]) -> tuple[dict, dict[int, tuple[Way, ...]], dict[int, dict[str, frozenset[str]]], set[int]] | None:
    """A copy of `spec` without what the required-keys tracker can enforce instead on fixed nodes
    (their keys then move like optional ones): an anyOf whose branches only require keys the node
    itself declares ("at least one of these", 58 of the 172 JSONSchemaBench schemas with a valid
    instance refused held one), also where each branch leaves out keys of the others ("exactly
    one of these": an overlapping oneOf, Glaive's calculate_area; a closed object only where its
    key count tells when it is full, see `_branch_ways`), and an allOf of `dependentRequired` conditions on keys it declares
    (docker-compose's services: a closed object with `memswap_limit` needing `mem_limit` kept its
    56 keys in schema order), or on undeclared keys where it takes any key (Glaive's
    calculate_area `dimensions`: `shape` needing `circle`, neither declared, kept the measures in
    schema order). With, per copied node (by id), the branches' ways (`_branch_ways`: the keys
    of one of which the tracker requires whole), the keys each key requires, and the ids of the
    branches written with a key count (a closed object's, `_branch_ways`). None where nothing lifts."""
    chosen: dict[int, tuple[Way, ...]] = {}
    left: dict[int, list[dict] | None] = {}
    flattened: dict[int, list[str]] = {}  # node -> its required keys with its allOf parts' (_parts_flattened)
    needs: dict[int, dict[str, frozenset[str]]] = {}
    for node in _every_node(spec):
        props = node.get("properties")
        if id(node) not in fixed or not isinstance(props, dict):
            continue
        branches, parts = node.get("anyOf"), node.get("allOf")
        closed = node.get("additionalProperties", True) is False
        count = len(props) if closed and not _COUNT_BLOCKERS & set(node) and False not in props.values() else None
        named = own = frozenset(_required(node))
        beside = set(node)
        flat = _parts_flattened(parts, props) if isinstance(parts, list) and branches is None else None
        if flat is not None:  # allOf: [{required: [..]}, {oneOf: [..]}] (o6184): the node's own, read as one
            branches, extra = flat
            named, beside = named | extra, beside - {"allOf"}
        found = (_branch_ways(branches, props, named, count) if isinstance(branches, list) and len(branches) >= 2
                 and not beside & _NOT_BESIDE_LIFTED else None)
        if found is not None and (found[1] is None or not closed or count is not None):  # else: a count that would not tell
            chosen[id(node)], left[id(node)] = found
            if flat is not None:
                flattened[id(node)] = [*(node["required"] if isinstance(node.get("required"), list) else []), *sorted(extra - own)]
        elif isinstance(parts, list) and parts and not set(node) & (_NOT_BESIDE_LIFTED - {"allOf"}) and "anyOf" not in node:
            dependencies = [_dependency(p) for p in parts]
            any_key = node.get("additionalProperties", True) is True  # an undeclared key is always writable (nothing beside bounds keys)
            if None not in dependencies and all(props[k] is not False if k in props else any_key for name, keys in dependencies for k in (name, *keys)):
                merged: dict[str, frozenset[str]] = {}
                for name, keys in dependencies:
                    merged[name] = merged.get(name, frozenset()) | keys
                needs[id(node)] = merged
    if not chosen and not needs:
        return None
    memo: dict[int, Any] = {}
    copy = deepcopy(spec, memo)
    for old, required in flattened.items():
        del memo[old]["allOf"]
        memo[old]["required"] = required
    for old in chosen:
        if left[old] is None:
            memo[old].pop("anyOf", None)
        else:
            memo[old]["anyOf"] = left[old]
    for old in needs:
        del memo[old]["allOf"]
    counting = {id(branch) for old in chosen for branch in left[old] or () if "maxProperties" in branch}
    return copy, {id(memo[old]): ways for old, ways in chosen.items()}, {id(memo[old]): keys for old, keys in needs.items()}, counting


def _lifts_move(planner: "_Planner", released: Released) -> bool:
    """Whether the plan moves every declared key a lift names. One still declared (the pattern
    budget, another member of the family keeping it) can no longer be written once a later key
    is, and the tracker would wait for it forever; an undeclared one (a dependency's, in an
    object taking any key) is written among the undeclared keys, after every declared one."""
    named = [(i, frozenset().union(*(needs for needs, _ in ways))) for i, ways in released.any_of.items()]
    named += [(i, frozenset(needs).union(*needs.values())) for i, needs in released.dependent.items()]
    return all(i in planner.nodes and all(planner.moves(planner.nodes[i], k) for k in keys if k in planner.nodes[i].get("properties", {}))
               for i, keys in named)


def _has_union(spec: dict) -> bool:
    """Whether some node of `spec` holds an anyOf or oneOf (cheap: most schemas hold none)."""
    return any("anyOf" in node or "oneOf" in node for node in _every_node(spec))


def any_order(spec: Any, released: Released | None = None, lift: bool = True, forced_order: bool = False) -> Any:
    """`spec` (a schema for llguidance) with the optional keys that can move as exact patterns
    (one pattern per schema: `^(?:a|b)$`); `spec` itself is not changed, and is what comes back
    where no key moves. A moved key a `$ref` points into keeps its own pattern, its schema moves
    to `$defs` and such references follow it. With `released`, the required keys of fixed nodes
    (json_required.py) move too, left out of their `required`: `released` records them, and the
    result is exact only with required_keys.py's tracker enforcing them, with what `_lifted`
    takes out of what llguidance reads (unless `lift` is False, as where a lift's keys would
    not all move). `forced_order`: a closed object whose declared keys are all required keeps
    them in schema order (each next key forced text; the generation surfaces, which close
    objects, ask for it), else they too go in any order (every valid instance reachable)."""
    if not isinstance(spec, dict):
        return spec
    original = spec
    spec = _discriminator_first(spec) or spec
    planner = _Planner(spec, forced_order)
    fixed = _fixed(spec, planner, released) if released is not None else set()
    if released is not None and lift and not released.unique_at and _has_union(spec):
        merged = closed_unions_merged(spec, fixed, lambda branch: _through_ref(branch, planner.resolve),
                                      lambda: _refs_in(spec, set()))  # then lifted
        if merged is not None:
            other = _Planner(merged[0], forced_order)
            other_fixed = _fixed(merged[0], other, released)
            if merged[1] <= other_fixed:
                spec, planner, fixed = merged[0], other, other_fixed
    lifted = False
    if released is not None:
        planner.fixed = fixed
        copied = _lifted(spec, planner.fixed) if lift else None
        if copied is not None:  # planned again on the copy, whose nodes it holds by identity
            spec, released.any_of, released.dependent, counting = copied
            planner, lifted = _Planner(spec, forced_order), True
            planner.counting = counting
            planner.fixed = _fixed(spec, planner, released)
        released.spec, released.fixed, released.resolve, released.kinds = spec, planner.fixed, planner.resolve, planner.kinds
    planner.walk()
    if lifted and not _lifts_move(planner, released):  # planned as the schema says instead
        released.any_of, released.dependent = {}, {}
        return any_order(original, released, lift=False, forced_order=forced_order)
    if not lifted and spec is original and not any(keep < len(planner.nodes[i].get("properties", {})) for i, keep in planner.keep.items()):
        return spec
    targets = _refs_in(spec, set())
    referenced = {t[:i] for t in targets for i in range(len(t) + 1)}  # paths a $ref points into
    moved_defs: dict[str, Any] = {}
    redirect: dict[tuple[str, ...], tuple[str, ...]] = {}  # old path -> new path, where a $ref can follow

    def rebuild(node: Any, old: tuple[str, ...], new: tuple[str, ...], frozen: bool = False) -> Any:
        if not isinstance(node, dict):
            return node
        if old in referenced and old != new:
            redirect[old] = new
        frozen = frozen or id(node) in planner.frozen
        out = dict(node)
        for k in _ONE:
            if isinstance(out.get(k), dict):
                out[k] = rebuild(out[k], (*old, k), (*new, k), frozen)
        for k in _LIST:
            if isinstance(out.get(k), list):
                out[k] = [rebuild(v, (*old, k, str(i)), (*new, k, str(i)), frozen) for i, v in enumerate(out[k])]
        props = node.get("properties")
        keep = None if frozen else planner.keep.get(id(node))
        names = list(props) if isinstance(props, dict) else []
        moved = [k for k in names[keep:] if props[k] is not False] if keep is not None and keep < len(names) else []
        staying = set(names) - set(moved)
        for k in _MAP:
            if isinstance(out.get(k), dict):
                out[k] = {name: rebuild(v, (*old, k, name), (*new, k, name), frozen) for name, v in out[k].items()
                          if k != "properties" or name in staying}  # moved keys are rebuilt below
        if released is not None and id(node) in planner.fixed and isinstance(node.get("required"), list):
            lent = planner.lent.get(id(node), {})
            declared = set(names)  # a key the node declares moves with it, one it does not with its declarers
            freed = frozenset(k for k in node["required"] if isinstance(k, str) and (k in moved if k in declared else k in lent)
                              and all(planner.moves(owner, k) for owner in lent.get(k, ())))
            if freed:  # enforced by the tracker from here on
                released.freed[id(node)] = freed
                out["required"] = [k for k in node["required"] if k not in freed]
                if not out["required"]:
                    del out["required"]
        if not moved:
            return out
        own: dict[str, Any] = {}  # exact pattern -> schema
        shared: dict[str, tuple[list[str], Any]] = {}  # signature -> (keys, their schema)
        for name in moved:
            where = (*old, "properties", name)
            if where in referenced:  # its schema moves to $defs, where the references follow it
                slot = f"{_MOVED_DEFS}{len(moved_defs)}"
                moved_defs[slot] = None  # taken before the keys inside it take theirs
                moved_defs[slot] = rebuild(props[name], where, ("$defs", slot))
                own[exact_key(name)] = {"$ref": f"#/$defs/{slot}"}
                continue
            value = rebuild(props[name], where, (*new, "patternProperties", exact_key(name)))
            sig = _signature(value)
            if sig is None or name in planner.merged:
                own[exact_key(name)] = value
            else:
                shared.setdefault(sig, ([], value))[0].append(name)
        for keys, value in shared.values():
            own[exact_key(keys[0]) if len(keys) == 1 else "^(?:" + "|".join(exact_key(k)[1:-1] for k in keys) + ")$"] = value
        if out.get("additionalProperties", True) is False and not _endless(node):  # a closed object (see _counted)
            out["maxProperties"] = len(names)
        out["patternProperties"] = {**out.get("patternProperties", {}), **own}
        if not out["properties"]:
            del out["properties"]
        return out

    result = rebuild(spec, (), ())
    if moved_defs:
        result["$defs"] = {**(result["$defs"] if isinstance(result.get("$defs"), dict) else {}), **moved_defs}
    if redirect:
        _redirect(result, redirect)
    return result


def _discriminator_first(spec: dict) -> dict | None:
    """A copy of `spec` where each branch of an anyOf/oneOf of objects telling themselves apart by
    one required key's constant (`type`: MCP's text or image content) is also written as copies
    declaring that key first, then its other required keys, then the optional ones, and its
    required keys first as declared (_orders); None where no union has such a branch.
    llguidance writes a branch's required keys in schema order, optional keys declared before
    one too (`annotations`, `text`, `type`), and they cannot move (which branch holds is known
    only from the value), while instances name the kind first or their content first. The same
    language (a branch or its copies), each planned like any other node. Not where the union's
    node merges more members (their order decides). Where the node declares keys itself beside
    open branches that say nothing else (_spreads: Glaive's shapes, the kind declared and required
    by the node, its constant and the measures it requires by each branch; or a node's own
    optional keys beside branches naming their kind), the node's keys go into each branch first,
    which is then written so (llguidance wrote the node's keys first, before the kind)."""
    planners: list[_Planner] = []  # made on the first union (a reference resolver per spec)

    def resolve(ref: str) -> dict | None:
        if not planners:
            planners.append(_Planner(spec))
        return planners[0].resolve(ref)

    found: list[tuple[dict, str, list[tuple[int, str | None]]]] = []  # (node, union, [(branch, its kind)])
    spread: list[tuple[dict, str, str]] = []  # unions whose node's own keys go into each branch (_spreads)
    claimed: set[int] = set()  # the branch lists of the unions spread
    refs: set | None = None
    for whole in _every_node(spec):
        node = _parts_as_node(whole, resolve) or whole
        for k in ("anyOf", "oneOf"):
            every = [_own_object(b, resolve) for b in node[k]] if isinstance(node.get(k), list) and len(node[k]) >= 2 else []
            # branches that are no object of their own (`{}` closed, a string) are left as they are:
            # a branch or its copies is the same branch, whatever the others say
            nodes = [own for own in every if own is not None]
            if len(nodes) < 2 or (_FAMILY - {"properties", "anyOf", "oneOf"}) & set(node) \
                    or not isinstance(node.get("properties", {}), dict):
                continue
            others = all(own is not None or _other_type(b, resolve) for own, b in zip(every, node[k]))
            if others and _spreads(node, k, nodes):  # the node's keys go into each branch, then written like one
                refs = _refs_in(spec, set()) if refs is None else refs
                names = dict.fromkeys([*node["properties"], *nodes[0]["properties"]])
                key = next((n for kinds in (str, _SCALARS) for n in names
                            if _tells_apart([_tagged(node, own, n) for own in nodes], n, kinds)), None)
                moved = ("properties", "allOf") if node is not whole else ("properties",)
                if key is not None and not any(part in path for path in refs for part in moved):  # none points into what moves
                    spread.append((whole, k, key))
                    claimed.add(id(node[k]))  # a union part's branches: spread here, not copied as its own node's
                    continue
            if node is not whole:  # its union part is a node of its own
                continue
            key = next((n for kinds in (str, _SCALARS) for n in nodes[0]["properties"]
                        if n not in node.get("properties", {}) and _tells_apart(nodes, n, kinds)), None)
            key = key if key is not None else _named_by_most(nodes, node)
            tagged = [own is not None and key is not None and _tells_apart([own], key) for own in every]
            late = [(i, key if tagged[i] else None) for i, own in enumerate(every)
                    if own is not None and _orders(own, key if tagged[i] else None)]
            if late:
                found.append((node, k, late))
    found = [(node, k, late) for node, k, late in found if id(node[k]) not in claimed]
    if not (found or spread) or len(found) + len(spread) > _MAX_DISCRIMINATED:
        return None
    memo: dict[int, Any] = {}
    copy = deepcopy(spec, memo)
    resolve = _Planner(copy).resolve
    size = len(json.dumps(spec))
    budget = 2 * size + 10_000  # the copies at most triple the schema (nested unions multiply)
    spread_budget = size  # and a spread's merged branches, which repeat the node's keys in each, one schema more
    refs = _refs_in(spec, set()) if refs is None else refs
    rewritten: set[int] = set()  # definitions written with their copies (generated schemas reuse a branch in many unions)
    for node, k, late in found:
        branches = memo[id(node)][k]
        for i, key in late:
            target = _referenced(branches[i], resolve, refs)
            if target is not None and id(target) in rewritten:
                continue
            own = _own_object(branches[i], resolve)
            orders = _orders(own, key)
            cost = len(json.dumps(own)) * len(orders)
            if cost > budget:
                continue
            budget -= cost
            copies = _ordered_copies(own, orders)
            if target is None:
                branches[i] = {"anyOf": [*copies, branches[i]]}
            else:  # once, where the reference points: every union naming it reads the copies
                original = dict(target)
                target.clear()
                target["anyOf"] = [*copies, original]
                rewritten.add(id(target))
    for whole, k, key in spread:
        whole = memo[id(whole)]
        node = _parts_as_node(whole, resolve) or whole
        owns = [_own_object(branch, resolve) for branch in node[k]]  # None: a branch of another type (_other_type)
        merged = [None if own is None else _merged(node, own) for own in owns]
        planned = [None if own is None else (own, _orders(own, key)) for own in merged]
        cost = sum(len(json.dumps(own)) * (1 + len(orders)) for own, orders in filter(None, planned))
        if cost > budget + spread_budget:
            continue
        drawn = min(cost, spread_budget)
        spread_budget, budget = spread_budget - drawn, budget - (cost - drawn)
        # a branch of another type (a `null` beside the objects) reads none of the node's keys: as it was
        whole[k] = [{"anyOf": [*_ordered_copies(*pair), deepcopy(pair[0])]} if pair else branch for pair, branch in zip(planned, node[k])]
        whole.pop("properties", None)
        whole.pop("additionalProperties", None)  # a closed node's: now each merged branch's
        if node is not whole:  # the parts' keys went into each branch, their type stays with the node
            del whole["allOf"]
            whole.update({"type": node["type"]} if "type" in node else {})
    return copy


def _parts_as_node(node: dict, resolve: Callable[[str], dict | None]) -> dict | None:
    """An allOf of plain objects and, last, one union part (travis's deploy: `{"allOf":
    [{"properties": {"on": ..}}, {"oneOf": [..]}]}`) read as the node it means: the plain parts'
    keys (one object, _merged_parts) declared beside the union; None for any other node.
    llguidance wrote the parts' keys first, before each branch's kind."""
    parts = node.get("allOf")
    if not isinstance(parts, list) or set(node) - ANNOTATIONS - {"$comment", "allOf", "type"} or not _plain_object(node):
        return None
    unions = [p for p in parts if isinstance(p, dict) and len(set(p) & {"anyOf", "oneOf"}) == 1
              and not set(p) - ANNOTATIONS - {"$comment", "anyOf", "oneOf", "type"} and _plain_object(p)]
    # the union part last: llguidance writes the parts' keys in part order, the spread keys first too
    plain = _merged_parts(parts[:-1], resolve) if len(unions) == 1 and parts[-1] is unions[0] else None
    if plain is None:
        return None
    union = "anyOf" if "anyOf" in unions[0] else "oneOf"
    typed = any("type" in p for p in (node, plain, unions[0]))
    return {**plain, **({"type": "object"} if typed else {}), union: unions[0][union]}


def _referenced(branch: Any, resolve: Callable[[str], dict | None], refs: set[tuple[str, ...]]) -> dict | None:
    """The schema a branch that is only a local `$ref` names (not the root), where no `$ref` points
    inside it (it can then be rewritten in place, its own pointer unchanged); None otherwise."""
    if not isinstance(branch, dict) or set(branch) - ANNOTATIONS != {"$ref"}:
        return None
    path = _ref_path(branch["$ref"])
    if not path or any(len(r) > len(path) and r[: len(path)] == path for r in refs):
        return None  # not local, the root itself (its keywords would move), or pointed inside
    target = resolve(branch["$ref"])
    return target if isinstance(target, dict) else None


def _ordered_copies(own: dict, orders: list[list[str]]) -> list[dict]:
    """Copies of the object `own` declaring its properties in each order of `orders` (_orders)."""
    return [{**deepcopy(own), "properties": {n: deepcopy(own["properties"][n]) for n in order}} for order in orders]


_SPREAD_NODE = frozenset({"type", "properties", "required"})  # a union node whose keys can go into its branches (with annotations)


def _spreads(node: dict, union: str, branches: list[dict]) -> bool:
    """Whether `node` (an object declaring keys beside its `union` of `branches`, own objects)
    may be written as that union of its branches each merged with it (_merged): the node says
    only which keys it declares and requires (Glaive's shapes: `shape` declared and required
    beside a oneOf of `{"properties": {"shape": {"const": "circle"}}, "required": ["radius"]}`),
    and perhaps that it is closed, the branches only theirs. A branch may be closed where it
    declares every key the node declares (livelyProperties' settings: the node declares and
    requires `type` and `value`, each closed branch declares both; else its additionalProperties
    would judge a node key it does not declare); under a closed node a branch declares and
    requires only keys the node declares (aiproj's Authentication: `Type` and `Cookie`, `Form`
    or `Http` by branch; a key the node leaves out would need the node's verdict). N and (B1 or
    B2) is (N and B1) or (N and B2); N and exactly one Bi is exactly one of (N and Bi). The keys
    then go with each branch, so its own orders can be written (llguidance writes the node's
    declared keys first, in its order)."""
    closed = node.get("additionalProperties", True) is False
    extra = set(node) - ANNOTATIONS - {"$schema", "$defs", "definitions", "$comment", "x-guidance", union}  # no $id: a base URI
    if not node.get("properties") or not extra - ({"additionalProperties"} if closed else set()) <= _SPREAD_NODE or not _plain_object(node, nullable=True):
        return False
    declared = set(node["properties"])

    def spreadable(own: dict) -> bool:
        said = set(own) - ANNOTATIONS - {"$comment"}
        if own.get("additionalProperties", True) is False and declared <= set(own.get("properties", {})):
            said.discard("additionalProperties")
        if closed and not {*own.get("properties", {}), *own.get("required", [])} <= declared:
            return False
        return not said - _SPREAD_NODE and _plain_object(own)

    return all(spreadable(own) for own in branches)


def _other_type(branch: Any, resolve: Callable[[str], dict | None]) -> bool:
    """Whether a union branch says only its type, and no object (`{"type": "null"}` beside a
    union of objects): the node's object keywords judge none of its values."""
    branch = _through_ref(branch, resolve)
    if not isinstance(branch, dict) or set(branch) - ANNOTATIONS - {"$comment"} != {"type"}:
        return False
    types = branch["type"] if isinstance(branch["type"], list) else [branch["type"]]
    return bool(types) and all(isinstance(t, str) and t != "object" for t in types)


def _plain_object(node: dict, nullable: bool = False) -> bool:
    """Whether `node`'s `type` (if any) is object (`nullable`: or object and other types) and its
    `required` (if any) a list of names."""
    required, kind = node.get("required", []), node.get("type", "object")
    typed = kind in ("object", ["object"]) or nullable and isinstance(kind, list) and "object" in kind
    return typed and isinstance(required, list) and all(isinstance(n, str) for n in required)


def _tagged(node: dict, own: dict, key: str) -> dict:
    """What `_tells_apart` reads of a branch `own` merged with its `node` for `key`: the branch's
    schema of it, required where either requires it."""
    required = [*own.get("required", []), *node.get("required", [])]
    return {"properties": {key: own["properties"].get(key)}, "required": required}


def _merged(node: dict, own: dict) -> dict:
    """A union branch's object `own` with its node's keys merged in: the node's declared keys
    first (a key both declare takes both schemas), then the branch's; required: both lists."""
    props = dict(node["properties"])
    _declare(props, own["properties"])
    required = list(dict.fromkeys([*node.get("required", []), *own.get("required", [])]))
    closed = {"additionalProperties": False} if node.get("additionalProperties", True) is False else {}
    return {**{k: v for k, v in own.items() if k not in ("properties", "required")}, "properties": props, "required": required, **closed}


def _declare(props: dict[str, Any], more: dict[str, Any]) -> None:
    """Adds the declared keys `more` to `props` (in place, in order): a key both declare takes
    both schemas (`true` or `{}` adds nothing: how llguidance_schema declares a branch's required key)."""
    for name, value in more.items():
        if name not in props or props[name] in (True, {}):
            props[name] = value
        elif value not in (True, {}):
            props[name] = {"allOf": [props[name], value]}


_EVERY_ORDER = 4  # an untagged branch requiring keys is also written in every order of its keys up to this many


def _orders(node: dict, key: str | None) -> list[list[str]]:
    """The key orders a union branch is also written in (see _discriminator_first): `key`, the
    other required keys, the optional ones; the required keys as declared, the optional ones.
    Without a kind, a branch requiring keys is written in every order of its keys where it
    declares a few (kustomization's patches: `path` or `patch` required, `target` written first:
    which branch holds is known only from the keys, so its required keys could not move).
    Those that differ from the declared order and from each other."""
    names = list(node["properties"])
    if key is None:  # (a branch only requiring keys or leaving them out, `true`/`false`, is the lift's: _lifted)
        if not isinstance(node.get("required"), list) or not set(node["required"]) & set(names) or len(names) > _EVERY_ORDER \
                or all(v in (True, False, {}) for v in node["properties"].values()):
            return []
        return [list(order) for order in itertools.permutations(names) if list(order) != names]
    required = [n for n in names if n in node["required"]]
    optional = [n for n in names if n not in required]
    others = [n for n in required if n != key]
    after = itertools.permutations(others) if len(others) <= _PERMUTED else [others]
    orders = [*([key, *rest, *optional] for rest in after), [*required, *optional]]
    return [o for i, o in enumerate(orders) if o != names and o not in orders[:i]]


def _own_object(branch: Any, resolve: Callable[[str], dict | None]) -> dict | None:
    """The node declaring a union branch's keys: the branch, the target of a branch that is
    only a `$ref`, or the object an allOf of plain objects means (_merged_parts); None for any
    other branch."""
    branch = _through_ref(branch, resolve)
    if isinstance(branch, dict) and set(branch) - ANNOTATIONS - {"$comment"} == {"allOf"} and isinstance(branch["allOf"], list):
        branch = _merged_parts(branch["allOf"], resolve)
    if not isinstance(branch, dict) or not isinstance(branch.get("properties"), dict) or not branch["properties"] \
            or (_FAMILY - {"properties"}) & set(branch):
        return None
    return branch


def _through_ref(schema: Any, resolve: Callable[[str], dict | None]) -> Any:
    """The schema a schema that is only a `$ref` names (resolved); any other schema itself."""
    if isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"$ref"} and isinstance(schema["$ref"], str):
        return resolve(schema["$ref"])
    return schema


def _merged_parts(parts: list, resolve: Callable[[str], dict | None]) -> dict | None:
    """The one object an allOf of plain objects (each a `$ref` to one or written in place, saying
    only its type, properties and required keys) means: every part's keys in part order (a key
    two declare takes both schemas), every part's required keys. Generated schemas write a
    union's branches so (SchemaStore's accelerator: `allOf: [{"$ref": "#/definitions/Chain-1"},
    {"properties": {"type": {"const": "Chain"}}, "required": ["type"]}]`), and llguidance writes
    the kind last there. For open objects the same language: a value meets every part iff each
    key's value meets each part's schema of it and every required key is there. None where a
    part says anything else (closed, patterns, counts: a part would judge the others' keys)."""
    merged: dict[str, Any] = {}
    required: list[str] = []
    typed = False  # no part saying `object`: non-objects meet them all, and the one object too
    for part in parts:
        part = _through_ref(part, resolve)
        if not isinstance(part, dict) or set(part) - ANNOTATIONS - {"$comment"} - _SPREAD_NODE or not _plain_object(part) \
                or not isinstance(part.get("properties", {}), dict):
            return None
        typed = typed or "type" in part
        _declare(merged, part.get("properties", {}))
        required += [n for n in part.get("required", []) if n not in required]
    return ({"type": "object"} if typed else {}) | {"properties": merged, "required": required} if merged else None


_SCALARS = (str, int, float, bool, type(None))
_PERMUTED = 3  # up to this many other required keys of a tagged branch are written in every order after its kind


_KINDS_A_BRANCH = 4  # values a branch's kind may list (solidarity's `rule`: "dir" or "directory")


def _tells_apart(nodes: list[dict], key: str, kinds: type | tuple = _SCALARS) -> bool:
    """Whether every node requires `key` and gives it constants of its own (a few: an enum), of
    `kinds` (the callers try string constants first, the kind a union usually names, then any
    scalar: execution-environment's `version` 1 or 3; 1 and 1.0 are one, true and 1 two)."""
    values: set = set()
    for node in nodes:
        listed = enum_values(node["properties"].get(key))
        if not isinstance(node.get("required"), list) or key not in node["required"] or not listed \
                or len(listed) > _KINDS_A_BRANCH or not all(isinstance(v, kinds) for v in listed):
            return False
        own = {(type(v) is bool, v) for v in listed}  # True is not 1 in JSON
        if own & values:
            return False
        values |= own
    return True


def _named_by_most(nodes: list[dict], node: dict) -> str | None:
    """Where no key tells every branch apart (accelerator: one branch names no kind, two name
    the same), the key most branches (two at least) require with a constant of their own, string
    constants first; the node's own keys aside. Those branches are written with it first too: a
    branch or its copies in other orders is the same branch, whatever the others say."""
    names = list(dict.fromkeys(n for own in nodes for n in own["properties"] if n not in node.get("properties", {})))
    for kinds in (str, _SCALARS):
        counts = {n: sum(_tells_apart([own], n, kinds) for own in nodes) for n in names}
        best = max(names, key=lambda n: counts[n], default=None)
        if best is not None and counts[best] >= 2:
            return best
    return None


def _redirect(node: Any, redirect: dict[tuple[str, ...], tuple[str, ...]]) -> None:
    """Points every local `$ref` under `node` into a moved schema at its new place (in place)."""
    if isinstance(node, dict):
        path = _ref_path(node.get("$ref"))
        if path is not None:
            for n in range(len(path), 0, -1):  # the longest moved prefix
                if path[:n] in redirect:
                    moved = (*redirect[path[:n]], *path[n:])
                    node["$ref"] = "#/" + "/".join(quote(p.replace("~", "~0").replace("/", "~1"), safe="~$!&'()*+,;=:@") for p in moved)
                    break
        for v in node.values():
            _redirect(v, redirect)
    elif isinstance(node, list):
        for v in node:
            _redirect(v, redirect)
