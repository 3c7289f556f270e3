"""Which JSON objects can run out of keys, and which keys: read from a schema as llguidance compiles it.

The unique-keys wrapper's dead-end check (finite_keys.py) is needed only where an object admits
finitely many keys llguidance can offer again: a closed object's pattern whose language is finite,
or `propertyNames` bounding names. Where every such source lists its keys (json_key_order's
`^(?:a|b)$`, an enum, a pattern over literals), only used keys among them need the check: a key
llguidance offers again outside them comes from an unbounded source (any key, or a pattern ending
in an unbounded repeat), which never dead-ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

try:  # CPython's own regex parser (private: checked once at run time, see _parser_reads_as_expected)
    import re._parser as sre_parse
except ImportError:  # pragma: no cover (a Python without it: every finite pattern counts as unlisted)
    sre_parse = None

__all__ = ["FiniteKeys", "finite_key_sets", "pattern_keys"]

_MAX_NAMES = 512  # keys listed from one pattern; more counts as not listable


@dataclass(frozen=True)
class FiniteKeys:
    prefixes: bool = False  # some object may admit only finitely many keys llguidance offers again
    counts: bool = False  # such an object may offer a `,` with every key used (not json_key_order's counted ones)
    names: frozenset[str] | None = None  # every key such objects offer again; None: not listable
    # every key any object takes, but where it takes any key at all (a closed world: declared,
    # required and listed keys); None where a pattern or propertyNames admits keys not listed
    known: frozenset[str] | None = None


def finite_key_sets(spec: Any) -> FiniteKeys:
    """Where in `spec` (a schema as llguidance compiles it) a used key's prefix may dead-end."""
    prefixes = counts = False
    names: set[str] | None = set()
    todo = [spec]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo += node
        elif isinstance(node, dict):
            bounded = node.get("propertyNames")
            if isinstance(bounded, dict):
                listed = _bounded_names(bounded)
                if listed is not False:
                    prefixes = counts = True
                    names = None if listed is None or names is None else names | listed
            patterns = node.get("patternProperties")
            if node.get("additionalProperties", True) is False and isinstance(patterns, dict):
                for pattern in patterns:
                    finite, listed = pattern_keys(pattern)
                    if finite:
                        prefixes = True
                        counts = counts or not _counted_keys(node)
                        names = None if listed is None or names is None else names | listed
            todo += list(node.values())
    return FiniteKeys(prefixes, counts, frozenset(names) if prefixes and names is not None else None,
                      known_keys(spec) if prefixes else None)


_MAX_KNOWN_CHARS = 200  # a longer key leaves the closed world (the search counts its far end alive)


# patterns that find a match in every string (an empty match at its start): a source of any key
_EVERY_KEY = frozenset({"", ".*", "^.*", "(.*)", "^(.*)", "(?:.*)", "^(?:.*)"})


def known_keys(spec: Any) -> frozenset[str] | None:
    """Every key name `spec` spells out (properties, required and dependency lists, listed
    patterns and propertyNames), where every object takes only those or else any key at all
    (additionalProperties, a pattern every string matches, an open object's patterns); None
    where a pattern or propertyNames admits keys not listed, or a name holds a quote, a
    backslash, a control character or DEL (kept off the probes)."""
    known: set[str] = set()
    todo = [spec]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo += node
            continue
        if not isinstance(node, dict):
            continue
        patterns = node.get("patternProperties") or {}
        for pattern in patterns:
            if pattern in _EVERY_KEY:
                continue  # any key at all, as additionalProperties
            if _open_anyway(node, patterns[pattern]):
                continue  # traefik's `names` maps: `[a-zA-Z0-9-_]+`
            listed = pattern_keys(pattern)[1]
            if listed is None:
                return None
            known |= listed
        if "propertyNames" in node:
            listed = _bounded_names(node["propertyNames"]) if isinstance(node["propertyNames"], dict) else None
            if not isinstance(listed, frozenset):
                return None
            known |= listed
        for keyword in ("properties", "dependentRequired", "dependentSchemas", "dependencies"):
            if isinstance(node.get(keyword), dict):
                known |= {k for k in node[keyword] if isinstance(k, str)}
                known |= {n for v in node[keyword].values() if isinstance(v, list) for n in v if isinstance(n, str)}
        if isinstance(node.get("required"), list):
            known |= {n for n in node["required"] if isinstance(n, str)}
        todo += list(node.values())
    if any(len(k) > _MAX_KNOWN_CHARS or any(c in '"\\\x7f' or c < " " for c in k) for k in known):
        return None
    return frozenset(known)


def _open_anyway(node: dict, value: Any) -> bool:
    """Whether an object of `node` takes any key whatever its pattern with schema `value` says:
    it is open (additionalProperties absent or true, no unevaluatedProperties) and `value` is not
    plainly unsatisfiable (false, or a `not`: a key the pattern matches could not be written)."""
    open_object = node.get("additionalProperties", True) is True and "unevaluatedProperties" not in node
    return open_object and value is not False and not (isinstance(value, dict) and "not" in value)


