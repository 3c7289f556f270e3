"""JSON schema -> grammar IR (`json_ir`), keyword by keyword, with exact error paths.

Generation is deliberately narrower than validation so every accepted text is a valid instance:
canonical numbers, declared properties in schema order (undeclared ones, where allowed, before
or after them). `additionalProperties` absent means "any other key" (the JSON-schema meaning;
those free-form values are generated as scalars); `closed_objects=True` closes every object. Unknown keywords and annotations constrain nothing and
are ignored (listed once on the `logging` log); `strict=True` refuses unknown ones. Anything we
cannot express exactly raises GrammarError naming the keyword and its JSON pointer; the one
exception is an overlapping oneOf, whose branches exclude each other as far as the ways to fail
the others can be built (narrower, logged: nothing valid by two branches is generated).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import sys
from typing import Any

from .byte_dfa import patterns_apart, patterns_share
from .json_ir import ANY_JSON as _ANY, EMPTY, Grammar, Lit, Node, RecursiveGrammar, Ref, Rep, Rx, alt, opt, regex_size, seq
from .json_merge import ANNOTATIONS, STRUCTURAL, at, canonical, clean, discriminated_conditions, enum_values, listed_names, merge, pointer, pointer_parts
from .json_negation import APPLIES, NON_INTEGER_NUMBER, container_ways, split, ways_to_fail
from .json_objects import Slot, members_body
from .json_terminals import (
    FORMAT_PATTERNS, FORMATS, INTEGER, KEY_CHAR, NON_STRING_FORMATS, NUMBER, PLAIN_CHAR, STRING_CHAR, format_lengths_implied, int_range,
    multiple_of_int, number_range, pattern_to_json_regex, string_except,
)  # fmt: skip
from .protocol import GrammarError
from .regular import intersection, patterns_disjoint

__all__ = ["schema_to_grammar", "json_value_grammar", "normalize_schema", "SchemaSet", "WHITESPACE_MODES"]

logger = logging.getLogger(__name__)
_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_INT_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}
OPEN_OBJECTS_BUDGET = 20_000  # regex characters (~5 s to index for SmolLM2's vocabulary); above it free-form undeclared keys are not generated
EXTRA_DEPTH = 0  # values of undeclared keys nest at most this many containers deep (compile time)
# Bounded strings: outlines-core's index doubles in time with each bounded character that may be
# an escape (maxLength 12: 0.6 s, 16: 13 s, 20: 234 s); without escapes it grows linearly (255: 1.6 s)
ESCAPED_BOUNDED_STRING = 8
MAX_BOUNDED_STRING = 256
MAX_OBJECT_FAILURES = 8  # ways to fail a negated object schema (each one branch of an anyOf)
# schema nodes built inside overlapping oneOfs (ways to fail the other branches nest, and each
# nested way is built): past this many the schema is refused. ~14,000 a second here; SchemaStore's
# bundleconfig takes 4,168, utam-page-object would take 690,000 (49 s)
MAX_EXCLUSION_NODES = 20_000
MAX_COUNTED_FORMS = 256  # sets of optional declared keys written one by one where minProperties/maxProperties count them
ONE_OF_NARROWED = ("a value valid by one branch is generated only where it fails every other branch in a way expressible exactly "
                   "(some are not generated; none valid by two branches is)")
MAX_DEPTH = 3000  # JSON nesting of a schema document we accept (a schema level is ~3 JSON levels)
_RECURSION_LIMIT = 30_000  # translating recurses ~10 frames per level; Python frames are cheap in 3.11+

# whitespace: (between structural tokens, after ':', after ',')
WHITESPACE_MODES = {
    "compact": ("", "", ""),
    "spaced": ("", " ", " "),  # what json.dumps writes by default
    "flexible": (r"[ \t\n\r]{1,16}",) * 3,  # used optionally: terminals never match empty
}


def normalize_schema(schema: Any) -> dict | bool:
    """A dict, a JSON string, or a pydantic model class -> the schema as a dict (or bool)."""
    if isinstance(schema, (dict, bool)):
        return _check_depth(schema)
    if isinstance(schema, (str, bytes)):
        try:
            return _check_depth(json.loads(schema))
        except json.JSONDecodeError as exc:
            raise GrammarError(f"json_schema is not valid JSON: {exc}") from exc
        except RecursionError:
            raise GrammarError(f"json_schema is nested more than {MAX_DEPTH} levels deep") from None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return _check_depth(schema.model_json_schema())
    raise GrammarError(f"json_schema must be a dict, a JSON string or a pydantic model class, not {type(schema).__name__}")


class _Empty(GrammarError):
    """No value can match the schema at this point (an anyOf branch may still be dropped)."""


class _TooManyWays(GrammarError):
    """Overlapping oneOfs took more than MAX_EXCLUSION_NODES nodes: refused, not narrowed."""


class _Translator:
    def __init__(self, root: Any, whitespace: str, strict: bool = False, closed_objects: bool = False) -> None:
        if whitespace not in WHITESPACE_MODES:
            raise GrammarError(f"unknown whitespace mode {whitespace!r}; use one of {sorted(WHITESPACE_MODES)}")
        self.root = root
        self.strict = strict
        self.closed_objects = closed_objects
        ws, after_colon, after_comma = WHITESPACE_MODES[whitespace]
        self.flexible = whitespace == "flexible"
        self.ws = opt(Rx(ws)) if ws else EMPTY
        self.colon = seq(self.ws, Lit(":"), self.ws if self.flexible else Lit(after_colon))
        self.comma = seq(self.ws, Lit(","), self.ws if self.flexible else Lit(after_comma))
        self.item_sep = (",", ":") if whitespace == "compact" else (", ", ": ")
        self.defs: dict[str, Node] = {}
        self.ignored: dict[str, str] = {}  # unknown keyword -> first JSON pointer it was seen at
        self.narrowed: dict[str, str] = {}  # JSON pointer -> how generation is narrower there
        self._validator = None
        self._apart_memo: dict[tuple, tuple] = {}  # (ids, context) -> (a, b, result); holds a, b so ids stay theirs
        self._kinds_memo: dict[tuple, tuple] = {}  # (id, depth) -> (schema, kinds)
        self.free_extras = True  # undeclared keys where additionalProperties is absent / true
        self.unique_items: list[str] | None = None  # a list: uniqueItems left to the caller, pointers here
        self.document = ""  # prefixes definition names, so several documents share one `defs`
        self.exclusions: list[str] = []  # pointers of the overlapping oneOfs being built (innermost last)
        self.exclusion_nodes = 0  # nodes built inside them (bounded by MAX_EXCLUSION_NODES)

    # ---- entry points ----
    def grammar(self, schema: Any) -> Grammar:
        root = self.node(schema, "")
        if self.ignored:
            logger.info("JSON schema: ignored keywords that constrain nothing: %s",
                        ", ".join(f"{k} (at {v})" for k, v in self.ignored.items()))
        if self.narrowed:
            logger.info("JSON schema: generation is narrower than validation at %s",
                        "; ".join(f"{k}: {v}" for k, v in self.narrowed.items()))
        return Grammar(seq(self.ws, root, self.ws) if self.flexible else root, self.defs, self.free_extras, dict(self.narrowed))

    def any_value(self, depth: int | None = None) -> Node:
        """Any JSON value: with depth=None unbounded (a recursive rule: the Lark path), else nested
        at most `depth` containers deep (a regular language: the fast regex path)."""
        name = _ANY if depth is None else f"{_ANY}{depth}"
        if name not in self.defs:
            self.defs[name] = EMPTY  # placeholder while building (recursion)
            inner = Ref(_ANY) if depth is None else self.any_value(depth - 1) if depth > 0 else None
            key = Rx(f'"(?:{STRING_CHAR})*"')
            options = [Lit("null"), Lit("true"), Lit("false"), Rx(NUMBER), Rx(f'"(?:{STRING_CHAR})*"')]
            if inner is not None:
                member = seq(key, self.colon, inner)
                options.append(seq(Lit("{"), self.ws, opt(seq(member, Rep(seq(self.comma, member), 0, None))), self.ws, Lit("}")))
                options.append(seq(Lit("["), self.ws, opt(seq(inner, Rep(seq(self.comma, inner), 0, None))), self.ws, Lit("]")))
            self.defs[name] = alt(*options)
        return Ref(name)

    def unknown(self, key: str, where: str) -> None:
        if self.strict:
            raise GrammarError(f"unknown JSON schema keyword {key!r} at {where} (strict=True refuses keywords that are neither validation keywords nor annotations)")
        self.ignored.setdefault(key, where)

    def narrow(self, where: str, why: str) -> None:
        self.narrowed.setdefault(where or "/", why)

    # ---- schema nodes ----
    def node(self, schema: Any, path: str) -> Node:
        if self.exclusions:
            self.exclusion_nodes += 1
            if self.exclusion_nodes > MAX_EXCLUSION_NODES:
                raise _TooManyWays(f"oneOf at {self.exclusions[0]}: branches may overlap, and writing each as 'this one and no other' "
                                   f"takes more than {MAX_EXCLUSION_NODES:,} schema nodes; use anyOf, distinct types, or a const/enum "
                                   "discriminator property")
        if schema is True:
            return self.any_value()
        if schema is False:
            raise _Empty(f"schema at {at(path)} is `false`: no value can match it")
        if not isinstance(schema, dict):
            raise GrammarError(f"schema at {at(path)} must be an object or a boolean, got {type(schema).__name__}")
        s = clean(schema, path, self.unknown)
        if set(s) == {"$ref"}:
            return self.ref(s["$ref"], path)
        if set(s) == {"allOf"} and (lone := self.lone_reference(s["allOf"], path)):
            return self.ref(*lone)
        if "$ref" in s or "allOf" in s:  # (flatten reads if/then's on one key's constants as one choice)
            s = self.flatten(s, path, frozenset())
        return self.build(s, path)

    def lone_reference(self, members: Any, path: str) -> tuple[str, str] | None:
        """`allOf: [{$ref: X}, {description: ...}]`, SchemaStore's way to describe a reference, is
        X: one rule, not X merged inline (where X is recursive, inlined without end)."""
        if not isinstance(members, list):
            return None
        kept = [(pointer(path, "allOf", i), m) for i, m in enumerate(members) if m is not True]
        kept = [(where, clean(m, where, self.unknown) if isinstance(m, dict) else m) for where, m in kept]
        kept = [(where, m) for where, m in kept if m != {}]
        if len(kept) == 1 and isinstance(kept[0][1], dict) and set(kept[0][1]) == {"$ref"}:
            return kept[0][1]["$ref"], kept[0][0]
        return None

    def ref(self, ref: Any, path: str) -> Node:
        local = self.ref_name(ref, path)
        name = self.document + local
        if name not in self.defs:
            before = set(self.defs)
            self.defs[name] = EMPTY  # placeholder: a cycle sees Ref(name)
            try:
                self.defs[name] = self.node(self.resolve(ref, path), local[1:])
            except GrammarError:
                # the placeholder (it matches the empty text) and every rule built on it go: a
                # later reference from a branch that survives builds them again, or fails again
                for added in set(self.defs) - before:
                    del self.defs[added]
                raise
        return Ref(name)

    def ref_name(self, ref: Any, path: str) -> str:
        if not isinstance(ref, str):
            raise GrammarError(f"$ref at {pointer(path, '$ref')} must be a string")
        base = self.root.get("$id", self.root.get("id")) if isinstance(self.root, dict) else None
        if isinstance(base, str) and base and ref.startswith(base.split("#")[0]) and not ref.startswith("#"):
            ref = ref[len(base.split("#")[0]) :] or "#"
        if not ref.startswith("#"):
            raise GrammarError(f"$ref {ref!r} at {pointer(path, '$ref')} names another document, which is not available: nothing is "
                               "fetched; register it with constrained_spec.grammar.register_schema(uri, document) (the JSON Schema "
                               "meta-schemas are built in)")
        return ref

    def resolve(self, ref: Any, path: str) -> Any:
        ref = self.ref_name(ref, path)
        if ref != "#" and not ref.startswith("#/"):  # an anchor: "#name"
            found = _find_anchor(self.root, ref[1:])
            if found is None:
                raise GrammarError(f"$ref {ref!r} at {pointer(path, '$ref')} does not resolve")
            return found
        target = self.root
        for part in pointer_parts(ref):
            try:
                target = target[int(part)] if isinstance(target, list) else target[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise GrammarError(f"$ref {ref!r} at {pointer(path, '$ref')} does not resolve") from None
        return target

    def flatten(self, s: dict, path: str, seen: frozenset[str]) -> dict:
        """Resolve `$ref` (next to other keywords) and `allOf` into one merged schema."""
        s = dict(s)
        discriminated_conditions(s)  # if/then on one key's constants, referenced ones too: one choice, not 2^n ways merged pairwise
        parts = [{k: v for k, v in s.items() if k not in ("$ref", "allOf")}]
        subs = [(pointer(path, "$ref"), {"$ref": s["$ref"]})] if "$ref" in s else []
        all_of = s.get("allOf", [])
        if "allOf" in s and (not isinstance(all_of, list) or not all_of):
            raise GrammarError(f"allOf at {pointer(path, 'allOf')} must be a non-empty array")
        subs += [(pointer(path, "allOf", i), sub) for i, sub in enumerate(all_of)]
        for where, sub in subs:
            if sub is True:
                continue
            if sub is False:
                raise _Empty(f"allOf at {where} is `false`: no value can match it")
            if not isinstance(sub, dict):
                raise GrammarError(f"schema at {where} must be an object or a boolean")
            sub = clean(sub, where, self.unknown)
            if "$ref" in sub:
                name = self.ref_name(sub["$ref"], where)
                if name in seen or self.defs.get(self.document + name) == EMPTY:
                    raise GrammarError(f"$ref {name!r} at {pointer(where, '$ref')} is combined with other keywords and refers back to itself; not expressible")
                target = self.resolve(name, where)
                if target is False:
                    raise _Empty(f"$ref {name!r} at {where} is `false`: no value can match it")
                rest = {k: v for k, v in sub.items() if k != "$ref"}
                sub = {**rest, "allOf": [*rest.get("allOf", []), target]}
                seen = seen | {name}
            if "$ref" in sub or "allOf" in sub:
                sub = self.flatten(sub, where, seen)
            parts.append(sub)
        return merge(parts, path)

    def build(self, s: dict, path: str) -> Node:
        if not s:
            return self.any_value()
        if "allOf" in s or "anyOf" in s or "oneOf" in s:
            return self.combinator(s, path)
        if "not" in s:
            try:
                s = self.negate(s, path)
            except (_Empty, _TooManyWays):
                raise
            except GrammarError as exc:
                if not self.exclusions:
                    raise
                self.narrow_exclusion()  # no way to fail it is expressible: this part generates nothing
                raise _Empty(str(exc)) from None
            if not isinstance(s, dict):  # every value but some: built already
                return s
            if "anyOf" in s and self.exclusions:
                return self.expressible_ways(s["anyOf"], path)
            if "anyOf" in s:  # one branch per way to fail the negated schema
                try:
                    return self.node(s, path)
                except _Empty:
                    raise
                except GrammarError as exc:  # named where the user wrote it (branch paths are ours)
                    reason = re.sub(r"^(?:not at \S+: )+", "", str(exc))
                    raise GrammarError(f"not at {pointer(path, 'not')}: {reason}") from None
        if "if" in s:
            cond = s.pop("if")
            then, other = s.pop("then", True), s.pop("else", True)
            branches = [{"allOf": [cond, then]}, {"allOf": [{"not": cond}, other]}]
            return self.node({**s, "anyOf": branches}, path)
        for dep in ("dependentRequired", "dependentSchemas"):
            if dep in s:
                return self.dependencies(s, path)
        if "const" in s or "enum" in s:
            return self.enum(s, path)
        types = s.get("type", list(_TYPES))
        if isinstance(types, str):
            types = [types]
        bad = [t for t in types if t not in _TYPES]
        if bad:
            raise GrammarError(f"unknown type {bad[0]!r} at {pointer(path, 'type')}")
        if not types:
            raise _Empty(f"type at {pointer(path, 'type')} allows no value")
        if "number" in types and "integer" in types:
            types = [t for t in types if t != "integer"]  # integers are numbers
        nodes, empty = [], None
        for t in types:
            try:
                nodes.append(self.typed(t, s, path))
            except _Empty as exc:
                empty = exc
        if not nodes:
            raise empty or _Empty(f"schema at {at(path)} allows no value")
        return alt(*nodes)

    def typed(self, kind: str, s: dict, path: str) -> Node:
        if kind == "null":
            return Lit("null")
        if kind == "boolean":
            return alt(Lit("true"), Lit("false"))
        if kind == "integer":
            return self.integer(s, path)
        if kind == "number":
            return self.number(s, path)
        if kind == "string":
            return self.string(s, path)
        if kind == "array":
            return self.array(s, path)
        return self.object(s, path)

    # ---- combinators ----
    def combinator(self, s: dict, path: str) -> Node:
        combos = [(k, s[k]) for k in ("anyOf", "oneOf") if k in s]
        combos += [next(iter(c.items())) for c in s.get("allOf", [])]  # merge() left these
        key, options = combos[0]
        rest = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf", "allOf")}
        later = [{k: v} for k, v in combos[1:]]
        if later:
            rest["allOf"] = later
        where = pointer(path, key)
        if not isinstance(options, list) or not options:
            raise GrammarError(f"{key} at {where} must be a non-empty array")
        negated = False
        if key == "oneOf" and len(options) > 1:
            options, negated = self.exclusive(options, where, rest)
        nodes, empty = [], None
        overlap = f"oneOf at {where}: branches may overlap, so 'exactly one' is not expressible"
        narrowed_before = len(self.narrowed)
        if negated:
            self.exclusions.append(where)
        try:
            for i, option in enumerate(options):
                if option is False:
                    continue
                branch = option if not rest else {"allOf": [rest, option]}
                try:
                    nodes.append(self.node(branch, pointer(where, i)))
                except _Empty as exc:
                    empty = exc
                except GrammarError as exc:
                    if not negated or isinstance(exc, _TooManyWays):
                        raise
                    raise GrammarError(f"{overlap} ({exc}); use anyOf, distinct types, or a const/enum discriminator property") from None
        finally:
            if negated:
                self.exclusions.pop()
        if not nodes and negated and len(self.narrowed) > narrowed_before:
            raise GrammarError(f"{overlap}: no branch keeps a value once the values of the others are left out as far as "
                               "expressible; use anyOf, distinct types, or a const/enum discriminator property")
        if not nodes:
            raise empty or _Empty(f"every branch of {key} at {where} is `false`: no value can match it")
        return alt(*nodes)

    def narrow_exclusion(self) -> None:
        self.narrow(self.exclusions[-1], ONE_OF_NARROWED)

    def expressible_ways(self, ways: list[Any], path: str) -> Node:
        """Inside an overlapping oneOf's branch: the union of the ways to fail a negated schema
        that can be built, the others left out (a narrower union: still only values failing it).
        Where every way fails, the first failure stands (the enclosing part may be what fails)."""
        nodes, failure = [], None
        for way in ways:
            try:
                nodes.append(self.node(way, path))
            except _Empty:
                continue
            except _TooManyWays:
                raise
            except GrammarError as exc:
                failure = failure or exc
        if failure is not None and nodes:
            self.narrow_exclusion()
        if not nodes:
            raise failure or _Empty(f"not at {pointer(path, 'not')}: every value of the enclosing schema matches the negated one")
        return alt(*nodes)

    def exclusive(self, options: list[Any], where: str, siblings: dict | None = None) -> tuple[list[Any], bool]:
        """oneOf as anyOf of disjoint branches, and whether they carry negations (whose refusal
        then means the branches may overlap). Disjoint branches stay as they are; finite ones keep
        the values in exactly one; otherwise branch i becomes B_i and not B_j for every j != i,
        exact wherever those negations are expressible. `siblings`: the keywords next to the
        oneOf (their `type` and `required` hold for every branch's instances too)."""
        live = [o for o in options if o is not False]
        if len(live) <= 1 or self.disjoint(live, siblings):
            return live, False
        values = [enum_values(self.deref(o)) for o in live]
        if all(v is not None for v in values):  # finite branches: keep values in exactly one
            # (a value a branch lists counts where the branch's other keywords admit it too:
            # `{enum: [a, bb], maxLength: 1}` does not hold "bb")
            values = [[v for v in vs if self.validates(v, o)] for vs, o in zip(values, live)]
            counts: dict[str, int] = {}
            for vs in values:
                for key in {canonical(v) for v in vs}:
                    counts[key] = counts.get(key, 0) + 1
            once = [v for vs in values for v in vs if counts[canonical(v)] == 1]
            return ([{"enum": once}] if once else [False]), False
        if any(o is True for o in live):
            raise GrammarError(f"oneOf at {where}: a `true` branch overlaps every other; not expressible")
        return [{"allOf": [o, *({"not": p} for j, p in enumerate(live) if j != i)]} for i, o in enumerate(live)], True

    def deref(self, schema: Any) -> Any:
        for _ in range(32):
            if isinstance(schema, dict) and "$ref" in schema and not set(schema) - {"$ref"} - ANNOTATIONS - STRUCTURAL:
                schema = self.resolve(schema["$ref"], "")
            else:
                break
        return schema

    def disjoint(self, options: list[Any], siblings: dict | None = None) -> bool:
        """Conservative: no instance can match two of these schemas (checked pair by pair).
        `siblings`: the schema holding them, whose `type` and `required` every instance meets too."""
        resolved = [self.deref(o) for o in options]
        if not all(isinstance(o, dict) for o in resolved):
            return False
        siblings = siblings if isinstance(siblings, dict) else {}
        context = (frozenset(_required(siblings)), self.kinds({"type": siblings["type"]}) if "type" in siblings else None)
        if len(resolved) > 2 and self.tagged(resolved, *context):
            return True
        return all(self.apart(a, b, *context) for i, a in enumerate(resolved) for b in resolved[i + 1 :])

    def tagged(self, options: list[dict], required: frozenset[str], types: set[str] | None) -> bool:
        """The tagged union, proved in one pass: every option admits objects only and requires a
        key K whose values it lists (const / enum, in the option or its allOf members), and no
        value is listed by two options. (Pair by pair, `apart` proves the same at a cost of
        ~1 ms a pair: SchemaStore's vector, a oneOf of 65 sources, took 4 s.)"""
        tags = []
        for option in options:
            kinds = self.kinds(option)
            kinds = types if kinds is None else kinds if types is None else kinds & types
            if kinds is None or not kinds <= {"object"}:
                return False
            keys, values = set(required), {}
            self._tags_of(option, keys, values, 0)
            tags.append({k: v for k, v in values.items() if k in keys})
        for key in sorted(set.intersection(*(set(t) for t in tags))):
            seen: set[str] = set()
            for t in tags:
                if seen & t[key]:
                    break
                seen |= t[key]
            else:
                return True
        return False

    def _tags_of(self, schema: Any, keys: set[str], values: dict[str, set[str]], depth: int) -> None:
        """Adds the keys `schema` requires and, per key, the canonical values it lists for it
        (narrowed where several parts list them), through allOf members."""
        schema = self.deref(schema)
        if not isinstance(schema, dict) or depth > 8:
            return
        keys.update(_required(schema))
        props = schema.get("properties")
        for name, sub in (props.items() if isinstance(props, dict) else ()):
            listed = enum_values(self.deref(sub))
            if listed is None:
                continue
            try:
                found = {canonical(v) for v in listed}
            except GrammarError:
                continue
            values[name] = values[name] & found if name in values else found
        members = schema.get("allOf")
        for member in (members if isinstance(members, list) else ()):
            self._tags_of(member, keys, values, depth + 1)

    def _negated_required(self, schema: Any, depth: int) -> list[list[str]]:
        """The key lists R of every `not: {"required": R}` in `schema` and its allOf members: an
        object holding all of R meets none of them."""
        schema = self.deref(schema)
        if not isinstance(schema, dict) or depth > 8:
            return []
        found = []
        negated = self.deref(schema.get("not"))
        if isinstance(negated, dict) and set(negated) - ANNOTATIONS == {"required"} and _required(negated):
            found.append(_required(negated))
        members = schema.get("allOf")
        for member in (members if isinstance(members, list) else ()):
            found += self._negated_required(member, depth + 1)
        return found

    def apart(self, a: dict, b: dict, required: frozenset[str] = frozenset(), types: set[str] | None = None, depth: int = 0) -> bool:
        """Conservative: no instance matches both `a` and `b`, where every instance also has one
        of the JSON `types` (None: any) and, as an object, the keys `required`. Remembered per
        pair and context: nested anyOf branches and shared definitions meet the same pairs again
        (SchemaStore's venvironment: 280,000 calls for 1,200 pairs without it)."""
        key = (id(a), id(b), required, None if types is None else frozenset(types), depth)
        hit = self._apart_memo.get(key)
        if hit is None:
            hit = self._apart_memo[key] = (a, b, self._apart(a, b, required, types, depth))
        return hit[2]

    def _apart(self, a: dict, b: dict, required: frozenset[str], types: set[str] | None, depth: int) -> bool:
        ka, kb = self.kinds(a), self.kinds(b)
        if types is not None:
            ka, kb = (types if k is None else k & types for k in (ka, kb))
        if ka is not None and kb is not None and not ka & kb:
            return True
        if ka is not None and kb is not None and ka | kb <= {"string"}:  # strings: patterns no string matches both
            pa, pb = a.get("pattern"), b.get("pattern")
            if isinstance(pa, str) and isinstance(pb, str):
                share = patterns_share(pa, pb)  # bytes first; undecided there: over code points
                if share is False or (share is None and patterns_disjoint(pa, pb)):
                    return True
        for finite, other in ((a, b), (b, a)):  # an enum none of whose values the other admits
            values = enum_values(finite)
            if values is not None and not any(self.validates(v, other) for v in values):
                return True
        # discriminated objects (where one side admits only objects, the other's required and
        # properties then apply too): one required property whose const/enum values never overlap
        if depth < 8:  # an allOf lies within each of its members: one member apart is enough;
            for one, other in ((a, b), (b, a)):  # an anyOf / oneOf within their union: every branch
                members = one.get("allOf")
                if isinstance(members, list):
                    resolved = [self.deref(member) for member in members]  # every member's required keys are there
                    keys = required | frozenset(k for m in resolved if isinstance(m, dict) for k in _required(m)) | frozenset(_required(one))
                    own = self.kinds(one)  # every instance of `one` has one of its types: its members are read there
                    within_types = own if types is None else types if own is None else own & types
                    if any(isinstance(m, dict) and self.apart(m, other, keys, within_types, depth + 1) for m in resolved):
                        return True
                for key in ("anyOf", "oneOf"):
                    branches = one.get(key)
                    if isinstance(branches, list) and branches and all(
                            isinstance(m := self.deref(branch), dict) and self.apart(m, other, required, types, depth + 1) for branch in branches):
                        return True
        if not any(k is not None and k <= {"object"} for k in (ka, kb)):
            return False
        for one, other in ((a, b), (b, a)):  # one requires a key the other forbids (on objects: one side takes no other)
            if any(_forbids_key(other, name, self.deref) for name in _required(one)):
                return True
        if depth >= 8:
            return False
        for name in sorted(set(_required(a)) | set(_required(b)) | required):  # a key one side requires, valued apart where both declare it
            va, vb = (self.deref(o["properties"].get(name)) if isinstance(o.get("properties"), dict) else None for o in (a, b))
            if isinstance(va, dict) and isinstance(vb, dict) and self.apart(va, vb, depth=depth + 1):
                return True
        # a side's `not: {"required": R}` (JSON-RPC's "cannot have result and error at the same
        # time", in the part both responses share) with every key of R required by the two
        try:
            negated = [r for one in (a, b) for r in self._negated_required(one, 0)]
            if not negated:  # (most pairs: the required keys are not gathered)
                return False
            keys: set[str] = set(required)
            self._tags_of(a, keys, {}, 0)
            self._tags_of(b, keys, {}, 0)
            return any(set(r) <= keys for r in negated)
        except GrammarError:  # a reference that cannot be read: not proven
            return False

    def kinds(self, schema: Any, depth: int = 0) -> set[str] | None:
        """The JSON types (integer counted as number) an instance of `schema` can have; None: any.
        Remembered like apart (which asks it of every branch at every level); callers never
        change the set."""
        key = (id(schema), depth)
        hit = self._kinds_memo.get(key)
        if hit is None:
            hit = self._kinds_memo[key] = (schema, self._kinds(schema, depth))
        return hit[1]

    def _kinds(self, schema: Any, depth: int) -> set[str] | None:
        schema = self.deref(schema)
        if schema is False:
            return set()
        if not isinstance(schema, dict) or depth > 16:
            return None
        found = _possible_types(schema)
        for key in ("anyOf", "oneOf", "allOf"):
            parts = schema.get(key)
            if not isinstance(parts, list) or not parts:
                continue
            sets = [self.kinds(p, depth + 1) for p in parts]
            if key == "allOf":
                known = [k for k in sets if k is not None]
                joined = set.intersection(*known) if known else None
            elif key == "oneOf" and sum(self.objects_only(p, depth + 1) for p in parts) >= 2:
                joined = {"object"}  # two branches take every non-object: no non-object is in exactly one
            else:
                joined = None if any(k is None for k in sets) else set().union(*sets)
            if joined is not None:
                found = joined if found is None else found & joined
        return found

    def objects_only(self, schema: Any, depth: int = 0) -> bool:
        """Whether `schema` constrains objects alone (every non-object instance is valid): only
        object keywords, through references and allOf (the enonic-xp forms: input kinds without
        `type`, told apart by a `type` property)."""
        schema = self.deref(schema)
        if schema is True:
            return True
        if not isinstance(schema, dict) or depth > 16:
            return False
        for key, value in schema.items():
            if key in ANNOTATIONS or key in STRUCTURAL or key in _OBJECT_ONLY:
                continue
            if key == "allOf" and isinstance(value, list) and all(self.objects_only(v, depth + 1) for v in value):
                continue
            return False
        return True

    def negate(self, s: dict, path: str) -> dict | Node:
        s = dict(s)
        neg, where = s.pop("not"), pointer(path, "not")
        if neg is False:
            return s
        if neg is True or (isinstance(neg, dict) and not clean(neg, where, self.unknown)):
            raise _Empty(f"not at {where} negates a schema every value matches: no value can match")
        neg = clean(self.deref(neg), where, self.unknown) if isinstance(neg, dict) else neg
        parts, todo = [], [neg]  # not (A or B) = not A and not B, through nested anyOf
        while todo:
            part = todo.pop(0)
            part = clean(self.deref(part), where, self.unknown) if isinstance(part, dict) else part
            if isinstance(part, dict) and set(part) == {"anyOf"} and isinstance(part["anyOf"], list):
                todo = list(part["anyOf"]) + todo
            else:
                parts.append(part)
        if any(p is True or p == {} for p in parts):
            raise _Empty(f"not at {where} negates a schema every value matches: no value can match")
        parts = [p for p in parts if p is not False]  # not false: every value
        if not parts:
            return s
        # not E1 and not E2 == not (E1 or E2); last, so no other negation follows the values left out
        finite = [p for p in parts if isinstance(p, dict) and set(p) in ({"enum"}, {"const"}) and enum_values(p) is not None]
        if finite:
            parts = [p for p in parts if not any(p is f for f in finite)] + [{"enum": [v for f in finite for v in enum_values(f)]}]
        for i, part in enumerate(parts):
            if not isinstance(part, dict):
                raise GrammarError(f"not at {where} is not expressible")
            if set(part) == {"type"}:
                have = _types_of(s.get("type"))
                gone = _types_of(part["type"])
                if "integer" in gone and "number" in have and "number" not in gone:
                    return self.non_integers(s, [t for t in have if t not in gone and t != "number"], parts[i + 1 :], where, path)
                s["type"] = [t for t in have if t not in gone and not (t == "integer" and "number" in gone)]
            elif set(part) <= {"enum", "const"} and ("enum" in s or "const" in s):
                drop = {canonical(v) for v in enum_values(part) or []}
                s["enum"] = [v for v in enum_values(s) or [] if canonical(v) not in drop]
                s.pop("const", None)
            elif set(part) == {"required"} and isinstance(part["required"], list) and len(part["required"]) == 1:
                name = part["required"][0]
                s["properties"] = {**s.get("properties", {}), name: False}  # the key must be absent
                # and the value an object: every other value has all "required" keys vacuously
                s["type"] = [t for t in _types_of(s.get("type")) if t == "object"]
            elif (set(part) == {"properties"} and isinstance(part["properties"], dict) and len(part["properties"]) == 1
                  and set(_types_of(s.get("type"))) == {"object"}):
                # an object fails {properties: {k: P}} iff it has k and its value fails P
                (name, sub), = part["properties"].items()
                if sub is True:
                    raise _Empty(f"not at {where} negates a schema every object matches: no object can match")
                props = s.get("properties", {})
                if name not in props and s.get("patternProperties"):
                    raise GrammarError(f"not at {where} of a property that patternProperties may also describe is not expressible")
                own = props[name] if name in props else s.get("additionalProperties", True)
                s["required"] = list(dict.fromkeys([*s.get("required", []), name]))
                s["properties"] = {**props, name: {"allOf": [own, {"not": sub}]}}
            elif set(part) in ({"enum"}, {"const"}) and (values := enum_values(part)) is not None:
                return self.all_but(s, values, parts[i + 1 :], where, path)
            elif (ways := _object_failures(part)) is not None:
                return self.negated_container(s, part, "object", ways, parts[i + 1 :], where)
            elif set(part) <= {"type", "items"} and isinstance(part.get("items"), dict) and _types_of(part.get("type", "array")) == ["array"]:
                # an array fails {items: S} iff it contains an item failing S
                ways = [{"contains": {"not": part["items"]}}]
                return self.negated_container(s, part, "array", ways, parts[i + 1 :], where)
            elif not parts[i + 1 :] and (node := self.some_member_failing(s, part, where, path)) is not None:
                return node
            else:  # the union of the ways to fail it, each conjoined with s and negated further
                groups = split(part)
                held = {**s, "additionalProperties": False} if self.closed_objects and "additionalProperties" not in s else s
                ways = [{"not": g} for g in groups] if len(groups) > 1 else ways_to_fail(part, held)
                if ways is None and self.exclusions and (ways := ways_to_fail(part, held, partial=True)) is not None:
                    self.narrow_exclusion()  # inside an overlapping oneOf's branch: the ways that can be written
                if ways is None:
                    shown = json.dumps(part, ensure_ascii=False)
                    raise GrammarError(
                        f"not at {where} ({shown[:120]}{'...' if len(shown) > 120 else ''}) is not expressible exactly (not expressible: "
                        "not of a pattern, format, multipleOf, uniqueItems or propertyNames, nor an undeclared key of an open object "
                        "next to more than 3 declared keys)"
                    )
                base = {**s, **({"not": {"anyOf": parts[i + 1 :]}} if parts[i + 1 :] else {})}
                if not ways:
                    raise _Empty(f"not at {where}: every value of the enclosing schema matches the negated one")
                return {"anyOf": [{**base, "allOf": [*base.get("allOf", []), way]} for way in ways]}
        return s

    def non_integers(self, s: dict, others: list[str], rest: list[Any], where: str, path: str) -> Node:
        """s and not integer, where s admits numbers: its other types, and numbers with a fraction
        (NON_INTEGER_NUMBER); exact where nothing else in s can constrain a number (only keywords
        of strings, objects and arrays next to `type`) and no negation follows."""
        if rest or not _only_keywords_of(s, ("string", "object", "array")):
            raise GrammarError(f"not at {where}: 'numbers that are not integers' next to bounds, an enum, a combinator, a condition "
                               "or another not is not expressible")
        nodes = [Rx(NON_INTEGER_NUMBER)]
        if others:
            try:
                nodes.append(self.node({**s, "type": others}, path))
            except _Empty:
                pass
        return alt(*nodes)

    def all_but(self, s: dict, values: list, rest: list[Any], where: str, path: str) -> Node:
        """s (no enum of its own) and not enum(values), one alternative per type of s: booleans
        and null left out by value, numbers split into the open intervals between the excluded
        integers, strings outside the excluded ones (string_except: exact in canonical spelling)."""
        base = {**s, **({"not": {"anyOf": rest}} if rest else {})}
        kinds = _types_of(s.get("type"))
        if "number" in kinds and "integer" in kinds:
            kinds = [k for k in kinds if k != "integer"]
        branches: list[dict] = []
        nodes: list[Node] = []
        for kind in kinds:
            mine = [v for v in values if _json_type(v) in (("integer", "number") if kind == "number" else (kind,))]
            if not mine:
                branches.append({**base, "type": kind})
            elif kind == "boolean":
                branches += [{**base, "type": kind, "enum": [b]} for b in (True, False) if not any(v is b for v in mine)]
            elif kind in ("number", "integer"):
                cuts = sorted(set(mine))
                if any(not float(v).is_integer() for v in cuts) or len(cuts) > 16:
                    raise GrammarError(f"not at {where}: numbers except {cuts[:4]}... are not expressible (integers only, at most 16)")
                edges = [None, *(int(v) for v in cuts), None]
                for lo, hi in zip(edges, edges[1:]):
                    bounds = {**({"exclusiveMinimum": lo} if lo is not None else {}), **({"exclusiveMaximum": hi} if hi is not None else {})}
                    branches.append({**base, "type": kind, "allOf": [bounds]})
            elif kind == "string":
                # the strings are written as one regex: exact only where nothing else in s can
                # constrain a string (keywords of numbers, objects and arrays next to `type`)
                if rest or not _only_keywords_of(s, ("number", "object", "array")):
                    raise GrammarError(f"not at {where}: strings except some, next to a pattern, format, length, condition or "
                                       "another not, are not expressible")
                nodes.append(Rx(string_except([v for v in mine if isinstance(v, str)])))
            elif kind in ("object", "array"):  # differ from the first in one of its ways, and from the rest after
                first, *others = mine
                carried = [*rest, {"enum": others}] if others else rest
                differing = {**s, **({"not": {"anyOf": carried}} if carried else {}), "type": kind}
                branches += [{**differing, "allOf": [*differing.get("allOf", []), way]} for way in container_ways(first, s)]
        for branch in branches:
            try:
                nodes.append(self.node(branch, path))
            except _Empty:
                continue
        if not nodes:
            raise _Empty(f"not at {where}: every value of the enclosing schema is excluded")
        return alt(*nodes)

    def some_member_failing(self, s: dict, part: dict, where: str, path: str) -> Node | None:
        """Objects of s (patternProperties, nothing declared) holding some key `part` (object
        members only: properties/patternProperties/additionalProperties) refuses: Swagger 2.0's
        `responses`, "some key that is not an x- extension". Exact where each of s's patterns
        either always fails `part` (its keys match none of part's patterns and part's
        additionalProperties is false) or never does (it equals one of part's patterns, apart from
        the rest, whose schema is true); the body is passing* failing any*. None elsewhere."""
        mine, theirs = s.get("patternProperties"), part.get("patternProperties", {})
        if (_types_of(s.get("type")) != ["object"] or not mine or not isinstance(mine, dict) or not isinstance(theirs, dict)
                or set(s) - {"type", "patternProperties", "additionalProperties", "minProperties"} or s.get("minProperties", 0) > 1
                or not set(part) <= {"properties", "patternProperties", "additionalProperties"} or part.get("properties")):  # fmt: skip
            return None
        failing, passing = {}, {}
        for pattern, sub in mine.items():
            apart = [q for q in theirs if q != pattern and patterns_apart(q, pattern)]
            if pattern in theirs and len(apart) == len(theirs) - 1 and self.admits_all(theirs[pattern], where):
                passing[pattern] = sub
            elif len(apart) == len(theirs) and part.get("additionalProperties", True) is False:
                failing[pattern] = sub
            else:
                return None
        extra = s.get("additionalProperties", False if self.closed_objects else True)
        fail = self.extra_member(extra, failing, True, [], path) if failing else None
        if fail is None:
            raise _Empty(f"not at {where}: every object of the enclosing schema matches the negated one")
        passes = self.extra_member(extra, passing, True, [], path) if passing else None
        every = self.extra_member(extra, mine, True, [], path)
        slots = ([Slot(passes, 0, None)] if passes is not None else []) + [Slot(fail, 1, 1), Slot(every, 0, None)]
        return seq(Lit("{"), self.ws, members_body(slots, self.comma), self.ws, Lit("}"))

    def admits_all(self, schema: Any, where: str) -> bool:
        """Conservative: every value matches `schema` (true, {}, or only keywords set to true)."""
        schema = self.deref(schema)
        if not isinstance(schema, dict):
            return schema is True
        kept = clean(schema, where, lambda key, at: None)
        return all(key in _VACUOUS_WHEN_TRUE and value in (True, {}) for key, value in kept.items())

    def negated_container(self, s: dict, part: dict, kind: str, ways: list[dict], rest: list[Any], where: str) -> dict:
        """s and not `part`, a schema of objects or arrays (`kind`) that such a value fails in one
        of `ways` (an object: a required key absent, a listed key with a value failing its schema;
        an array: an item failing `items`), so this is anyOf(s and way). Values of other types
        satisfy `part` unless it names the type. `rest`: the negations still to apply, carried
        into every branch."""
        kinds = _types_of(s.get("type"))
        base = {**s, **({"not": {"anyOf": rest}} if rest else {})}
        branches = [{**base, "type": kind, "allOf": [way]} for way in ways] if kind in kinds else []
        others = [t for t in kinds if t != kind]
        if "type" in part and others:  # values of other types fail `type: kind`
            branches.append({**base, "type": others})
        if not branches:
            raise _Empty(f"not at {where}: every value of the enclosing schema matches the negated one")
        return {"anyOf": branches}

    def dependencies(self, s: dict, path: str) -> Node:
        """dependentRequired / dependentSchemas as anyOf(key absent, key present and ...): exact."""
        s = dict(s)
        deps = [(name, {"required": [name, *need]}) for name, need in s.pop("dependentRequired", {}).items()]
        deps += [(name, {"allOf": [{"required": [name]}, sub]}) for name, sub in s.pop("dependentSchemas", {}).items()]
        if len(deps) > 4:
            raise GrammarError(f"more than 4 dependentRequired/dependentSchemas entries at {at(path)}: not expressible compactly")
        for name, present in deps:
            if name in s.get("required", []):  # always present: the dependency always applies
                s.setdefault("allOf", []).append(present)
            else:
                s.setdefault("allOf", []).append({"anyOf": [{"properties": {name: False}}, present]})
        return self.node(s, path)

    def enum(self, s: dict, path: str) -> Node:
        values = enum_values(s)
        if values is None:
            raise GrammarError(f"enum at {pointer(path, 'enum')} must be an array")
        rest = {k: v for k, v in s.items() if k not in ("enum", "const")}
        if rest:
            values = [v for v in values if self.validates(v, rest)]
        if "enum" in s and "const" in s:
            values = [v for v in values if canonical(v) == canonical(s["const"])]
        if not values:
            raise _Empty(f"enum/const at {at(path)} allows no value")
        forms = []
        for v in values:
            forms.append(Lit(json.dumps(v, separators=self.item_sep, ensure_ascii=False)))
            if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and abs(v) < 2**53:
                forms += [Lit(str(int(v))), Lit(f"{int(v)}.0")]  # 1 == 1.0 in JSON schema
        return alt(*forms)

    def validates(self, value: Any, schema: dict) -> bool:
        """Does `value` satisfy `schema` (refs resolved against the root)? Used to filter enums."""
        quick = _type_verdict(value, schema)
        if quick is not None:
            return quick
        import jsonschema

        if self._validator is None:
            root = self.root if isinstance(self.root, dict) else {}
            cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
            self._validator = cls(root, format_checker=cls.FORMAT_CHECKER)
        try:
            return self._validator.evolve(schema=schema).is_valid(value)
        except Exception as exc:  # a schema jsonschema cannot read: refuse rather than guess
            raise GrammarError(f"cannot check enum values against their sibling keywords: {exc}") from exc

    # ---- leaves ----
    def integer(self, s: dict, path: str) -> Node:
        lo, hi = _bounds(s, path)
        fmt = s.get("format")
        if fmt in _INT_FORMATS:
            flo, fhi = _INT_FORMATS[fmt]
            lo, hi = max(lo, flo) if lo is not None else flo, min(hi, fhi) if hi is not None else fhi
        if "multipleOf" in s:
            return self.multiple_of(s, path, lo, hi, integer=True)
        if lo is None and hi is None:
            return Rx(INTEGER)
        regex = int_range(lo, hi)
        if regex is None:
            raise _Empty(f"integer bounds at {at(path)} allow no value")
        return Rx(regex)

    def number(self, s: dict, path: str) -> Node:
        if "multipleOf" in s:
            lo, hi = _bounds(s, path)
            return self.multiple_of(s, path, lo, hi, integer=False)
        return self.bounded_number(s, path)

    def bounded_number(self, s: dict, path: str, places: int | None = None) -> Node:
        """Decimals (no exponent where bounded) between the bounds, at most `places` fraction digits."""
        keys = [k for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in s]
        if not keys and places is None:
            return Rx(NUMBER)
        for k in keys:
            v = s[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise GrammarError(f"{k} at {pointer(path, k)} must be a finite number")
        lo = hi = None
        lo_excl = hi_excl = False
        if "minimum" in s:
            lo = s["minimum"]
        if "exclusiveMinimum" in s and (lo is None or s["exclusiveMinimum"] >= lo):
            lo, lo_excl = s["exclusiveMinimum"], True
        if "maximum" in s:
            hi = s["maximum"]
        if "exclusiveMaximum" in s and (hi is None or s["exclusiveMaximum"] <= hi):
            hi, hi_excl = s["exclusiveMaximum"], True
        regex = number_range(lo, lo_excl, hi, hi_excl, places)
        if regex is None:
            raise _Empty(f"number bounds at {at(path)} allow no value")
        return Rx(regex)

    def multiple_of(self, s: dict, path: str, lo: int | None, hi: int | None, integer: bool) -> Node:
        """multipleOf m: integers when m is an integer; decimals with at most k places when
        m = 10^-k (any number written with k places or fewer is such a multiple); both exactly."""
        m, where = s["multipleOf"], pointer(path, "multipleOf")
        if isinstance(m, bool) or not isinstance(m, (int, float)) or m <= 0:
            raise GrammarError(f"multipleOf at {where} must be a positive number")
        places = _decimal_places(m)
        if float(m).is_integer():
            m = int(m)
            if not integer and any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")) and not all(
                float(s[k]).is_integer() for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in s
            ):
                raise GrammarError(f"multipleOf at {where} with fractional bounds is not expressible")
            regex = multiple_of_int(m, lo, hi)
            if regex is None:
                raise GrammarError(f"multipleOf {m} at {where} with these bounds is not expressible (supported: "
                                   "divisors of a power of ten, or a bounded range of at most 1000 multiples)")
            return Rx(regex)
        if places is None or integer:
            if integer and places is not None:  # every integer is a multiple of 10^-k
                return self.integer({k: v for k, v in s.items() if k != "multipleOf"}, path)
            raise GrammarError(f"multipleOf {m!r} at {where} is not expressible (supported: integers and 10^-k)")
        if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
            return self.bounded_number(s, path, places)
        return Rx(INTEGER + f"(?:\\.[0-9]{{1,{places}}})?")

    def string(self, s: dict, path: str) -> Node:
        lo, hi = _count(s, "minLength", 0, path), _count(s, "maxLength", None, path)
        if hi is not None and hi < lo:
            raise _Empty(f"minLength/maxLength at {at(path)} allow no string")
        fmt = s.get("format")
        if fmt is not None and fmt not in FORMATS:
            if not isinstance(fmt, str) or fmt not in NON_STRING_FORMATS:
                self.unknown(f"format: {fmt}", pointer(path, "format"))
            fmt = None
        if fmt is not None:
            implied = format_lengths_implied(fmt, lo, hi)
            if implied is False:
                raise _Empty(f"format {fmt!r} and minLength/maxLength at {at(path)} allow no string")
            if "pattern" in s or not implied:  # the format's strings that the pattern and lengths admit too
                try:
                    both = intersection([f"^(?:{FORMAT_PATTERNS[fmt]})$", *([s["pattern"]] if "pattern" in s else [])])
                    if both is None:
                        raise _Empty(f"format {fmt!r} and pattern at {at(path)} allow no string")
                    return Rx('"' + pattern_to_json_regex(both, lo, hi) + '"')
                except ValueError as exc:
                    raise GrammarError(f"format {fmt!r} together with pattern/minLength/maxLength at {at(path)} is not expressible: {exc}") from exc
            return Rx(f'"(?:{FORMATS[fmt]})"')
        if "pattern" in s:
            try:
                return Rx('"' + pattern_to_json_regex(s["pattern"], lo, hi) + '"')
            except ValueError as exc:
                raise GrammarError(f"pattern at {pointer(path, 'pattern')} cannot be translated exactly: {exc}") from exc
        if (lo, hi) == (0, None):
            return Rx(f'"(?:{STRING_CHAR})*"')
        longest = max(lo, hi or 0)
        if longest > MAX_BOUNDED_STRING:
            raise GrammarError(f"minLength/maxLength at {at(path)}: a string bounded at {longest} characters is over our "
                               f"compiler's limit of {MAX_BOUNDED_STRING} (the index grows with the bound)")
        char = STRING_CHAR
        if longest > ESCAPED_BOUNDED_STRING:
            char = PLAIN_CHAR
            self.narrow(at(path), f"a string bounded at {longest} characters is generated without escapes (quotes, backslashes, control characters)")
        return Rx(f'"(?:{char}){{{lo},{"" if hi is None else hi}}}"')

    # ---- arrays ----
    def array(self, s: dict, path: str) -> Node:
        prefix = list(s.get("prefixItems", []))
        items = s.get("items", True)
        lo, hi = _count(s, "minItems", 0, path), _count(s, "maxItems", None, path)
        if False in prefix:  # a `false` position: the array must end before it
            prefix = prefix[: prefix.index(False)]
            items = False
        if items is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if s.get("uniqueItems") is True:
            if (hi is None or hi > 1) and not prefix:
                counted = {k: s[k] for k in ("contains", "minContains", "maxContains") if k in s}
                finite = self.unique_arrays(items, lo, hi, path, counted)
                if finite is not None:
                    return finite
            if (hi is None or hi > 1) and self.unique_items is not None:
                self.unique_items.append(pointer(path, "uniqueItems"))  # the caller enforces it: unique_items.py
            elif hi is None or hi > 1:
                hi = 1  # one element is always unique: narrower, never wrong
                self.narrow(pointer(path, "uniqueItems"), "arrays of at most one item")
        if hi is not None and hi < lo:
            raise _Empty(f"minItems/maxItems at {at(path)} allow no array")
        if "contains" in s:
            return self.contains(s, items, prefix, lo, hi, path)
        nodes = []
        for i, sub in enumerate(prefix[: hi if hi is not None else len(prefix)]):
            try:
                nodes.append(self.node(sub, pointer(path, "prefixItems", i)))
            except _Empty:
                hi = i if hi is None else min(hi, i)  # no value fits position i: end before it
                break
        if hi is not None and hi < lo:
            raise _Empty(f"prefixItems at {at(path)} leave no array of at least {lo} items")
        tail = None
        if items is not False and (hi is None or hi > len(nodes)):
            try:
                tail = self.node(items, pointer(path, "items"))
            except _Empty:
                tail = None
        if tail is None and lo > len(nodes):
            raise _Empty(f"items at {at(path)} leave no array of at least {lo} items")
        body = _positional_body(nodes, tail, self.comma, lo, hi)
        return seq(Lit("["), self.ws, body, self.ws, Lit("]"))

    def contains(self, s: dict, items: Any, prefix: list, lo: int, hi: int | None, path: str) -> Node:
        where = pointer(path, "contains")
        least, most = _count(s, "minContains", 1, path), _count(s, "maxContains", None, path)
        if prefix or most is not None or least > 1 or hi is not None or lo > 1:
            raise GrammarError(f"contains at {where} together with prefixItems, maxContains, minContains > 1 "
                               "or item counts is not expressible")
        if least == 0:
            return self.array({k: v for k, v in s.items() if k not in ("contains", "minContains")}, path)
        item = self.node(items, pointer(path, "items"))
        match = self.node({"allOf": [items, s["contains"]]} if items is not True else s["contains"], where)
        # Items before the first match fail `contains` where that is expressible exactly: then no
        # text can be both an earlier item and the match (the Lark lexer picks one terminal for
        # `"x"`, and `["x"]` was refused where `contains` is `{"const": "x"}`).
        before = self.miss(items, s["contains"], where)
        if before is False:  # every item matches: the first one is the match
            body = seq(match, Rep(seq(self.comma, item), 0, None))
        else:
            body = seq(Rep(seq(before or item, self.comma), 0, None), match, Rep(seq(self.comma, item), 0, None))
        return seq(Lit("["), self.ws, body, self.ws, Lit("]"))

    def miss(self, items: Any, contained: Any, where: str) -> Node | bool | None:
        """An item failing `contained` (False: none can; None: not expressible exactly here)."""
        narrowed, ignored = dict(self.narrowed), dict(self.ignored)
        try:
            node = self.node({"allOf": [items, {"not": contained}]} if items is not True else {"not": contained}, where)
        except _TooManyWays:
            raise
        except _Empty:
            return False
        except GrammarError:
            return None
        if self.narrowed != narrowed:  # a narrower complement would lose arrays: keep the plain form
            self.narrowed, self.ignored = narrowed, ignored
            return None
        return node

    def unique_arrays(self, items: Any, lo: int, hi: int | None, path: str, counted: dict | None = None) -> Node | None:
        """uniqueItems over a finite item domain of at most 4 values: every arrangement, exactly
        (those `counted`, the array's contains/minContains/maxContains, admits)."""
        sub = self.deref(items)
        values = None
        if isinstance(sub, dict):
            sub = clean(sub, path, self.unknown)
            values = enum_values(sub)
            if values is not None:
                rest = {k: v for k, v in sub.items() if k not in ("enum", "const")}
                values = [v for v in values if not rest or self.validates(v, rest)]
            elif set(sub) == {"type"} and set(_types_of(sub["type"])) <= {"boolean", "null"}:
                values = [v for t in _types_of(sub["type"]) for v in ([True, False] if t == "boolean" else [None])]
        if values is None:
            return None
        distinct = list({canonical(v): v for v in values}.values())
        if len(distinct) > 4:
            return None
        top = len(distinct) if hi is None else min(hi, len(distinct))
        forms = []
        for size in range(lo, top + 1):
            for combo in itertools.permutations(distinct, size):
                if not counted or self.validates(list(combo), counted):
                    forms.append(Lit(json.dumps(list(combo), separators=self.item_sep, ensure_ascii=False)))
        if not forms:
            raise _Empty(f"uniqueItems at {at(path)} with minItems {lo} allows no array")
        return alt(*forms)

    # ---- objects ----
    def object(self, s: dict, path: str) -> Node:
        props = dict(s.get("properties", {}))
        required = list(dict.fromkeys(s.get("required", [])))
        patterns = dict(s.get("patternProperties", {}))
        extra = s.get("additionalProperties", False if self.closed_objects else True)
        if self.closed_objects and extra is not False:
            extra = False
        names_schema = s.get("propertyNames", True)
        least, most = _count(s, "minProperties", 0, path), _count(s, "maxProperties", None, path)
        # declared names: properties, then required names without a schema of their own
        members, forbidden = [], set()
        for name in list(props) + [r for r in required if r not in props]:
            sub = props.get(name)
            matching = [v for p, v in patterns.items() if _search(p, name, path)]
            if sub is None:
                sub = _all_of(matching) if matching else extra
            elif matching:
                sub = _all_of([sub, *matching])
            where = pointer(path, "properties", name)
            if names_schema is not True and not self.validates(name, names_schema if isinstance(names_schema, dict) else {"not": {}}):
                sub = False  # propertyNames forbids this name
            node = None
            if sub is not False:
                try:
                    node = self.node(sub, where)
                except _Empty:
                    node = None
            if node is None:
                if name in required:
                    raise _Empty(f"required property {name!r} at {at(path)} can have no value")
                forbidden.add(name)
                continue
            key = Lit(json.dumps(name, ensure_ascii=False))
            members.append((name, seq(key, self.colon, node), name in required))
        declared = [n for n, _, _ in members] + sorted(forbidden)
        extra_member = self.extra_member(extra, patterns, names_schema, declared, path)
        count_declared = len(members)
        required_count = len([m for m in members if m[2]])
        if most is not None and most < required_count:
            raise _Empty(f"maxProperties at {at(path)} is below the number of required properties")
        counted = (most is not None and most < count_declared) or (
            least > required_count and least != 1 and not (least == required_count + 1 and extra_member is not None and required_count == count_declared))
        if counted:  # "one of these keys" and the like: written per set of declared keys present
            body = self.counted_members(members, extra_member, least, most, path)
            return seq(Lit("{"), self.ws, body, self.ws, Lit("}"))
        if most is not None and extra_member is not None and most < count_declared + 1:
            extra_member = None  # at most `most` keys: undeclared ones would need counting
            self.narrow(pointer(path, "maxProperties"), "no undeclared keys")
        nonempty, extra_least = False, 0
        if least > required_count:
            if least == 1:
                nonempty = True
            else:
                extra_least = 1  # every declared key present is required: one more is undeclared
        slots = []
        extra_most = None if most is None else most - count_declared
        if extra_member is not None and extra_most is None and any(req for _, _, req in members):
            slots.append(Slot(extra_member, 0, None))  # undeclared keys before the declared ones ...
        slots += [Slot(m, 1 if req else 0, 1) for _, m, req in members]
        if extra_member is not None:
            slots.append(Slot(extra_member, extra_least, extra_most))  # ... and after them
        body = members_body(slots, self.comma, nonempty)
        if body == EMPTY and nonempty:
            raise _Empty(f"minProperties at {at(path)} allows no object")
        return seq(Lit("{"), self.ws, body, self.ws, Lit("}"))

    def counted_members(self, members: list[tuple[str, Node, bool]], extra: Node | None, least: int, most: int | None, path: str) -> Node:
        """Members of an object holding least..most keys: one form per set of optional declared
        keys present (the required ones always, schema order), undeclared keys after them making
        up the count. Refused past MAX_COUNTED_FORMS sets."""
        optional = [i for i, (_, _, req) in enumerate(members) if not req]
        required_count = len(members) - len(optional)
        forms = []
        for size in range(len(optional) + 1):
            present = required_count + size
            if most is not None and present > most:
                break
            if extra is None and present < least:
                continue
            for chosen in itertools.combinations(optional, size):
                if len(forms) == MAX_COUNTED_FORMS:
                    raise GrammarError(f"minProperties/maxProperties at {pointer(path, 'maxProperties' if most is not None else 'minProperties')}: "
                                       f"more than {MAX_COUNTED_FORMS} sets of declared keys to write; not expressible compactly")
                slots = [Slot(node, 1, 1) for i, (_, node, req) in enumerate(members) if req or i in chosen]
                if extra is not None:
                    slots.append(Slot(extra, max(0, least - present), None if most is None else most - present))
                forms.append(members_body(slots, self.comma, nonempty=least > 0))
        forms = [f for f in forms if f != EMPTY or least == 0]
        if not forms:
            raise _Empty(f"minProperties/maxProperties at {at(path)} allow no object")
        return alt(*forms)

    def extra_member(self, extra: Any, patterns: dict, names_schema: Any, declared: list[str], path: str) -> Node | None:
        """One undeclared `"key": value` member (keys never equal a declared name), or None."""
        if patterns:
            if extra is not False:
                self.narrow(pointer(path, "additionalProperties"), "undeclared keys must match a patternProperties key")
            options, emptied = [], []
            for pattern, sub in patterns.items():
                if any(_search(pattern, name, path) for name in declared):
                    self.narrow(pointer(path, "patternProperties", pattern), "pattern matches a declared name: not generated")
                    continue
                if names_schema is not True:
                    self.narrow(pointer(path, "propertyNames"), "no undeclared keys")
                    return None
                # a key may match several patterns: its value meets the schemas of every pattern
                # no key can be shown to miss (narrower where a key matches only some of them)
                others = [v for p, v in patterns.items() if p != pattern and not patterns_apart(p, pattern)]
                try:
                    key = Rx('"' + pattern_to_json_regex(pattern) + '"')
                    value = self.node(_all_of([sub, *others]), pointer(path, "patternProperties", pattern))
                except _Empty as exc:  # (a GrammarError, so before the ValueError below)
                    emptied.append(exc)
                    self.narrow(pointer(path, "patternProperties", pattern), "no value meets every pattern a key may match: not generated")
                    continue
                except ValueError as exc:
                    raise GrammarError(f"patternProperties key {pattern!r} at {pointer(path, 'patternProperties')} cannot be translated exactly: {exc}") from exc
                options.append(seq(key, self.colon, value))
            if emptied and not options:  # narrowed to no undeclared key at all: say so instead
                raise GrammarError(f"patternProperties at {pointer(path, 'patternProperties')}: keys matching several patterns "
                                   f"are not told apart, and no value meets all of them ({emptied[0]})")
            return alt(*options) if options else None
        if extra is False:
            return None
        try:
            if extra is True or extra == {}:  # free-form: bounded so the regex path serves it
                if not self.free_extras:
                    return None
                value = self.any_value(EXTRA_DEPTH)
                self.narrow(pointer(path, "additionalProperties"), f"undeclared keys hold values nested at most {EXTRA_DEPTH} deep")
            else:
                value = self.node(extra, pointer(path, "additionalProperties"))
        except _Empty:
            return None
        if names_schema is True:
            key = Rx(string_except(declared))
        else:
            key = self.key_node(names_schema, declared, path)
            if key is None:
                return None
        return seq(key, self.colon, value)

    def key_node(self, names_schema: Any, declared: list[str], path: str) -> Node | None:
        """Keys allowed by propertyNames that are no declared name (None: narrowed to none)."""
        where = pointer(path, "propertyNames")
        sub = self.deref(names_schema)
        if sub is False:
            return None
        sub = clean(sub, where, self.unknown) if isinstance(sub, dict) else {}
        values = enum_values(sub)
        if values is not None:
            keep = [v for v in values if isinstance(v, str) and v not in declared and self.validates(v, sub)]
            return alt(*(Lit(json.dumps(v, ensure_ascii=False)) for v in keep)) if keep else None
        if "type" in sub and "string" not in _types_of(sub["type"]):
            return None  # every name is a string: none is admitted (`type: string` over it admitted all)
        try:
            text = Grammar(self.node({**sub, "type": "string"}, where), self.defs).to_regex()
        except (RecursiveGrammar, _Empty):
            return None
        # keys spell every character one way (KEY_CHAR), so "not a declared name" is about text
        node = Rx(text.replace(STRING_CHAR, KEY_CHAR))
        regex = re.compile(node.pattern)
        if any(regex.fullmatch(json.dumps(n, ensure_ascii=False)) for n in declared):
            self.narrow(where, "propertyNames admits a declared name: no undeclared keys")
            return None
        return node


def _check_depth(schema: Any) -> Any:
    """`schema` unchanged, or GrammarError if its JSON nests deeper than MAX_DEPTH (iterative)."""
    todo = [(schema, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise GrammarError(f"json_schema is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            todo.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            todo.extend((v, depth + 1) for v in node)
    return schema


def _positional_body(nodes: list[Node], tail: Node | None, comma: Node, lo: int, hi: int | None) -> Node:
    """Array elements: position i uses nodes[i], later ones `tail`; lo..hi elements."""

    def rest(i: int) -> Node:  # elements i.. (each preceded by a comma), given i emitted
        if i >= len(nodes):
            if tail is None:
                return EMPTY
            more_hi = None if hi is None else hi - i
            return Rep(seq(comma, tail), max(0, lo - i), more_hi) if more_hi != 0 else EMPTY
        if hi is not None and i >= hi:
            return EMPTY
        element = seq(comma, nodes[i], rest(i + 1))
        return element if i < lo else opt(element)

    first = nodes[0] if nodes else tail
    if first is None or hi == 0:
        return EMPTY
    body = seq(first, rest(1))
    return opt(body) if lo == 0 else body


def _bounds(s: dict, path: str) -> tuple[int | None, int | None]:
    """Integer bounds implied by minimum/maximum/exclusive* (2020-12 spelling)."""
    lo = hi = None
    for key, is_lo, excl in (("minimum", True, False), ("exclusiveMinimum", True, True), ("maximum", False, False), ("exclusiveMaximum", False, True)):
        if key not in s:
            continue
        v = s[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GrammarError(f"{key} at {pointer(path, key)} must be a number")
        if is_lo:
            b = math.floor(v) + 1 if excl else math.ceil(v)
            lo = b if lo is None else max(lo, b)
        else:
            b = math.ceil(v) - 1 if excl else math.floor(v)
            hi = b if hi is None else min(hi, b)
    return lo, hi


def _decimal_places(m: float) -> int | None:
    """k when m == 10^-k (k >= 1), else None."""
    for k in range(1, 16):
        if abs(m * 10**k - 1) < 1e-9:
            return k
    return None


def _types_of(value: Any) -> list[str]:
    if value is None:
        return list(_TYPES)
    return [value] if isinstance(value, str) else list(value)


# keywords that constrain objects only: any other instance meets them
_OBJECT_ONLY = frozenset({"properties", "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
                          "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "unevaluatedProperties"})


def _possible_types(s: dict) -> set[str] | None:
    values = enum_values(s)
    if values is not None:
        return {("number" if _json_type(v) == "integer" else _json_type(v)) for v in values}
    if "type" not in s:
        return None
    return {("number" if x == "integer" else x) for x in _types_of(s["type"])}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "unknown")


# The kind of instance each keyword constrains (json_negation's table, with the keywords it does
# not negate): beside them a value of another kind is judged by `type` alone.
_KIND_OF_KEYWORD = {**APPLIES, "format": "string", "additionalItems": "array", "unevaluatedItems": "array",
                    "dependencies": "object", "unevaluatedProperties": "object"}
_VALIDATE_NOTHING = ANNOTATIONS | {"$comment"}  # (no draft's validator reads any of them)


def _type_verdict(value: Any, schema: Any) -> bool | None:
    """Whether `value` meets `schema` without jsonschema (imported with the rfc3987-syntax package
    beside it, it builds 38 Lark grammars: 1.1-2.6 s on a process's first enum beside a keyword).
    Answers `type`, annotations, keywords of another kind of instance than the value's, and a
    string's `pattern` (re.search), `minLength` and `maxLength` (code points), as jsonschema does.
    None where jsonschema must answer: any other keyword, `1.0` (an integer from draft 6 on, not
    in draft 4), a type name outside the seven, a pattern Python's re cannot read."""
    if not isinstance(schema, dict) or (isinstance(value, float) and value.is_integer()):
        return None
    kind = _json_type(value)
    own_kind = "number" if kind == "integer" else kind
    for keyword in schema:
        if keyword != "type" and keyword not in _VALIDATE_NOTHING and _KIND_OF_KEYWORD.get(keyword, own_kind) == own_kind:
            if kind != "string" or keyword not in ("pattern", "minLength", "maxLength"):
                return None
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        if not isinstance(types, list) or not all(isinstance(t, str) and t in _TYPES for t in types):
            return None  # (draft 3 allowed schemas in a type list)
        if not (kind in types or (kind == "integer" and "number" in types)):
            return False
    if kind != "string":
        return True
    for keyword, holds in (("minLength", lambda n: len(value) >= n), ("maxLength", lambda n: len(value) <= n)):
        if keyword in schema:
            bound = schema[keyword]
            if isinstance(bound, bool) or not isinstance(bound, int):
                return None
            if not holds(bound):
                return False
    if "pattern" in schema:
        if not isinstance(schema["pattern"], str):
            return None
        try:
            return re.search(schema["pattern"], value) is not None
        except re.error:
            return None
    return True


def _search(pattern: str, text: str, path: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error as exc:
        raise GrammarError(f"pattern {pattern!r} at {at(path)} is not a valid regex: {exc}") from exc


def _find_anchor(schema: Any, name: str) -> Any:
    """The subschema whose $anchor (or draft-4..7 id "#name") is `name`, in the root's own
    resource (subschemas with an `$id` of their own start another resource: not searched)."""
    todo, first = [schema], True
    while todo:
        node = todo.pop(0)
        if isinstance(node, dict):
            if not first and isinstance(node.get("$id"), str) and not node["$id"].startswith("#"):
                continue
            first = False
            if node.get("$anchor") == name or node.get("$id") == "#" + name or node.get("id") == "#" + name:
                return node
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return None


def _all_of(schemas: list[Any]) -> Any:
    """The schemas' conjunction, each distinct one once (a property's `$ref` that a matching
    pattern repeats, ANS's editions: merging a reference into a cycle with itself was refused)."""
    distinct: list[Any] = []
    for schema in schemas:
        if schema is not True and schema not in distinct:
            distinct.append(schema)
    return True if not distinct else distinct[0] if len(distinct) == 1 else {"allOf": distinct}


def _count(s: dict, key: str, default: int | None, path: str) -> int | None:
    value = s.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise GrammarError(f"{key} at {pointer(path, key)} must be a non-negative integer")
    return value


def schema_to_grammar(schema: Any, whitespace: str = "compact", strict: bool = False, closed_objects: bool = False,
                      unique_items: list[str] | None = None) -> Grammar:
    """Translate a JSON schema (dict / JSON string / pydantic class) to the grammar IR.

    strict: refuse unknown keywords instead of ignoring them. closed_objects: no object admits a
    key its schema does not declare (as if every object said `additionalProperties: false`).
    unique_items: a list to leave uniqueItems out (except small finite item domains, enumerated
    here) and append its JSON pointers, for the caller to enforce (unique_items.py); without it,
    uniqueItems arrays hold at most one item (a narrowing, logged)."""
    root = normalize_schema(schema)
    with deep_recursion():
        try:
            first = _Translator(root, whitespace, strict, closed_objects)
            first.unique_items = unique_items
            grammar = first.grammar(root)
            if closed_objects:
                return grammar
            if grammar.cyclic_names():
                # a recursive schema runs on the Lark path, where the undeclared-key terminals
                # make the lexer tables explode: close its objects (narrower, never wider)
                reason = "JSON schema is recursive"
            elif (size := regex_size(grammar.root, {}, grammar.defs)) > OPEN_OBJECTS_BUDGET:
                # free-form keys in every object multiply the DFA (dependabot: a 340,672-character
                # regex, 92 s and >20 GB to index; closed, 10,052 characters and 0.08 s)
                reason = f"with undeclared keys the regex would be {size:,} characters (budget {OPEN_OBJECTS_BUDGET:,})"
            else:
                return grammar
            logger.info("%s: keys that only an absent or `true` additionalProperties admits are not generated", reason)
            translator = _Translator(root, whitespace, strict, closed_objects)
            translator.free_extras = False
            translator.unique_items = unique_items
            return translator.grammar(root)
        except _Empty as exc:  # internal (lets anyOf drop a branch); users get a plain GrammarError
            raise GrammarError(f"the JSON schema allows no value: {exc}") from None
        except RecursionError:
            raise GrammarError("JSON schema is nested too deeply to compile") from None


class deep_recursion:
    """Raise the recursion limit while translating / writing a deeply nested grammar."""

    def __enter__(self) -> None:
        self.old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(self.old, _RECURSION_LIMIT))

    def __exit__(self, *exc: Any) -> None:
        sys.setrecursionlimit(self.old)


def json_value_grammar(whitespace: str = "compact", object_only: bool = True) -> Grammar:
    """Any JSON object (JSON-object mode) or any JSON value."""
    if not object_only:
        translator = _Translator({}, whitespace)
        return Grammar(translator.any_value(), translator.defs)
    docs = SchemaSet(whitespace)
    return docs.grammar(docs.any_json_object())


class SchemaSet:
    """Several independent schema documents translated into one grammar IR, e.g. the argument
    schemas of several tools plus a response schema. Each document's `$ref`s resolve inside that
    document (its definitions get their own names), and every document uses one whitespace mode.

        docs = SchemaSet()
        grammar = docs.grammar(alt(Lit("<a>"), docs.node(schema_a), docs.node(schema_b)))
    """

    def __init__(self, whitespace: str = "compact", closed_objects: bool = False) -> None:
        self._translator = _Translator({}, whitespace, closed_objects=closed_objects)
        self._count = 0

    def node(self, schema: Any, label: str = "") -> Node:
        """The IR node of one whole document (a dict, JSON string or pydantic class). `label`
        names it in error messages (e.g. "tools[0].parameters")."""
        root = normalize_schema(schema)
        self._count += 1
        t = self._translator
        t.root, t.document, t._validator, t._apart_memo, t._kinds_memo = root, f"doc{self._count}:", None, {}, {}
        try:
            with deep_recursion():
                return t.node(root, "")
        except RecursionError:
            raise GrammarError(f"{label + ': ' if label else ''}JSON schema is nested too deeply to compile") from None
        except GrammarError as exc:
            raise GrammarError(f"{label}: {exc}" if label else str(exc)) from None

    def any_json_object(self) -> Node:
        """Any JSON object (JSON-object mode)."""
        t = self._translator
        value = t.any_value()
        member = seq(Rx(f'"(?:{STRING_CHAR})*"'), t.colon, value)
        return seq(Lit("{"), t.ws, opt(seq(member, Rep(seq(t.comma, member), 0, None))), t.ws, Lit("}"))

    def grammar(self, root: Node) -> Grammar:
        return Grammar(root, dict(self._translator.defs))



_VACUOUS_WHEN_TRUE = frozenset({"additionalProperties", "additionalItems", "items", "propertyNames", "unevaluatedProperties", "unevaluatedItems"})


def _object_failures(part: dict) -> list[dict] | None:
    """The ways an object fails `part` when part says only type object, properties and required
    (other keys open): a required key absent, or a listed key present with a value failing its
    schema (a required listed key: absent or failing, i.e. optional with the negated schema).
    None where part says more, or fails in more than MAX_OBJECT_FAILURES ways."""
    if not set(part) <= {"type", "properties", "required"}:
        return None
    if "type" in part and _types_of(part["type"]) != ["object"]:
        return None
    props, required = part.get("properties", {}), part.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list) or not all(isinstance(k, str) for k in required):
        return None
    ways = []
    for name in dict.fromkeys([*required, *props]):
        sub = props.get(name, True)
        if name in required:
            ways.append({"properties": {name: False if sub is True else {"not": sub}}})
        elif sub is not True:
            ways.append({"properties": {name: {"not": sub}}, "required": [name]})
    return ways if len(ways) <= MAX_OBJECT_FAILURES else None


def _only_keywords_of(s: dict, kinds: tuple[str, ...]) -> bool:
    """Every keyword of `s` but `type` applies only to values of `kinds` (so none of them can
    constrain a value of another type)."""
    return all(k == "type" or APPLIES.get(k) in kinds for k in s)


def _required(schema: dict) -> list[str]:
    """The keys `schema` itself requires (a list of strings, else none)."""
    required = schema.get("required")
    return [k for k in required if isinstance(k, str)] if isinstance(required, list) else []


def _forbids_key(schema: dict, name: str, deref: Any = None) -> bool:
    """Conservative: no object with key `name` matches `schema` (its own keywords: the key's
    schema is `false`, the object is closed without declaring or patterning the key, or its
    propertyNames lists names without it; `deref` follows references there)."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    if name in properties and properties[name] is False:
        return True
    listed = listed_names(schema.get("propertyNames"), deref, FORMATS) if deref is not None and "propertyNames" in schema else None
    if listed is not None and name not in listed:
        return True
    if name in properties:
        return False
    if schema.get("additionalProperties") is not False:
        return False
    for pattern in schema.get("patternProperties") or {}:
        try:
            if re.search(pattern, name):
                return False
        except (re.error, TypeError):
            return False  # a pattern Python cannot read may match
    return True
