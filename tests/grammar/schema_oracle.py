"""The oracle of the JSON-schema differential tests, written independently of the compiler.

- `Oracle(schema).judge(data)`: is this output text a valid instance (strict JSON, no repeated
  declared key, `jsonschema`-valid with format checks), and is it in the canonical form the
  compiler promises to be able to write (`canonical_text`)?
- `canonical_text`: compact separators, integral numbers as integers, the properties the
  applicable schemas declare first (`properties` order, then `required` names not among them),
  then undeclared keys in instance order.
- `mutations`: invalid-looking variants of a valid value (dropped key, wrong type, out-of-range
  number, extra key, broken string, resized array) and of its text (duplicated key, edits).
- `random_tokenization`: a random split of the bytes into vocabulary tokens (not canonical BPE).
- `walk`: feeds token ids to a matcher, recording where EOS is allowed and which token (if any)
  was refused; `check_walk` compares that with the oracle at every token boundary.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import torch
from referencing.exceptions import Unresolvable

from constrained_spec.bitmask import new_bitmask
from constrained_spec.grammar.json_schema import ESCAPED_BOUNDED_STRING

_ORACLE_ERRORS = (jsonschema.exceptions.SchemaError, Unresolvable, RecursionError, ValueError, LookupError, re.error)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Object(dict):
    """A parsed JSON object that remembers which of its keys were repeated."""

    duplicated: frozenset[str] = frozenset()


@dataclass
class Parsed:
    last: Any  # duplicated keys: the last occurrence wins (Python's json)
    first: Any  # ... the first one wins
    duplicated: bool


def parse_strict(data: bytes) -> Parsed | None:
    """The JSON value of `data`, or None (not UTF-8, not JSON, NaN/Infinity)."""
    seen = [False]

    def last(items: list[tuple[str, Any]]) -> dict:
        out = _Object(items)
        if len(out) != len(items):
            keys = [k for k, _ in items]
            out.duplicated = frozenset(k for k in keys if keys.count(k) > 1)
            seen[0] = True
        return out

    def first(items: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for k, v in items:
            out.setdefault(k, v)
        return out

    try:
        text = data.decode("utf-8")
        return Parsed(json.loads(text, object_pairs_hook=last, parse_constant=_no_constant),
                      json.loads(text, object_pairs_hook=first, parse_constant=_no_constant), seen[0])
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


_EXACT_FORMATS = {"date", "time", "date-time", "ipv4", "ipv6", "uuid"}


def _formats(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = {schema["format"]} if isinstance(schema.get("format"), str) else set()
        return found.union(*(_formats(v) for k, v in schema.items() if k not in ("const", "enum", "default", "examples")))
    if isinstance(schema, list):
        return set().union(*(_formats(v) for v in schema))
    return set()


_CLASS_ESCAPE = re.compile(r"\\[dDwWbB]")


def _has_class_escape(schema: Any) -> bool:
    """Does some `pattern` or `patternProperties` regex use \\d, \\w or \\b (dialect-dependent)?"""
    if isinstance(schema, dict):
        regexes = [schema.get("pattern")] + list(schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else [])
        if any(isinstance(r, str) and _CLASS_ESCAPE.search(r) for r in regexes):
            return True
        return any(_has_class_escape(v) for k, v in schema.items() if k not in ("const", "enum", "default", "examples"))
    if isinstance(schema, list):
        return any(_has_class_escape(v) for v in schema)
    return False


def _ascii_classes(cls: type) -> type:
    """`cls` with `pattern` and `patternProperties` matched the ECMA-262 way for \\d, \\w, \\b (ASCII)."""

    def pattern(validator: Any, regex: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not re.search(regex, instance, re.ASCII):
            yield jsonschema.ValidationError(f"{instance!r} does not match {regex!r} (ASCII classes)")

    def pattern_properties(validator: Any, patterns: dict, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "object"):
            for regex, subschema in patterns.items():
                for key, value in instance.items():
                    if re.search(regex, key, re.ASCII):
                        yield from validator.descend(value, subschema, path=key, schema_path=regex)

    return jsonschema.validators.extend(cls, {"pattern": pattern, "patternProperties": pattern_properties})


def _exact_unique(cls: type) -> type:
    """`cls` with `uniqueItems` compared pairwise: jsonschema sorts the items first and compares
    neighbours, so `[[[0],"a"],[[false],"a"],[[0],"a"]]` (0 and false sort alike) passed as unique."""
    from jsonschema._utils import equal

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
        if unique and validator.is_type(instance, "array"):
            if any(equal(instance[i], instance[j]) for i in range(len(instance)) for j in range(i)):
                yield jsonschema.ValidationError(f"{instance!r} has non-unique elements")

    return jsonschema.validators.extend(cls, {"uniqueItems": unique_items})


def normalize_numbers(value: Any) -> Any:
    """Integral floats become ints (the compiler writes `1`, not `1.0`)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [normalize_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize_numbers(v) for k, v in value.items()}
    return value