def _bounded_names(schema: dict) -> frozenset[str] | None | bool:
    """What a `propertyNames` schema bounds keys to: their list, None (bounded, not listable),
    False (not bounded)."""
    if "enum" in schema or "const" in schema:  # a superset of what the other keywords leave
        listed = schema["enum"] if isinstance(schema.get("enum"), list) else [schema["const"]] if "const" in schema else []
        return frozenset(v for v in listed if isinstance(v, str))
    if set(schema) & {"maxLength", "$ref", "allOf", "anyOf", "oneOf"}:
        return None
    finite, listed = pattern_keys(schema.get("pattern"))
    return listed if finite else False


def _counted_keys(node: dict) -> bool:
    """A closed object whose keys are its properties and exact key lists, and whose
    maxProperties is their count (json_key_order's closed objects): it offers no `,` once full."""
    from .json_key_order import exact_keys  # noqa: PLC0415

    keys = set(node.get("properties", {}) if isinstance(node.get("properties"), dict) else {})
    for pattern in node.get("patternProperties", {}):
        listed = exact_keys(pattern)
        if listed is None:
            return False
        keys |= set(listed)
    return node.get("maxProperties") == len(keys)


@lru_cache(maxsize=1024)
def pattern_keys(pattern: Any) -> tuple[bool, frozenset[str] | None]:
    """Whether the keys a `patternProperties` pattern matches can run out, and then their list
    (None where it cannot be read off: counted finite, searched as before). Unanchored, or
    ending in an unbounded repeat (`[a-z]*$`, `([^.]+)$`): every matching key grows into
    another, so none dead-ends."""
    from .json_key_order import exact_keys  # noqa: PLC0415

    if not isinstance(pattern, str) or not pattern.startswith("^") or not pattern.endswith("$") or pattern.endswith("\\$"):
        return False, None
    listed = exact_keys(pattern)
    if listed is not None:
        return True, frozenset(listed)
    if not _parser_reads_as_expected():
        return True, None  # searched as before: never fewer checks than needed
    try:
        return _parsed_keys(pattern)
    except (re.error, RecursionError, OverflowError, AttributeError, TypeError, ValueError, IndexError):
        return True, None


@lru_cache(maxsize=1)
def _parser_reads_as_expected() -> bool:
    """Whether sre_parse (private to CPython) still reads patterns as this module expects: on
    known patterns, the answers worked out by hand. Otherwise finite patterns are never listed
    nor called growing (the full search, as before this module)."""
    if sre_parse is None:
        return False
    try:
        return (_parsed_keys("^[a-z_][a-z0-9]*$") == (False, None) and _parsed_keys("^(ab|c[de])$") == (True, frozenset({"ab", "cd", "ce"}))
                and _parsed_keys("^v[0-9]{1,2}x?$")[1] == frozenset(f"v{n}{x}" for n in [*map(str, range(10)), *(f"{i:02d}" for i in range(100))]
                                                                      for x in ("", "x")))
    except Exception:  # noqa: BLE001 (any change of shape means: do not rely on it)
        return False


def _parsed_keys(pattern: str) -> tuple[bool, frozenset[str] | None]:
    parsed = sre_parse.parse(pattern)
    items = list(parsed)
    if parsed.state.flags & ~re.UNICODE or items[:1] != [(sre_parse.AT, sre_parse.AT_BEGINNING)] or items[-1:] != [(sre_parse.AT, sre_parse.AT_END)]:
        return True, None
    items = items[1:-1]
    if _grows(items):
        return False, None
    strings = _language(items)
    return True, None if strings is None else frozenset(strings)


def _grows(items: list) -> bool:
    """Whether a pattern body (sre items, anchors removed) ends in an unbounded repeat of
    something non-empty, outside any alternation: a matching key extended by it matches again."""
    if not items:
        return False
    op, arg = items[-1]
    if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT):
        return arg[1] == sre_parse.MAXREPEAT and arg[2].getwidth()[1] > 0
    if op is sre_parse.SUBPATTERN and not arg[1] and not arg[2]:
        return _grows(list(arg[3]))
    return False


def _language(items: list) -> set[str] | None:
    """Every string a pattern body of literals, classes, groups, alternations and bounded
    repeats matches; None for anything else or past _MAX_NAMES strings."""
    out = {""}
    for op, arg in items:
        if op is sre_parse.LITERAL:
            options = {chr(arg)}
        elif op is sre_parse.IN:
            options = set()
            for kind, value in arg:
                if kind is sre_parse.LITERAL:
                    options.add(chr(value))
                elif kind is sre_parse.RANGE and value[1] - value[0] < _MAX_NAMES:
                    options |= {chr(c) for c in range(value[0], value[1] + 1)}
                else:
                    return None
        elif op is sre_parse.BRANCH:
            options = set()
            for alternative in arg[1]:
                more = _language(list(alternative))
                if more is None:
                    return None
                options |= more
        elif op is sre_parse.SUBPATTERN and not arg[1] and not arg[2]:
            options = _language(list(arg[3]))
        elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and arg[1] <= 16:
            body = _language(list(arg[2]))
            if body is None:
                return None
            options, power = set(), {""}
            for count in range(arg[1] + 1):
                if count >= arg[0]:
                    options |= power
                if count < arg[1]:
                    power = {a + b for a in power for b in body}
                    if len(power) > _MAX_NAMES:
                        return None
        else:
            return None
        if options is None:
            return None
        out = {a + b for a in out for b in options}
        if len(out) > _MAX_NAMES:
            return None
    return out