def positional_text(value: Any) -> str:
    """Compact JSON of `value` in its own key order, floats written without an exponent."""
    positional: list[str] = []
    tag = f"\x00{os.urandom(8).hex()}."  # no value's string can be a marker by chance

    def marked(v: Any) -> Any:
        if isinstance(v, float) and "e" in repr(v):
            positional.append(format(Decimal(repr(v)), "f"))
            return f"{tag}{len(positional) - 1}"
        if isinstance(v, list):
            return [marked(x) for x in v]
        if isinstance(v, dict):
            return {k: marked(x) for k, x in v.items()}
        return v

    text = json.dumps(marked(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for i, number in enumerate(positional):
        text = text.replace(json.dumps(f"{tag}{i}", ensure_ascii=False), number)
    return text


@dataclass
class Verdict:
    valid: bool
    canonical: bool  # the text is exactly canonical_text(its value)


REMOTES = Path(__file__).parent.parent / "data" / "json_schema_test_suite" / "remotes"


@lru_cache(maxsize=1)
def suite_registry() -> Any:
    """The JSON-Schema-Test-Suite's remote documents at http://localhost:1234/, for jsonschema's own
    resolver (independent of ours; conftest.py registers the same files with register_schema)."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        ("http://localhost:1234/" + p.relative_to(REMOTES).as_posix(), Resource.from_contents(json.loads(p.read_text()), default_specification=DRAFT202012))
        for p in REMOTES.rglob("*.json"))


class Oracle:
    """jsonschema's verdict on output texts for one schema (default dialect: 2020-12).

    Duplicated keys: a key the object's own schema declares (`properties`, `required`) must not
    repeat (a grammar can exclude a finite set of names); an undeclared key of an open object may
    (no context-free grammar can keep an unbounded set of free keys apart), and then the text is
    valid only if it is valid whichever occurrence a reader keeps.

    Regex dialect: JSON Schema patterns are ECMA-262, where `\\d`, `\\w` and `\\b` are ASCII; jsonschema
    runs them with Python's `re`, where they are Unicode (`\\d` matches "২"). Soundness is judged
    by jsonschema (the wider reading, so an engine is never blamed for a text both dialects call
    valid); a text is claimed `canonical` (every engine must accept it) only if it is also valid
    with ASCII classes, the reading all engines share.

    Formats: jsonschema checks date, time, date-time, ipv4, ipv6 and uuid exactly, but `email`
    only for an "@" and `uri`/`hostname` not at all, while engines write a strict RFC subset. A
    schema using such a loosely checked format gets soundness checks only (`canonical` is never
    claimed for its texts)."""

    def __init__(self, schema: Any, generated: Any = None, soundness_only: bool = False) -> None:
        """`generated`: the narrower schema the compiler documents it generates (see
        `generation_schema`); a text counts as canonical (completeness is required) only if it is
        valid there too. Soundness is always judged against `schema`; with `soundness_only` (the
        compiler narrowed an overlapping oneOf) no text is claimed canonical."""
        cls = _exact_unique(jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator))
        self.schema = schema
        self.soundness_only = soundness_only
        registry = suite_registry()
        self.generated = None if generated is None else cls(generated, format_checker=cls.FORMAT_CHECKER, registry=registry)
        self.validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=registry)
        self.loose_formats = soundness_only or bool(_formats(schema) - _EXACT_FORMATS)
        self.ascii_validator = _ascii_classes(cls)(schema, format_checker=cls.FORMAT_CHECKER, registry=registry) if _has_class_escape(schema) else None
        self._cache: dict[bytes, Verdict] = {}

    def is_valid(self, value: Any, schema: Any = None) -> bool:
        validator = self.validator if schema is None else self.validator.evolve(schema=schema)
        try:
            return validator.is_valid(value)
        except _ORACLE_ERRORS:  # a schema jsonschema cannot evaluate: nothing counts as valid
            return False

    def _generates(self, value: Any) -> bool:
        try:
            return self.generated.is_valid(value)
        except _ORACLE_ERRORS:
            return False

    def _valid_with_ascii_classes(self, value: Any) -> bool:
        if self.ascii_validator is None:
            return True
        try:
            return self.ascii_validator.is_valid(value)
        except _ORACLE_ERRORS:
            return False

    def judge(self, data: bytes) -> Verdict:
        verdict = self._cache.get(data)
        if verdict is None:
            parsed = parse_strict(data)
            if parsed is None or (parsed.duplicated and self._repeats_declared(parsed.last, [self.schema])):
                verdict = Verdict(False, False)
            elif parsed.duplicated:
                verdict = Verdict(self.is_valid(parsed.last) and self.is_valid(parsed.first), False)
            else:
                valid = self.is_valid(parsed.last)
                try:
                    canonical = (valid and not self.loose_formats and self.canonical_text(parsed.last).encode() == data
                                 and self._valid_with_ascii_classes(parsed.last))
                    canonical = canonical and (self.generated is None or self._generates(parsed.last))
                except ValueError:  # 1e999 reads as infinity: valid JSON, no canonical form
                    canonical = False
                verdict = Verdict(valid, canonical)
            self._cache[data] = verdict
        return verdict

    def _repeats_declared(self, value: Any, schemas: list[Any]) -> bool:
        """Does some object repeat a key that its applicable schemas declare?"""
        if isinstance(value, dict):
            applicable = self._applicable(value, schemas)
            declared = {k for s in applicable for k in (*s.get("properties", {}), *s.get("required", [])) if isinstance(k, str)}
            if getattr(value, "duplicated", frozenset()) & declared:
                return True
            return any(self._repeats_declared(v, self._member_schemas(k, applicable)) for k, v in value.items())
        if isinstance(value, list):
            applicable = self._applicable(value, schemas)
            return any(self._repeats_declared(v, self._item_schemas(i, applicable)) for i, v in enumerate(value))
        return False

    # ---- canonical serialization -------------------------------------------------------------

    def canonical_text(self, value: Any) -> str:
        """Compact, keys in schema order, numbers positional: the compilers write bounded numbers
        without an exponent (README), where json.dumps writes 5.4e-94."""
        return positional_text(self._order(normalize_numbers(value), [self.schema]))

    def _resolve(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#") and seen < 50:
            target: Any = self.schema
            for part in schema["$ref"][1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                try:
                    target = target[int(part)] if isinstance(target, list) else target[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    return {}
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {"allOf": [target, rest]} if rest else target
            seen += 1
        return schema

    def _applicable(self, value: Any, schemas: list[Any]) -> list[dict]:
        """The (sub)schemas that apply to `value`, in schema order: $ref targets, allOf members,
        the first anyOf/oneOf branch that validates, if/then/else, dependentSchemas."""
        out: list[dict] = []
        todo = list(schemas)
        while todo and len(out) < 200:
            schema = self._resolve(todo.pop(0))
            if not isinstance(schema, dict):
                continue
            out.append(schema)
            more = list(schema.get("allOf", []))
            for key in ("anyOf", "oneOf"):
                branch = next((b for b in schema.get(key, []) if self.is_valid(value, b)), None)
                if branch is not None:
                    more.append(branch)
            if "if" in schema:
                more.append(schema.get("then" if self.is_valid(value, schema["if"]) else "else", True))
            if isinstance(value, dict):
                more += [s for k, s in schema.get("dependentSchemas", {}).items() if k in value]
            todo = more + todo
        return out

    def _order(self, value: Any, schemas: list[Any]) -> Any:
        if isinstance(value, dict):
            applicable = self._applicable(value, schemas)
            if any("$ref" in schema for schema in applicable):  # by $id or URL: we cannot say its order
                raise ValueError("a reference the oracle does not resolve: no canonical key order")
            for schema in applicable:  # a const/enum object is written in its own key order
                for option in [schema["const"]] if "const" in schema else schema.get("enum", []):
                    if isinstance(option, dict) and option == value:
                        return {k: self._order(value[k], []) for k in option}
            declared: list[str] = []
            for schema in applicable:  # `properties` order, then required names not among them
                props = schema.get("properties", {})
                declared += [k for k in props if isinstance(props, dict) and k not in declared]
            for schema in applicable:
                declared += [k for k in schema.get("required", []) if isinstance(k, str) and k not in declared]
            keys = [k for k in declared if k in value] + [k for k in value if k not in declared]
            return {k: self._order(value[k], self._member_schemas(k, applicable)) for k in keys}
        if isinstance(value, list):
            applicable = self._applicable(value, schemas)
            return [self._order(v, self._item_schemas(i, applicable)) for i, v in enumerate(value)]
        return value

    @staticmethod
    def _member_schemas(key: str, applicable: list[dict]) -> list[Any]:
        out = []
        for schema in applicable:
            props, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
            matched = [s for p, s in patterns.items() if isinstance(patterns, dict) and _search(p, key)]
            if isinstance(props, dict) and key in props:
                out.append(props[key])
            out += matched
            if not (isinstance(props, dict) and key in props) and not matched and "additionalProperties" in schema:
                out.append(schema["additionalProperties"])
        return out

    @staticmethod
    def _item_schemas(index: int, applicable: list[dict]) -> list[Any]:
        out = []
        for schema in applicable:
            prefix = schema.get("prefixItems", [])
            if isinstance(prefix, list) and index < len(prefix):
                out.append(prefix[index])
            elif "items" in schema:
                out.append(schema["items"])
        return out


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:  # an ECMA-only construct: only used to order keys, so no match is safe
        return False


# ---- mutations -------------------------------------------------------------------------------

_OTHER_TYPES = [None, True, 0, -7, 2.5, "", "x", [], [1], {}, {"k": 1}]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, path + (i,))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out = dict(value)
        out[head] = _replace(value[head], rest, new)
        return out
    out = list(value)
    out[head] = _replace(value[head], rest, new)
    return out


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


def _mutate_node(node: Any, rng: random.Random) -> list[Any]:
    """Variants of one node of a value (the rest of the value unchanged)."""
    out = [rng.choice([t for t in _OTHER_TYPES if type(t) is not type(node)])]  # wrong type
    if isinstance(node, dict):
        if node:
            drop = rng.choice(list(node))
            out.append({k: v for k, v in node.items() if k != drop})  # a (maybe required) key dropped
        out.append({**node, rng.choice(["zz_extra", "a", "id", "name"]): rng.choice([1, "v", None])})  # extra key
    elif isinstance(node, list):
        out.append(node + [rng.choice(node) if node else 1])
        out.append(node[:-1] if node else [None])
    elif isinstance(node, bool):
        out.append(not node)
    elif isinstance(node, (int, float)):
        out += [node + 1, node - 1, node * 1000 + 1, -node - 1, node + 0.5]
    elif isinstance(node, str):
        out += [node + rng.choice(["a", "Z", "0", "!", " ", "\u00e9"]), node[:-1], "", node * 3, "!" + node]
    return out


def mutations(value: Any, rng: random.Random, count: int) -> list[Any]:
    """Up to `count` variants of `value`, each changing one randomly chosen node."""
    paths = _paths(value)
    out = []
    for _ in range(count):
        path = rng.choice(paths)
        new = rng.choice(_mutate_node(_get(value, path), rng))
        if not (isinstance(new, float) and not math.isfinite(new)):  # 1e308 * 1000: not JSON
            out.append(_replace(value, path, new))
    return out


def _dumps_duplicating(value: Any, target: int, counter: list[int]) -> str:
    if isinstance(value, dict):
        members = [(k, v) for k, v in value.items()]
        index = counter[0]
        counter[0] += 1
        if index == target and members:
            members.append(members[0])
        body = ",".join(json.dumps(k, ensure_ascii=False) + ":" + _dumps_duplicating(v, target, counter) for k, v in members)
        return "{" + body + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dumps_duplicating(v, target, counter) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def dumps_escaping_keys(value: Any) -> str:
    """`value` as compact JSON with the first character of every key written as a `\\uXXXX`
    escape: the same value to a validator, an undeclared key to an engine reading raw text."""
    if isinstance(value, dict):
        def key(k: str) -> str:
            return json.dumps(k, ensure_ascii=False) if not k else '"\\u%04x' % ord(k[0]) + json.dumps(k[1:], ensure_ascii=False)[1:] if ord(k[0]) < 0x10000 else json.dumps(k, ensure_ascii=False)
        return "{" + ",".join(key(k) + ":" + dumps_escaping_keys(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps_escaping_keys(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def text_mutations(text: str, value: Any, rng: random.Random, count: int) -> list[str]:
    """Text-level variants: a duplicated key (if there is an object), single-character edits."""
    out = []
    objects = sum(1 for p in _paths(value) if isinstance(_get(value, p), dict) and _get(value, p))
    if objects:
        out.append(_dumps_duplicating(value, rng.randrange(objects), [0]))
    alphabet = '{}[]",:0123456789-.eE truefalsnl\\x'
    for _ in range(count):
        i = rng.randrange(len(text) + 1)
        edit = rng.randrange(3)
        if edit == 0 and i < len(text):
            out.append(text[:i] + text[i + 1 :])
        elif edit == 1:
            out.append(text[:i] + rng.choice(alphabet) + text[i:])
        elif i < len(text):
            out.append(text[:i] + rng.choice(alphabet) + text[i + 1 :])
    return out


# ---- tokenizations ---------------------------------------------------------------------------


class TokenIndex:
    """bytes -> token id for every non-special token of a vocabulary."""

    def __init__(self, vocab) -> None:
        self.vocab = vocab
        self.ids = {b: i for i, b in enumerate(vocab.token_bytes) if b is not None}
        self.max_len = max(len(b) for b in self.ids)

    def random_tokenization(self, data: bytes, rng: random.Random) -> list[int] | None:
        """A uniformly chosen token among those that match at each position (favours short,
        non-canonical pieces); None if some byte is in no token (the model cannot write it)."""
        out, i = [], 0
        while i < len(data):
            options = [self.ids[data[i : i + n]] for n in range(1, min(self.max_len, len(data) - i) + 1) if data[i : i + n] in self.ids]
            if not options:
                return None
            token = rng.choice(options)
            out.append(token)
            i += len(self.vocab.token_bytes[token])
        return out


# ---- walking a matcher -----------------------------------------------------------------------


@dataclass
class Walk:
    eos_at: list[tuple[int, bool]] = field(default_factory=list)  # (bytes consumed, EOS allowed)
    refused_at: int | None = None  # bytes consumed before the first refused token


def _bit(bitmask: torch.Tensor, token: int) -> bool:
    return bool((int(bitmask[0, token // 32]) >> (token % 32)) & 1)


def walk(compiled, ids: list[int], token_bytes, eos: int, check_mask: bool) -> Walk:
    """Feed `ids` one by one; at every boundary record whether EOS is allowed. With `check_mask`,
    the packed mask must agree with validate_tokens on the next token and on EOS."""
    m = compiled.matcher()
    result, consumed = Walk(), 0
    bitmask = new_bitmask(1, compiled.vocab_size) if check_mask else None
    for token in [*ids, None]:
        eos_ok = m.validate_tokens([eos]) == 1
        if eos_ok != m.is_accepting():
            raise AssertionError(f"validate_tokens([EOS]) = {eos_ok} but is_accepting() = {m.is_accepting()} after {consumed} bytes")
        result.eos_at.append((consumed, eos_ok))
        if token is None:
            break
        ok = m.validate_tokens([token]) == 1
        if check_mask:
            m.fill_bitmask(bitmask)
            if _bit(bitmask, eos) != eos_ok or _bit(bitmask, token) != ok:
                raise AssertionError(
                    f"mask disagrees with validate_tokens after {consumed} bytes: EOS bit {_bit(bitmask, eos)} vs {eos_ok}, "
                    f"token {token} ({token_bytes[token]!r}) bit {_bit(bitmask, token)} vs {ok}"
                )
        if not ok:
            result.refused_at = consumed
            break
        m.accept_token(token)
        consumed += len(token_bytes[token])
    return result


def check_walk(oracle: Oracle, data: bytes, result: Walk) -> list[str]:
    """Disagreements between the walk and the oracle (empty when the matcher is exact here)."""
    problems = []
    for consumed, eos_ok in result.eos_at:
        verdict = oracle.judge(data[:consumed])
        if eos_ok and not verdict.valid:
            problems.append(f"EOS allowed after {data[:consumed]!r}, which is not a valid instance")
        if not eos_ok and verdict.canonical:
            problems.append(f"EOS refused after {data[:consumed]!r}, a valid instance in canonical form")
    if result.refused_at is not None and oracle.judge(data).canonical:
        problems.append(f"valid canonical {data!r} refused after {data[: result.refused_at]!r}")
    return problems


SCALARS = {"type": ["null", "boolean", "number", "string"]}


# what long bounded strings and a pattern's `.` or negated class generate: no character needing an escape
NO_ESCAPES = '^[^"\\\\\x00-\x1f]*$'


def _members_keys(schema: dict, root: Any, depth: int = 0) -> tuple[set[str], set[str], bool] | None:
    """The keys an object node's anyOf/oneOf/allOf members declare (local `$ref`s followed):
    (names, patterns, whether some member takes any key through an additionalProperties schema);
    None for a node without such members."""
    members = [m for k in ("anyOf", "oneOf", "allOf") if isinstance(schema.get(k), list) for m in schema[k]]
    if not members:
        return None
    names: set[str] = set()
    patterns: set[str] = set()
    any_key = False
    for member in members:
        for _ in range(20):  # a chain of references
            ref = member.get("$ref") if isinstance(member, dict) else None
            if not (isinstance(ref, str) and ref.startswith("#/")):
                break
            member = root
            for part in ref[2:].split("/"):
                member = member.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(member, dict) else {}
        if not isinstance(member, dict):
            continue
        names |= {k for k in (*member.get("properties", {}), *member.get("required", [])) if isinstance(k, str)}
        patterns |= set(member.get("patternProperties", {})) if isinstance(member.get("patternProperties"), dict) else set()
        any_key |= member.get("additionalProperties", False) not in (False, True, {})
        inner = _members_keys(member, root, depth + 1) if depth < 20 else (set(), set(), True)
        if inner is not None:
            names, patterns, any_key = names | inner[0], patterns | inner[1], any_key or inner[2]
    return names, patterns, any_key


def generation_schema(schema: Any, closed_free: bool, root: Any = None) -> Any:
    """The part of `schema` the JSON-schema compiler documents that it generates (json_schema.py's
    docstring and its logged narrowings): where an object schema leaves `additionalProperties`
    open (absent, true or {}), undeclared keys hold scalar values, and none at all where the
    compiler closed free-form objects (`Grammar.free_extras` False: a recursive grammar, or one over
    the open-objects budget); with `patternProperties` the undeclared keys are the pattern
    keys that match no declared name; `propertyNames` or `maxProperties` next to open extras admit
    none. Strings bounded above ESCAPED_BOUNDED_STRING characters, and what a pattern's `.` or
    negated class matches, hold no character that needs an escape (`uniqueItems` is exact:
    unique_items.py).
    A node whose anyOf/oneOf/allOf members declare keys counts theirs as declared too (its own
    additionalProperties would see only its own `properties`, and close a union's object to `{}`).
    Narrower than the compiler where the two differ (e.g. allOf branches), never wider."""
    root = schema if root is None else root
    if isinstance(schema, list):
        return [generation_schema(s, closed_free, root) for s in schema]
    if not isinstance(schema, dict):
        return schema
    # (not inside `not` or `if`: narrowing a negated schema or a condition would widen the claim)
    out = {k: (v if k in ("const", "enum", "default", "examples", "not", "if") else generation_schema(v, closed_free, root))
           for k, v in schema.items()}
    for key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
        if isinstance(schema.get(key), dict):
            out[key] = {k: generation_schema(v, closed_free, root) for k, v in schema[key].items()}
    lengths = [v for v in (schema.get("minLength"), schema.get("maxLength")) if isinstance(v, int)]
    pattern = schema.get("pattern")
    wildcard = isinstance(pattern, str) and ("." in pattern.replace("\\.", "") or "[^" in pattern)
    if wildcard or lengths and max(lengths) > ESCAPED_BOUNDED_STRING and pattern is None and "format" not in schema:
        out["allOf"] = [*out.get("allOf", []), {"pattern": NO_ESCAPES}]
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    constrains = any(k not in ("$schema", "$id", "title", "description", "$comment") for k in schema)
    if not (types is None and constrains or isinstance(types, list) and "object" in types):
        return out
    declared = [k for k in (*schema.get("properties", {}), *schema.get("required", [])) if isinstance(k, str)]
    if isinstance(schema.get("patternProperties"), dict):
        out["additionalProperties"] = False
        out["patternProperties"] = {} if "propertyNames" in schema else {
            p: v for p, v in out["patternProperties"].items() if not any(re.search(p, n) for n in declared)}
    elif schema.get("additionalProperties", True) in (True, {}):
        closed = closed_free or "propertyNames" in schema or "maxProperties" in schema
        members = _members_keys(schema, root)
        if members is None:
            out["additionalProperties"] = False if closed else SCALARS
        elif not (closed and members[2]):  # (a member's additionalProperties schema takes any key: its own rule holds)
            keys = {"properties": {k: True for k in {*declared, *members[0]}}, "patternProperties": {p: True for p in members[1]},
                    "additionalProperties": False if closed else SCALARS}
            out["allOf"] = [*out.get("allOf", []), keys]
    return out


def engine_of(compiled: Any) -> Any:
    """The grammar under the JSON wrappers (unique_items.py, unique_keys.py, required_keys.py), if any."""
    from constrained_spec.grammar.required_keys import RequiredKeysGrammar
    from constrained_spec.grammar.unique_items import UniqueItemsGrammar
    from constrained_spec.grammar.unique_keys import UniqueKeysGrammar

    while isinstance(compiled, (UniqueItemsGrammar, UniqueKeysGrammar, RequiredKeysGrammar)):
        compiled = compiled.inner
    return compiled
