"""What the default backend hands llguidance for a JSON schema: `llguidance_schema(schema)`.

llguidance (`llguidance_backend.py`) compiles JSON schemas in milliseconds but reads some keywords
differently from validators (its own date and time formats), lacks others (`not`, `if`/`then`/
`else`, overlapping `oneOf`, `dependencies`, `uniqueItems`, `propertyNames`) and refuses some
shapes (a reference into a cycle beside other keywords, 2^n conditions). Each is rewritten here
into a schema llguidance reads as validators do, exactly or not at all: `None` sends the schema to
our compiler. The closed-objects option is applied here too. Every rewrite is checked against
`jsonschema` by the differential tests (tests/grammar/test_default_backend.py,
test_schema_differential.py).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import re
from typing import Any, Callable

from .json_key_sets import pattern_keys
from .json_refs import id_keywords
from .json_merge import ANNOTATIONS, STRUCTURAL, VALIDATION, at, discriminated_conditions, enum_values, listed_names, name_keywords, pointer, written_text
from .json_merge import DATA_KEYWORDS as _DATA, LEFT_OUT as _LEFT_OUT, NAME_MAPS, keywords_mapped as _schema_keys_mapped
from .json_negation import MAX_ONE_OF, complement
from .json_schema import _json_type  # noqa: PLC2701 (the compiler's own reading of a value's type)
from .json_subset import within
from .json_terminals import FORMAT_PATTERNS, NON_STRING_FORMATS
from .negative_literals import leading_lookaheads, literals_complement
from .json_shapes import schema_children
from .regular import anchors_inside, lookaround_free
from .protocol import GrammarError
from .vocabulary import Vocabulary

__all__ = ["llguidance_schema", "escapes_held_out", "without_unknown_metaschemas", "object_keywords_together", "NEGATION_NARROWED", "WIDE_NUMBER"]

# logged where an overlapping oneOf branch's "and not the others" keeps only the ways to fail
# them that can be written without `not`
NEGATION_NARROWED = "values that fail this schema only in ways not expressible without `not` (a reference, a pattern) are left out"


_METASCHEMAS = {f"http://json-schema.org/draft-0{n}/schema" for n in (3, 4, 6, 7)} | {
    f"https://json-schema.org/draft/{year}/schema" for year in ("2019-09", "2020-12")}


def _metaschema(uri: str) -> str | None:
    """A draft's URI as llguidance knows it (`https://json-schema.org/draft-07/schema#` is
    draft 7), or None for a URI that names no draft."""
    uri = uri.strip().rstrip("#")
    uri = re.sub(r"^https?://json-schema\.org/draft-", "http://json-schema.org/draft-", uri)
    uri = re.sub(r"^https?://json-schema\.org/draft/", "https://json-schema.org/draft/", uri)
    return uri + "#" if uri in _METASCHEMAS else None




def without_unknown_metaschemas(node: Any) -> Any:
    """`node` with every `$schema` spelled as llguidance knows it, or left out where it names
    no draft. llguidance tries to fetch a `$schema` URI it does not know (Snowplow's iglucentral
    URI, `https://` spellings of draft 7, `http://json-schema.org/schema#`) and refuses the
    schema. Without one it reads the schema as 2020-12, as Python's jsonschema does for a URI
    it does not know; the keywords read the same in every draft on both engines (items as an
    array, boolean exclusiveMinimum: json_merge.clean), only `$id` resolution depends on it.
    A `$schema` below the root is left out: we read a schema in its root's dialect (json_refs:
    `id` names a resource only under a draft 3/4 root, and bundling makes nested resources'
    references root pointers), while llguidance read a draft-04 subschema's `id` as the base of
    the root-relative `$ref`s inside it and refused them as missing resources. Likewise `$id`
    under a draft 3/4 root, an annotation there (json_refs.id_keywords) that llguidance read as
    a base URI (SchemaStore's cryproj: `$id` paths beside `$ref`s into the root's definitions)."""
    if not isinstance(node, dict):
        return node
    dropped = {"$schema"} | ({"$id"} if id_keywords(node) == ("id",) else set())
    mapped = _schema_keys_mapped(node, lambda key, value: _LEFT_OUT if key in dropped else value)
    dialect = node.get("$schema", _LEFT_OUT)
    if isinstance(dialect, str):
        dialect = _LEFT_OUT if _metaschema(dialect) is None else _metaschema(dialect)
    return mapped if dialect is _LEFT_OUT else {"$schema": dialect, **mapped}


_SPLITTING = frozenset({"$ref", "allOf", "anyOf", "oneOf"})


def object_keywords_together(node: Any) -> Any:
    """`node` with each schema object's `patternProperties` moved next to its
    `additionalProperties` where a `$ref`, allOf, anyOf or oneOf stands between them. llguidance
    1.9 reads an object's keywords in order and merges at each of those four, so the keywords
    before and after one became two schemas: with `additionalProperties` false before an allOf
    and patternProperties after it, the first closed the object to every key the patterns
    admit (`{"a":1}` refused under `^a$`); json_key_order appends the patterns it writes after
    such a keyword. Only the patterns move: their keys are written in any order, and the
    declared keys' order (llguidance's, from `properties` and the merged parts) stays."""
    return _schema_keys_mapped(node, lambda key, value: value, after=_patterns_beside_additional)


def _patterns_beside_additional(node: dict) -> dict:
    keys = list(node)
    if "additionalProperties" in node and "patternProperties" in node:
        first, last = sorted((keys.index("additionalProperties"), keys.index("patternProperties")))
        if _SPLITTING.intersection(keys[first + 1: last]):
            keys.insert(first + 1, keys.pop(last))
            return {key: node[key] for key in keys}
    return node


def _bare(node: Any) -> str:
    """A schema's text without annotations (title, description, ...): equal texts, equal schemas."""
    return written_text(_schema_keys_mapped(node, lambda k, v: _LEFT_OUT if k in ANNOTATIONS else v))


_LOOKAROUND = re.compile(r"(?<!\\)\(\?<?[=!]|(?<!\\)\(\?<[A-Za-z_]")  # lookarounds, and ECMA's named groups


def _without_lookarounds(pattern: str) -> str:
    """A pattern with lookarounds, a `$` or `^` inside it (`(,|$)`, `(^|,)`) or ECMA's `(?<name>`,
    which llguidance's parser refuses, as one regex without them (regular.py, the reading both ECMA
    and Python accept); as it was where that cannot be written (llguidance then refuses it, and
    our compiler says why), or where no string matches it (a pattern key nothing matches: left
    to our compiler too)."""
    if not _LOOKAROUND.search(pattern) and ("$" not in pattern and "^" not in pattern[1:] or not anchors_inside(pattern)):
        return pattern
    try:
        return lookaround_free(pattern) or pattern
    except ValueError:
        return pattern


_CLASS = re.compile(r"\[\^\]?(?:\\.|[^\]\\])*\]")  # a negated class: [^ ... ] (escapes and a leading ] inside)
_CONTROLS = "".join(chr(c) for c in range(0x20))


def escapes_held_out(schema: Any) -> Any:
    """The schema with each pattern and patternProperties key rewritten so that llguidance
    cannot read an escape into a negated class that excludes it: llguidance 1.9 lets `\\"` and
    `\\\\` through `[^"]` and `[^\\\\]` (a quote or backslash where the pattern forbids one:
    invalid output) wherever the class admits a control character. Such a class is narrowed to
    exclude controls too (llguidance then reads no escape into it). A copy where anything
    changes (the caller's schema is left as it was); None where a class could not be rewritten."""
    changed = _rewrite_classes(schema, apply=False)
    if changed is None or not changed:
        return None if changed is None else schema
    schema = copy.deepcopy(schema)
    _rewrite_classes(schema, apply=True)
    return schema


def _rewrite_classes(schema: Any, apply: bool) -> bool | None:
    """Whether some pattern changes (None: one cannot be rewritten); with `apply`, in place."""
    todo, changed = [("", schema)], False
    while todo:
        path, node = todo.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("pattern"), str):
            fixed = _controls_excluded(node["pattern"])
            if fixed is None:
                return None
            changed |= fixed != node["pattern"]
            if apply:
                node["pattern"] = fixed
        if isinstance(node.get("patternProperties"), dict):
            fixed_keys = {}
            for key, sub in node["patternProperties"].items():
                fixed = _controls_excluded(key)
                if fixed is None or fixed in fixed_keys:
                    return None
                changed |= fixed != key
                fixed_keys[fixed] = sub
            if apply:
                node["patternProperties"] = fixed_keys
        todo += schema_children(node, path)
    return changed


def _controls_excluded(pattern: str) -> str | None:
    """`pattern` with every negated class that excludes `"` or `\\` (and admits a control
    character) excluding control characters as well. A class Python cannot read (ECMA's or
    Rust's `\\p{L}`) is narrowed so wherever it names a quote or backslash at all. None where a
    narrowed class would still admit a control character."""

    def narrowed(found: re.Match) -> str:
        text = found.group(0)
        lead = 3 if text.startswith("[^]") else 2
        out = text[:lead] + "\\x00-\\x1f" + text[lead:]
        try:
            cls = re.compile(text)
        except re.error:
            return out if _NAMES_QUOTE_OR_BACKSLASH.search(text) else text
        if cls.fullmatch('"') and cls.fullmatch("\\") or not any(cls.fullmatch(c) for c in _CONTROLS):
            return text
        if any(re.fullmatch(out, c) for c in _CONTROLS):
            raise ValueError(text)
        return out

    if "[^" not in pattern:
        return pattern
    try:
        return _CLASS.sub(narrowed, pattern)
    except (ValueError, re.error):
        return None


_NAMES_QUOTE_OR_BACKSLASH = re.compile(r'"|\\\\|\\x(?:22|5[cC])|\\u(?:0022|005[cC])|\\u\{(?:22|5[cC])\}')


MAX_LISTED_PATTERN_KEYS = 64


def _listed_patterns_as_properties(node: dict) -> None:
    """patternProperties that list their keys (`^(?:nbt|team)$`) and share one with another
    pattern, as declared properties: llguidance refuses patterns that are not disjoint (`.*` and
    `^_execute_browser_action$`), and a declared property must also meet every pattern matching
    its name, as llguidance applies them (the same instances: a listed key present meets the
    listed pattern's schema, its own declared one if any, and the remaining patterns'). Disjoint
    ones stay patterns: their keys may come in any order, declared ones only in declared order."""
    props, patterns = node.get("properties", {}), node.get("patternProperties")
    if not isinstance(patterns, dict) or len(patterns) < 2 or not isinstance(props, dict):
        return
    listed = {}
    for pattern in patterns:
        finite, keys = pattern_keys(pattern)
        if finite and keys is not None and 0 < len(keys) <= MAX_LISTED_PATTERN_KEYS:
            listed[pattern] = keys

    def shared(pattern: str) -> bool:  # a key of this listed pattern that another pattern matches
        for other in patterns:
            if other == pattern:
                continue
            try:
                found = re.compile(other)
            except re.error:
                return True  # unreadable here: moved (exact either way)
            if any(found.search(key) for key in listed[pattern]):
                return True
        return False

    moving = [pattern for pattern in listed if shared(pattern)]
    if not moving:
        return
    moved: dict[str, list[Any]] = {}
    for pattern in moving:
        for key in sorted(listed[pattern]):
            moved.setdefault(key, [props[key]] if key in props else []).append(patterns[pattern])
    node["properties"] = {**props, **{key: parts[0] if len(parts) == 1 else {"allOf": parts} for key, parts in moved.items()}}
    kept = {pattern: sub for pattern, sub in patterns.items() if pattern not in moving}
    if kept:
        node["patternProperties"] = kept
    else:
        del node["patternProperties"]


def _pattern_twins_as_true(node: dict) -> None:
    """A declared property whose schema is that of a patternProperties entry matching its name
    (ANS: `by` and `^[a-zA-Z0-9_]*`, both "authors or references") must meet it twice; as `true`
    it meets it once, the same. llguidance intersects the two and refuses that where they
    reference a cycle ("circular references with sibling keys")."""
    props, patterns = node.get("properties"), node.get("patternProperties")
    if not isinstance(props, dict) or not isinstance(patterns, dict):
        return
    try:
        compiled = [(re.compile(pattern), _bare(other)) for pattern, other in patterns.items()]
    except re.error:
        return
    twins = {}
    required = node.get("required") if isinstance(node.get("required"), list) else []
    for name, sub in props.items():
        if sub is True or not name.isascii():  # ASCII: where Python's re and the schema's ECMA regex surely agree
            continue
        matching = {text for pattern, text in compiled if pattern.search(name)}
        if matching and _bare(sub) in matching:
            twins[name] = True
    if twins:
        # an optional twin is left out: the pattern writes it alone, among the patterned keys
        # (declared, it kept the keys declared before it in schema order: proxies' documented
        # `response.headers.<HeaderName>` beside `^response\.headers\..+$`)
        plain = {name for name in twins if name not in required and name.isprintable() and not set(name) & set('"\\')}
        node["properties"] = {k: twins.get(k, v) for k, v in props.items() if k not in plain}


# patterns that match every key (a pattern matches where it is found, anywhere in the key)
_MATCH_ALL = frozenset({"", ".*", "^.*", ".*$", "(.*)", "^(.*)"})


def _subsumed_names_skipped(node: dict, deref: Callable[[Any], Any]) -> None:
    """A declared property that a pattern matching every key also constrains must meet both;
    where its own schema lies within the pattern's (json_subset.within), the pattern may skip
    its name: the same instances, and no intersection for llguidance to build, which it refuses
    around a cycle (ANS's related_content: `redirect`, arrays of redirects, and `.*`, arrays of
    content, references or embeds, where content admits a redirect)."""
    props, patterns = node.get("properties"), node.get("patternProperties")
    if not isinstance(props, dict) or not isinstance(patterns, dict):
        return
    for pattern, schema in list(patterns.items()):
        if pattern not in _MATCH_ALL:
            continue
        skipped = [name for name, sub in props.items() if name.isascii() and name.isprintable() and within(sub, schema, deref)]
        replacement = literals_complement([(name, True) for name in skipped]) if skipped else None
        if replacement is not None and replacement not in patterns:
            patterns = {replacement if k == pattern else k: v for k, v in patterns.items()}
    node["patternProperties"] = patterns


_SCALAR_TYPES = {"string", "number", "integer", "boolean", "null"}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _subsumed_values_dropped(options: list) -> list:
    """anyOf branches that only list values (`enum`, `const`) which another branch, a bare scalar
    type, admits anyway, left out: the same instances. Editor schemas suggest values that way
    (`{"anyOf": [{"enum": ["auto", "none"]}, {"type": "string"}]}`); llguidance then lexes the
    two alternatives at once and walks the whole token trie for the string's first mask (~300 us
    instead of ~10 us)."""
    wide = []  # (types, shortest string, longest string) of the branches that are scalar types
    for option in options:
        keywords = {k: v for k, v in option.items() if k in VALIDATION} if isinstance(option, dict) else {}
        named = _type_set(keywords.get("type"))
        low, high = keywords.get("minLength", 0), keywords.get("maxLength", math.inf)
        if (named is not None and named <= _SCALAR_TYPES and set(keywords) <= {"type", "minLength", "maxLength"}
                and _is_count(low) and (high == math.inf or _is_count(high))):
            wide.append((named, low, high))
    if not wide:
        return options

    def admits(value: Any, kinds: set[str], low: int, high: float) -> bool:
        # 1.0 is an integer from draft 6 on, not in draft 4: kept where only `integer` would admit it
        if _json_type(value) not in kinds or (isinstance(value, float) and "number" not in kinds):
            return False
        return not isinstance(value, str) or low <= len(value) <= high  # lengths in code points, as Python's

    def admitted(option: Any) -> bool:
        if not isinstance(option, dict) or not set(option) & {"enum", "const"}:
            return False
        if set(k for k in option if k in VALIDATION) - {"enum", "const", "type"}:
            return False
        values = enum_values(option)
        return values is not None and all(any(admits(v, *w) for w in wide) for v in values)

    kept = [option for option in options if not admitted(option)]
    return kept if kept else options


# keywords whose value is one schema, a list of schemas, or a name -> schema map
_ONE = ("additionalProperties", "items", "additionalItems", "propertyNames", "unevaluatedItems")
_LIST = ("anyOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions")
# Closing a schema one node at a time is a narrowing only where schemas are neither merged
# (allOf, $ref or anyOf next to object keywords) nor negated: under `not`, `oneOf` ("not two"),
# `contains` with maxContains, or a condition, a narrower part makes a wider whole.
_UNSAFE = {"allOf", "oneOf", "not", "contains", "if", "then", "else", "dependencies", "dependentSchemas",
           "dependentRequired", "unevaluatedProperties", "$dynamicRef", "$recursiveRef"}
_QUIET = ANNOTATIONS | STRUCTURAL  # keywords that constrain nothing
_ROOT_ONLY = ("$defs", "definitions", "$schema", "$id", "id")  # left out where the root schema is inlined
_OBJECT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "patternProperties",
                    "propertyNames", "minProperties", "maxProperties", "enum", "const"}


# Schema nodes one rewrite may visit: the largest real schemas take up to 23,000 (SchemaStore's
# yippee-ki, vega, vector, jfrog-pipelines: under 0.5 s); an overlapping oneOf of open objects
# through a cycle took 876,000 in 90 s (each "branch i and no other" holds the negated cycle,
# rewritten again). Past this the caller leaves the schema to our compiler.
MAX_REWRITE_NODES = 60_000


class RewriteTooLarge(GrammarError):
    """The rewrite for llguidance visited more than MAX_REWRITE_NODES schema nodes."""


# Formats go to llguidance as our patterns (json_terminals.FORMAT_PATTERNS), each a subset of
# what format checkers accept: llguidance's own date/time admit 2023-02-29 and 23:59:60, which
# checkers refuse, and it refuses formats it does not know (byte, regex, json-pointer, ...).
# A format neither knows constrains nothing (as for our compiler) and is left out.
def llguidance_schema(schema: Any, closed_objects: bool, ignored: dict[str, str] | None = None,
                      narrowed: dict[str, str] | None = None, exact_unique: bool = True,
                      unique_items: list[str] | None = None, vocab: Vocabulary | None = None) -> Any | None:
    """`schema` as the default backend hands it to llguidance, or None where our compiler must
    take it. Changed: formats become our patterns (next to a pattern of the schema's own, in an
    allOf: both hold), formats neither engine knows are left out; with closed_objects, every
    object schema that says nothing of undeclared keys gets `additionalProperties: false` (what
    closed_objects means for our compiler). None: a format under oneOf/not/contains/a condition
    (a narrower pattern there makes a wider whole); closing where one node at a time could widen
    or empty the language (_UNSAFE, a required key that is not declared); a fractional multipleOf
    other than 10^-k (_decimal_reading_agrees). Whatever a returned schema admits, `schema`
    admits. ignored: filled with keyword -> JSON pointer for keywords that constrain nothing
    (llguidance ignores them too).

    What llguidance refuses, rewritten as our compiler reads it: a oneOf whose branches are
    disjoint (json_schema's check: types, enums, a const discriminator) is an anyOf. uniqueItems
    is left out and its JSON pointer appended to `unique_items`, for the caller to enforce it
    exactly (unique_items.py); without that list it becomes maxItems 1 (one item is always
    unique: our compiler's narrowing, listed in `narrowed`). Over a small finite item domain
    (exact_unique) and under a negation it is left to our compiler. A pattern under a maxLength
    over PROBED_LENGTH that llguidance's lexer cannot take with `vocab` (given) gets that bound,
    listed in `narrowed`. Raises RewriteTooLarge past MAX_REWRITE_NODES visited nodes."""
    if isinstance(schema, bool):
        return schema
    from .json_schema import _Translator  # noqa: PLC0415 (the rewrite asks the compiler's own checks)

    unsafe = False
    visits = 0  # rewrite calls so far (MAX_REWRITE_NODES)
    known = VALIDATION | STRUCTURAL | ANNOTATIONS
    checks = _Translator(schema, "compact")
    evaluating = "unevaluatedProperties" in json.dumps(schema)  # a declared key counts as evaluated there
    counted = _counted_objects(schema)  # llguidance takes their counts only with every declared key required

    def disjoint(options: list, siblings: dict) -> bool:
        try:
            return checks.disjoint(options, siblings)
        except (GrammarError, RecursionError):
            return False

    def objects_apart(options: list, siblings: dict) -> bool:
        """A oneOf where two branches or more constrain objects alone (every non-object meets
        them, so none is in exactly one) and the branches are disjoint on objects: the node's
        objects in exactly one branch (enonic-xp's input kinds, told apart by a `type` property)."""
        kinds = siblings.get("type")
        if kinds is not None and kinds != "object" and not (isinstance(kinds, list) and "object" in kinds):
            return False
        try:
            return (sum(checks.objects_only(o) for o in options) >= 2
                    and checks.disjoint(options, {**siblings, "type": "object"}))
        except (GrammarError, RecursionError):
            return False

    def negation(negated: Any, context: dict, narrowing: bool = False, path: str = "", partial: bool = False) -> Any:
        """`not negated` next to `context`, as a schema without `not`, or None. Where the
        result may be narrower (`narrowing`: it is used positively, not under a negation), the
        ways it holds only through `contains` (which llguidance lacks: "an array holding an
        item that fails `items`") are left out and listed in `narrowed`; with `partial` (an
        overlapping oneOf's "and not the others", as our compiler narrows it) so are ways to fail
        that cannot be written exactly (deep in a cycle, a pattern's complement), where others can."""
        resolve = lambda ref: checks.resolve(ref, "")  # noqa: E731
        found = complement(negated, context, resolve)
        if found is None and narrowing and partial:
            found = complement(negated, context, resolve, partial=True)
            if found is False:  # nothing left: refused rather than admitting nothing
                return None
            if narrowed is not None:
                narrowed.setdefault(at(path), NEGATION_NARROWED)
        if not narrowing or found is None or not _holds(found, "contains"):
            return found
        narrower = _without_contains(found)
        if narrower is not None and narrowed is not None:
            narrowed.setdefault(at(path), "a negation's ways through an array item (`contains`) left out")
        return narrower

    def arrays_apart(option: Any, other: Any) -> dict | None:
        """Where `option` and `other` are arrays only, of items proven apart, they share at most
        `[]`: "option and not other" is option itself where `other` needs an item (minItems),
        option's non-empty arrays where `other` admits `[]`; None where that is not known.
        (GeoJSON's coordinates, numbers or arrays of numbers: "not other" by its ways to fail
        needs `contains`, which llguidance lacks, and both branches were narrowed to nothing.)"""
        a, b = checks.deref(option), checks.deref(other)
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(b) - _QUIET - {"type", "items", "minItems", "maxItems", "uniqueItems"}:
            return None
        items_a, items_b = checks.deref(a.get("items", True)), checks.deref(b.get("items", True))
        try:
            apart = (checks.kinds(a) == {"array"} and checks.kinds(b) == {"array"} and isinstance(a.get("items"), dict)
                     and "prefixItems" not in a and isinstance(items_a, dict) and isinstance(items_b, dict) and checks.apart(items_a, items_b))
        except (GrammarError, RecursionError):
            return None
        least = b.get("minItems", 0)
        return None if not apart or not isinstance(least, int) else {} if least >= 1 else {"minItems": 1}

    def exclusive(options: list, siblings: dict, narrowing: bool, path: str) -> list | None:
        """Overlapping oneOf branches as disjoint ones: B_i and not B_j for every j != i that
        may meet B_i (a pair proven apart needs no negation: one overlapping pair of five
        branches negated every branch, and llguidance found the result too large)."""
        if len(options) > MAX_ONE_OF:
            return None
        branches = []
        for i, option in enumerate(options):
            context = checks.deref(option) if isinstance(option, dict) else {}
            context = {**({"type": siblings["type"]} if "type" in siblings else {}), **(context if isinstance(context, dict) else {})}
            others = []  # "and not B_j", for each j whose branch may meet this one
            for j, other in enumerate(options):
                if j == i or disjoint([option, other], siblings):
                    continue
                apart = arrays_apart(option, other)
                others.append(apart if apart is not None else negation(other, context, narrowing, pointer(path, "oneOf", j), partial=True))
            if any(o is None for o in others):
                return None
            branches.append({"allOf": [option, *(o for o in others if o != {})]})
        return branches

    def one_key_each(options: list, siblings: dict, negated: bool, path: str) -> list | None:
        """A oneOf whose branches each require a key of their own and say nothing else (helm's
        test-suite assertions, 26 kinds: `{"properties": {"equal": S}, "required": ["equal"]}`):
        branch i holds where k_i is present and meets S_i, so "this one and no other" is k_i
        meeting S_i and every other k_j absent or failing S_j. One object per branch, each
        `not S_j` written once as a definition: negated whole, pairwise, the 650 negations made a
        628 KB schema llguidance found too large. Where `not S_j` cannot be written, k_j is
        absent (a narrowing, listed). Objects only: a non-object meets every branch (or, each
        saying `type: object`, none). None where the branches are not of that form, or under a
        negation where a `not S_j` cannot be written (narrower there is wider)."""
        keys, values, typed = [], [], set()
        for option in options:
            shape = checks.deref(option)
            if not isinstance(shape, dict) or set(shape) - _QUIET - {"properties", "required", "type"}:
                return None
            props = shape.get("properties")
            if not isinstance(props, dict) or len(props) != 1 or shape.get("required") != list(props) or shape.get("type", "object") != "object":
                return None
            (key, value), = props.items()
            if key in keys:
                return None
            keys.append(key)
            values.append(value)
            typed.add("type" in shape)
        if len(typed) != 1 and siblings.get("type") != "object":
            return None  # a non-object meets the untyped branches alone: exactly one where one is untyped
        against = []
        for j, value in enumerate(values):
            where = pointer(path, "oneOf", j, "properties", keys[j])
            negative = negation(value, {}, not negated, where, partial=True)
            if negative is None and negated:
                return None
            if negative is None:  # (a reference into a cycle: component_spec's predicates) the key absent
                negative = False
                if narrowed is not None:
                    narrowed.setdefault(at(where), "beside another kind's key, this key only absent (its schema's complement is not expressible)")
            if isinstance(negative, dict):
                name = f"constrained_spec_not{len(merged_defs)}"
                merged_defs[name] = True  # taken before the rewrite, which may add definitions
                merged_defs[name] = rewrite(negative, where, negated)
                negative = {"$ref": f"#/$defs/{name}"}
            against.append(negative)
        return [{"type": "object", "required": [key], "properties": {k: values[i] if j == i else against[j] for j, k in enumerate(keys)}}
                for i, key in enumerate(keys)]

    inlining: set[str] = set()
    merged_defs: dict[str, Any] = {}  # name -> a cyclic reference merged with its siblings, rewritten; a branch's complement
    merged_names: dict[tuple, str] = {}

    direct: dict[str, set[str]] = {}  # reference -> the references its target applies (not its definitions)
    cyclic_refs: dict[str, bool] = {}

    def direct_refs(ref: str) -> set[str]:
        if ref not in direct:
            found: set[str] = set()
            try:
                stack = [checks.resolve(ref, "")]
            except (GrammarError, RecursionError):
                stack = []
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    if isinstance(node.get("$ref"), str):
                        found.add(node["$ref"])
                    stack += [v for k, v in node.items() if k not in _DATA and k not in ("$defs", "definitions")]
                elif isinstance(node, list):
                    stack += node
            direct[ref] = found
        return direct[ref]

    def cyclic(ref: str) -> bool:
        """Whether the schema `ref` points to applies, through references, `ref` again."""
        if ref not in cyclic_refs:
            seen, todo = set(), list(direct_refs(ref))
            while todo and ref not in seen:
                inner = todo.pop()
                if inner not in seen:
                    seen.add(inner)
                    todo += direct_refs(inner)
            cyclic_refs[ref] = ref in seen
        return cyclic_refs[ref]

    def merged_cycle(ref: str, target: Any, siblings: dict, path: str, negated: bool, keep_open: bool) -> dict | None:
        """`{"$ref": ref, **siblings}` where `ref` leads back into itself (minecraft's
        `{"$ref": numberProvider, "type": ["number", "object"]}` inside numberProvider): llguidance
        refuses a reference into a cycle beside other keywords, and inlining it again never ends
        (or, done once per place, multiplies: renovate's 100 managers, each `{"$ref": "#", "type":
        "object"}`, made 40,000 references). It becomes a reference to a new definition, the
        target's content and the siblings in an allOf, one per (reference, siblings): the same
        pair inside it refers back to it."""
        key = (ref, written_text(siblings), negated, keep_open)
        if key not in merged_names:
            if not isinstance(target, dict):
                return None
            name = merged_names[key] = f"constrained_spec_merged{len(merged_names)}"
            merged_defs[name] = rewrite({"allOf": [target, siblings]}, path, negated, keep_open)
        return {"$ref": f"#/$defs/{merged_names[key]}"}

    def inlined(ref: str) -> Any:
        """The schema `ref` names, to be written in another place (the root without its id and
        definitions, which stay at the root); _LEFT_OUT where it does not resolve."""
        try:
            target = checks.resolve(ref, "")
        except (GrammarError, RecursionError):
            return _LEFT_OUT
        return {k: v for k, v in target.items() if k not in _ROOT_ONLY} if target is schema and isinstance(target, dict) else target

    def merged_ref(node: Any, path: str, negated: bool, keep_open: bool = False, context: Callable[[], dict] | None = None) -> Any:
        """An allOf member; a `$ref` there is its target, one level inlined: llguidance merges
        allOf members and cannot merge a reference into a cycle ("circular references with
        sibling keys"); the target's own references stay references. `context`: part_context's."""
        ref = node.get("$ref") if isinstance(node, dict) and not set(node) - {"$ref"} - _QUIET else None
        if not isinstance(ref, str) or ref in inlining:
            return rewrite(node, path, negated, keep_open, context)
        target = inlined(ref)
        if target is _LEFT_OUT:
            return rewrite(node, path, negated, keep_open, context)
        inlining.add(ref)
        try:
            return rewrite(target, path, negated, keep_open, context)
        finally:
            inlining.discard(ref)

    def finite_items(node: dict, path: str) -> bool:
        """Items over a small finite domain that our compiler enumerates, where the wrapper on
        top could meet a dead end: not scalar enums (at a `,` the wrapper knows when all their
        values are used), which stay on llguidance (our compiler takes 20-50 s on schemas as
        large as asconfig's)."""
        items = checks.deref(node.get("items", True))
        values = enum_values(items) if isinstance(items, dict) and set(items) - _QUIET <= {"enum", "const", "type"} else None
        if values is not None and not any(isinstance(v, (dict, list)) for v in values):
            return False
        try:
            return "prefixItems" not in node and checks.unique_arrays(node.get("items", True), 0, None, path) is not None
        except (GrammarError, RecursionError):
            return True  # let our compiler say what is wrong

    def implied_type(node: dict) -> bool:
        """Whether the `type` beside an anyOf/oneOf of references says nothing its branches do
        not (ANS: `{"type": "object", "anyOf": [{"$ref": author}, {"$ref": reference}]}`):
        llguidance refuses a reference into a cycle with sibling keywords."""
        kinds = node.get("type")
        options = [o for k in ("anyOf", "oneOf") if isinstance(node.get(k), list) for o in node[k]]
        if kinds is None or not any(isinstance(o, dict) and "$ref" in o for o in options):
            return False
        named = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else None
        if not named or "integer" in named and "number" not in named:  # checks.kinds counts integers as numbers
            return False
        try:
            within = checks.kinds({"type": kinds})
            return all((found := checks.kinds(o)) is not None and found <= within for o in options)
        except (GrammarError, RecursionError):
            return False

    def no_value(node: dict) -> bool:
        """Whether no value meets `node` by the compiler's type reading (unsure: False)."""
        try:
            return checks.kinds(node) == set()
        except (GrammarError, RecursionError):  # a reference it cannot follow: llguidance decides
            return False

    def merged_keys(node: dict) -> list[str] | None:
        """The keys declared for the object `node` describes, over every part merged into it
        (allOf, anyOf, oneOf, conditions, dependent schemas, the `$ref`s merged_ref inlines);
        None where a part says what undeclared keys may be (patternProperties, a schema or
        false for additionalProperties, propertyNames, unevaluatedProperties), requires a key
        no part declares (closed, it could never be written), or is a `$ref` that stays one
        (a reference beside nothing in anyOf/oneOf, or back into itself: its target is closed
        on its own)."""
        keys: dict[str, None] = {}
        required: set[str] = set()
        refs: set[str] = set()
        todo: list[tuple[Any, bool]] = [(node, False)]  # (part, stays a $ref if it is one)
        while todo:
            part, alone = todo.pop()
            if not isinstance(part, dict):
                continue
            if part is not node and (set(part) & {"patternProperties", "propertyNames", "unevaluatedProperties"}
                                     or part.get("additionalProperties", True) is not True):
                return None
            ref = part.get("$ref")
            if isinstance(ref, str):
                if alone and not set(part) - {"$ref"} - _QUIET or ref in refs:
                    return None
                refs.add(ref)
                try:
                    todo.append((checks.resolve(ref, ""), False))
                except (GrammarError, RecursionError):
                    return None
            if isinstance(part.get("properties"), dict):
                keys.update(dict.fromkeys(part["properties"]))
            if isinstance(part.get("required"), list):
                required.update(k for k in part["required"] if isinstance(k, str))
            for k in ("allOf", "anyOf", "oneOf"):
                todo += [(v, k != "allOf") for v in part.get(k, []) if isinstance(part.get(k), list)]
            todo += [(part[k], True) for k in ("if", "then", "else", "not") if isinstance(part.get(k), dict)]
            for k in ("dependentSchemas", "dependencies"):
                if isinstance(part.get(k), dict):
                    todo += [(v, True) for v in part[k].values() if isinstance(v, dict)]
        return list(keys) if required <= keys.keys() else None

    def part_context(owner: dict, index: int, inherited: Callable[[], dict] | None) -> dict:
        """What every value reaching allOf member `index` of `owner` meets besides the member:
        the keys the owner and the other members require, a type one of them states (first
        found), and what reached the owner so (`inherited`). Read one `$ref` deep. Asked only
        where a member's oneOf is not apart on its own, while `owner`'s members are rewritten
        (the owner as it stands then)."""
        reached = inherited() if inherited is not None else {"required": [], "type": None}
        required, kind = list(reached["required"]), reached["type"]
        for j, part in enumerate([owner, *owner["allOf"]]):
            if j == index + 1:
                continue
            try:
                part = checks.deref(part)
            except (GrammarError, RecursionError):
                continue
            if isinstance(part, dict):
                required += [k for k in part.get("required", []) if isinstance(k, str)] if isinstance(part.get("required"), list) else []
                kind = part["type"] if kind is None and "type" in part else kind
        return {"required": required, "type": kind}

    def with_context(siblings: dict, context: dict) -> dict:
        """`siblings` (a oneOf's node) with what part_context found every value meets besides it."""
        own = siblings["required"] if isinstance(siblings.get("required"), list) else []
        kind = {"type": context["type"]} if "type" not in siblings and context["type"] is not None else {}
        return {**siblings, "required": [*own, *context["required"]], **kind}

    def rewrite(node: Any, path: str, negated: bool, keep_open: bool = False, context: Callable[[], dict] | None = None) -> Any:
        """keep_open: `node` is a part of an object closed where its parts merge (an allOf
        member, an anyOf branch): the keys it may hold were counted there. context: what every
        value reaching `node` meets besides it, where `node` is an allOf member (part_context):
        a oneOf there is told apart with it (SchemaStore-like `allOf: [{"$ref": common}, {"oneOf":
        [kinds]}]`, the kind's key required by `common`)."""
        nonlocal unsafe, visits
        visits += 1
        if visits > MAX_REWRITE_NODES:
            raise RewriteTooLarge(f"the rewrite for llguidance visited more than {MAX_REWRITE_NODES:,} schema nodes")
        if not isinstance(node, dict):
            return node
        if ignored is not None:
            for key in node.keys() - known:
                ignored.setdefault(key, pointer(path, key))
        if not (closed_objects or evaluating) and (node.get("additionalProperties") is True or node.get("additionalProperties") == {}):
            # says nothing (every undeclared key's value meets it); left in, it makes a member of
            # the object's family that constrains (json_key_order) and, beside branches into a
            # cycle, the siblings merged_cycle writes into every branch
            node = {k: v for k, v in node.items() if k != "additionalProperties"}
        if path and set(node) & {"anyOf", "oneOf", "allOf", "$ref"} and no_value(node):
            # no value meets it (an object type beside a oneOf of string references: Atom's
            # content `type`): llguidance refuses it, and a reference to `false`, as unsatisfiable;
            # `false` in place it takes (the key cannot appear)
            return False
        ref = node.get("$ref")
        if isinstance(ref, str) and set(node) & VALIDATION - {"$ref"} and (ref in inlining or cyclic(ref)):
            target = inlined(ref)
            siblings = _vacuous_dropped({k: v for k, v in node.items() if k in VALIDATION and k != "$ref"}, target)
            if not siblings:  # renovate's managers: `{"$ref": "#", "type": "object", "items": ...}` of an object root
                # (llguidance unrolls a cycle beside annotations too, past its 50,000 nodes); the
                # definitions stay, the references point into them (a root `$ref` beside them)
                node = {"$ref": ref, **{k: v for k, v in node.items() if k in ("$defs", "definitions")}}
            else:
                cycle = merged_cycle(ref, target, siblings, path, negated, keep_open)
                if cycle is not None:
                    return cycle
        options_key = "anyOf" if isinstance(node.get("anyOf"), list) else "oneOf" if isinstance(node.get("oneOf"), list) else None
        siblings = {k: v for k, v in node.items() if k in VALIDATION and k not in ("anyOf", "oneOf", "$ref")}
        if options_key and siblings and not set(node) & {"anyOf", "oneOf"} - {options_key} and any(
                isinstance(o, dict) and isinstance(o.get("$ref"), str) and not set(o) - {"$ref"} - _QUIET and cyclic(o["$ref"])
                for o in node[options_key]):
            # llguidance moves the siblings into every branch and refuses them beside a reference
            # into a cycle (resjson); moved here, such a branch becomes merged_cycle's definition.
            # A oneOf whose branches are apart stays apart with the siblings inside (each branch
            # only narrows): an anyOf, since `disjoint` sees no further than a `$ref` with siblings
            moved_into = "anyOf" if options_key == "oneOf" and disjoint(node["oneOf"], node) else options_key

            def moved(o: Any) -> Any:  # a reference's target may say all the siblings say (its own `type`)
                said = _vacuous_dropped(siblings, inlined(o["$ref"])) if isinstance(o, dict) and isinstance(o.get("$ref"), str) else siblings
                return o if not said else {**o, **said} if isinstance(o, dict) and "$ref" in o and not set(o) & set(said) else {"allOf": [o, said]}

            node = {**{k: v for k, v in node.items() if k not in siblings and k != options_key},
                    moved_into: [moved(o) for o in node[options_key]]}
        out = _names_as_properties(dict(node), closed_objects, checks.deref)
        if "if" not in out:  # `then` and `else` without an `if` have no effect (llguidance refused them)
            out.pop("then", None)
            out.pop("else", None)
        if implied_type(out):
            del out["type"]
        _listed_patterns_as_properties(out)
        _pattern_twins_as_true(out)
        _subsumed_names_skipped(out, checks.deref)
        if not (closed_objects or evaluating):
            _required_keys_declared(out)
        discriminated_conditions(out)
        conditions = _dependencies_as_conditions(out, _object_of(path) in counted)  # llguidance has neither, nor `not`:
        conditions += _property_counts_as_key_sets(out) + _open_property_counts_as_key_sets(out) + _min_properties_as_condition(out)
        wide = _wide_number_bounds(out)
        if wide is not None:  # a narrowing: under a negation it would widen the whole
            unsafe = unsafe or negated
            conditions.append(wide)
            if narrowed is not None:
                narrowed.setdefault(at(path), f"numbers beyond {WIDE_NUMBER:g} in magnitude only as integers, within 64 bits")
        positive = negation(out["not"], {k: v for k, v in out.items() if k != "not"}, not negated, pointer(path, "not")) if "not" in out else None
        if positive is not None:
            del out["not"]
            conditions.append(positive)
        typed = {"type": out["type"]} if "type" in out else {}
        if "if" in out and within({**typed, **out["if"]} if isinstance(out["if"], dict) else out["if"], out.get("then", True), checks.deref):
            # what meets `if` meets `then`: (if and then) or (not if and else) is `if` or `else`, no
            # negation needed (sounds: `not if` of an array's items needs `contains`)
            conditions.append({"anyOf": [out.pop("if"), out.pop("else", True)]})
            out.pop("then", None)
        if "if" in out:  # (if and then) or (not if and else), where `not if` is expressible
            cond = out["if"]
            against = negation(cond, {k: v for k, v in out.items() if k not in ("if", "then", "else")}, not negated, pointer(path, "if"))
            if against is not None:
                then, other = out.pop("then", True), out.pop("else", True)
                del out["if"]
                branches = [{"allOf": [cond, then]}, *([{"allOf": [against, other]}] if against is not False else [])]
                conditions.append({"anyOf": branches})
        if conditions:
            out["allOf"] = [*out.get("allOf", []), *conditions]
        formatted = None
        fmt = out.pop("format", None)
        if fmt in FORMAT_PATTERNS:
            if negated:
                unsafe = True
            formatted = f"^(?:{FORMAT_PATTERNS[fmt]})$"
        elif fmt is not None and ignored is not None and fmt not in NON_STRING_FORMATS:
            ignored.setdefault(f"format: {fmt}", pointer(path, "format"))
        one_of = out.get("oneOf")
        if isinstance(one_of, list) and sum(o is True or (isinstance(o, dict) and not set(o) & VALIDATION) for o in one_of) >= 2:
            return False  # two branches every value meets: none meets exactly one (a draft-4 oneOf of `const`s)
        # with a context, branches may be apart only on the values the other members let through:
        # the allOf as a whole is the same with anyOf there
        apart = isinstance(one_of, list) and (disjoint(one_of, out) or context is not None and disjoint(one_of, with_context(out, context())))
        keyed = _closed_key_branches(one_of, checks.deref) if isinstance(one_of, list) and not apart else None
        if keyed is not None:
            one_of = keyed
        elif isinstance(one_of, list) and one_of and not apart and objects_apart(one_of, out):
            out["type"] = "object"  # non-objects meet two branches or more: only objects meet one
        elif isinstance(one_of, list) and one_of and not apart:  # branch i and no other j
            one_of = exclusive(one_of, out, not negated, path) or one_key_each(one_of, out, negated, path)
        if isinstance(one_of, list) and one_of:  # at most one branch can match
            del out["oneOf"]
            if "anyOf" in out:
                out["allOf"] = [*out.get("allOf", []), {"anyOf": one_of}]
            else:
                out["anyOf"] = one_of
        unique = out.pop("uniqueItems", False)
        if unique is True and (negated or exact_unique and finite_items(out, path)):
            unsafe = True
        elif unique is True and unique_items is not None:
            unique_items.append(pointer(path, "uniqueItems"))  # the caller wraps: unique_items.py
            if narrowed is not None and re.search(r"/(anyOf|oneOf|then|else)(/|$)", path):
                narrowed.setdefault(pointer(path, "uniqueItems"), "kept unique whichever branch the array matches")
        elif unique is True and not (isinstance(out.get("maxItems"), int) and out["maxItems"] <= 1):
            out["maxItems"] = 1
            if narrowed is not None:
                narrowed.setdefault(pointer(path, "uniqueItems"), "arrays of at most one item")
        step = out.get("multipleOf")
        if isinstance(step, float) and not step.is_integer() and not _decimal_reading_agrees(step):
            unsafe = True
        parts_open = keep_open  # the parts describing this same object (allOf, anyOf) left open
        if closed_objects and (_UNSAFE & set(out) or (({"$ref", "anyOf"} & set(out)) and _OBJECT_KEYWORDS & set(out))):
            # closed where the parts merge: every key some part declares, the parts left open
            # (closing each part alone would lose the keys of the others)
            keys = None if _UNSAFE & set(out) - {"allOf"} else [] if keep_open else merged_keys(out)
            if keys is None:
                unsafe = True
            else:
                parts_open = True
                own_rule = out.get("additionalProperties", True) is not True or "patternProperties" in out
                if not keep_open and not own_rule:  # (its own rule already closes it, over its own keys)
                    declared = out.get("properties", {})
                    out["properties"] = {**declared, **{k: True for k in keys if k not in declared}}
        for k in _ONE:
            if isinstance(out.get(k), dict):
                out[k] = rewrite(out[k], pointer(path, k), negated)
        if "$ref" in out and set(out) & VALIDATION - {"$ref"}:  # siblings of a $ref: both hold
            out["allOf"] = [*out.get("allOf", []), {"$ref": out.pop("$ref")}]
        for k in _LIST:
            if isinstance(out.get(k), list):
                out[k] = [rewrite(v, pointer(path, k, i), negated, parts_open and k == "anyOf") for i, v in enumerate(out[k])]
        if isinstance(out.get("anyOf"), list):
            out["anyOf"] = _subsumed_values_dropped(out["anyOf"])
        if isinstance(out.get("allOf"), list):  # for its formats (closing marked it unsafe)
            out["allOf"] = [merged_ref(v, pointer(path, "allOf", i), negated, parts_open, functools.partial(part_context, out, i, context))
                            for i, v in enumerate(out["allOf"])]
        for k in _MAP:
            if isinstance(out.get(k), dict):
                out[k] = {name: rewrite(v, pointer(path, k, name), negated) for name, v in out[k].items()}
        for k in node.keys() - known:  # where a `$ref` may point (`#/$defs/group/a`): rewritten like a definition,
            if isinstance(out.get(k), dict):  # or llguidance would read its format itself (2023-02-29 as a date)
                out[k] = rewrite(out[k], pointer(path, k), negated)
        # walked for their formats and keywords only: a narrower part there makes a wider whole
        if isinstance(out.get("oneOf"), list):
            out["oneOf"] = [rewrite(v, pointer(path, "oneOf", i), True) for i, v in enumerate(out["oneOf"])]
        for k in ("not", "contains", "if", "then", "else"):
            if isinstance(out.get(k), dict):
                out[k] = rewrite(out[k], pointer(path, k), True)
        kinds = out.get("type")
        is_object = "properties" in out or kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
        if closed_objects and not keep_open and is_object and out.get("additionalProperties", True) is True and "patternProperties" not in out:
            if not set(out.get("required", [])) <= set(out.get("properties", {})):
                unsafe = True
            out["additionalProperties"] = False
        if formatted is not None and "pattern" in out:  # both hold: llguidance intersects allOf patterns
            out["allOf"] = [*out.get("allOf", []), {"pattern": formatted}]
        elif formatted is not None:
            out["pattern"] = formatted
        split = leading_lookaheads(out["pattern"]) if isinstance(out.get("pattern"), str) else None
        if split is not None:  # `^(?!org\.bukkit\.)...`: the rest, and "none of these words"
            out["pattern"] = split[0]
            out["allOf"] = [*out.get("allOf", []), *({"pattern": p} for p in split[1:])]
        elif isinstance(out.get("pattern"), str):
            out["pattern"] = _without_lookarounds(out["pattern"])
        high, low = out.get("maxLength"), out.get("minLength", 0)
        if (vocab is not None and isinstance(out.get("pattern"), str) and isinstance(high, int) and high > PROBED_LENGTH
                and isinstance(low, int)):
            from .llguidance_backend import bounded_pattern_lexes  # noqa: PLC0415 (it imports this module)

            if not bounded_pattern_lexes(out["pattern"], low, high, vocab):  # llguidance would fail mid-string
                if negated or low > PROBED_LENGTH or not bounded_pattern_lexes(out["pattern"], low, PROBED_LENGTH, vocab):
                    unsafe = True  # (narrower under a negation is wider): our compiler decides
                else:
                    out["maxLength"] = PROBED_LENGTH
                    if narrowed is not None:
                        narrowed.setdefault(pointer(path, "maxLength"), f"at most {PROBED_LENGTH} characters beside this pattern")
        if isinstance(out.get("patternProperties"), dict):  # a key's pattern is one regex: no allOf there
            patterns: dict[str, Any] = {}
            for key, sub in out["patternProperties"].items():
                key = _without_lookarounds(key)
                patterns[key] = {"allOf": [patterns[key], sub]} if key in patterns else sub
            out["patternProperties"] = patterns
        return out

    rewritten = escapes_held_out(rewrite(schema, "", False))
    if rewritten is None:
        return None  # a class we could not rewrite: our compiler takes the schema
    if rewritten is False:
        return None  # no value at all: our compiler says so by name
    if merged_defs and isinstance(rewritten, dict):
        rewritten["$defs"] = {**rewritten.get("$defs", {}), **merged_defs}
    return None if unsafe else rewritten


PROBED_LENGTH = 256  # a pattern under a longer maxLength is probed first (llguidance_backend.bounded_pattern_lexes)


_TYPE_ONLY = {  # keywords that constrain values of one JSON type only
    "array": {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
              "maxContains", "unevaluatedItems"},
    "object": {"properties", "patternProperties", "additionalProperties", "required", "minProperties", "maxProperties",
               "propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties"},
    "string": {"pattern", "minLength", "maxLength"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
}


def _type_set(kinds: Any) -> set[str] | None:
    named = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else None
    return None if named is None else named | ({"integer"} if "number" in named else set())


def _vacuous_dropped(siblings: dict, target: Any) -> dict:
    """`siblings` of a `$ref` to `target` without what says nothing beside it: a `type` the
    target's own type implies, and keywords of a type the two types together rule out."""
    if not isinstance(target, dict):
        return siblings
    own, said = _type_set(target.get("type")), _type_set(siblings.get("type"))
    out = dict(siblings)
    if own is not None and said is not None and own <= said:
        del out["type"]
    allowed = own & said if own is not None and said is not None else own if own is not None else said
    if allowed is not None:
        for kind, keywords in _TYPE_ONLY.items():
            if kind not in allowed:
                out = {k: v for k, v in out.items() if k not in keywords}
    return out


_CLOSED_BRANCH = {"type", "properties", "required", "additionalProperties"}


def _closed_key_branches(options: list, deref: Callable[[Any], Any]) -> list | None:
    """A oneOf of closed objects (`additionalProperties: false`) whose declared keys are
    pairwise disjoint (traefik's services and middlewares: `{"properties": {"loadBalancer":
    ...}}`, `{"properties": {"weighted": ...}}`, ...) as disjoint branches: two branches meet
    only on the empty object (and on non-objects, where neither says `type: object`), so
    exactly one holds for an object with a key, for `{}` only where one branch alone takes it.
    Each branch becomes an object holding one of its keys (the one branch that alone takes `{}`
    keeps it); None where the branches are not of that form."""
    if len(options) < 2:
        return None
    shapes = [deref(o) for o in options]
    keys: set[str] = set()
    for shape in shapes:
        if not isinstance(shape, dict) or set(shape) - _QUIET - _CLOSED_BRANCH or shape.get("additionalProperties") is not False:
            return None
        if shape.get("type", "object") != "object" or not isinstance(shape.get("properties", {}), dict):
            return None
        names = set(shape.get("properties", {}))
        if names & keys or not names:
            return None
        keys |= names
    if sum("type" not in shape for shape in shapes) == 1:
        return None  # non-objects meet that branch alone: valid there
    takes_empty = [i for i, shape in enumerate(shapes) if not shape.get("required")]
    out = []
    for i, (option, shape) in enumerate(zip(options, shapes)):
        if shape.get("required") or takes_empty == [i]:
            out.append({"allOf": [option, {"type": "object"}]})
        else:
            out.append({"allOf": [option, {"type": "object", "anyOf": [{"required": [k]} for k in shape["properties"]]}]})
    return out


def _decimal_reading_agrees(step: float) -> bool:
    """Whether llguidance reads a fractional multipleOf as our compiler does: for 10^-k both
    take numbers written with at most k decimal places (the specification's decimal reading:
    19.99 is a multiple of 0.01; Python's jsonschema divides binary floats and says no). Other
    steps go to our compiler, which refuses them by name (llguidance reads 0.25 as two places
    and refuses 2.5)."""
    from .json_schema import _decimal_places  # noqa: PLC0415 (the compiler's own test)

    return _decimal_places(step) is not None


_MERGED = re.compile(r"(/(allOf|anyOf|oneOf)/\d+)+$")


def _object_of(path: str) -> str:
    """The JSON pointer of the object a node's keys go into: llguidance merges a node's
    allOf/anyOf/oneOf members into it (`/properties/a/allOf/0` writes `/properties/a`'s object)."""
    return _MERGED.sub("", path)


def _counted_objects(schema: Any) -> set[str]:
    """The objects (_object_of) some node of `schema` bounds the property count of, by its JSON
    pointer (through no reference)."""
    found: set[str] = set()
    todo = [("", schema)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, dict):
            if "minProperties" in node or "maxProperties" in node:
                found.add(_object_of(path))
            todo += schema_children(node, path)
    return found


def _holds(node: Any, keyword: str) -> bool:
    """Whether `keyword` appears as a keyword anywhere in the schema `node` (a property named so
    is not one, nor a key of a const: helm's test suite asserts with a `contains` property)."""
    if isinstance(node, list):
        return any(_holds(v, keyword) for v in node)
    if not isinstance(node, dict):
        return False
    if keyword in node:
        return True
    for k, v in node.items():
        if k in NAME_MAPS and isinstance(v, dict):
            if any(_holds(sub, keyword) for sub in v.values()):
                return True
        elif k not in _DATA and _holds(v, keyword):
            return True
    return False


# where a narrower subschema makes a narrower whole (not under oneOf, not, if, or a condition)
_MONOTONE_ONE = ("items", "additionalProperties", "additionalItems", "propertyNames", "contains")
_MONOTONE_LIST = ("allOf", "anyOf", "prefixItems", "items")
_MONOTONE_MAP = ("properties", "patternProperties", "dependentSchemas")


def _without_contains(node: Any) -> Any:
    """`node` (a schema without `not`) with every subschema that holds `contains` made `false`
    where that only narrows it (along allOf/anyOf/properties/items...), simplified; None where a
    `contains` sits where narrowing could widen the whole (under oneOf or a condition)."""
    if not isinstance(node, dict) or not _holds(node, "contains"):
        return node
    if "contains" in node:
        return False
    if {"oneOf", "not", "if", "then", "else", "dependencies"} & set(node) and any(
            _holds(node.get(k), "contains") for k in ("oneOf", "not", "if", "then", "else", "dependencies")):
        return None
    out = dict(node)
    for k in _MONOTONE_ONE:
        if isinstance(out.get(k), dict):
            out[k] = _without_contains(out[k])
            if out[k] is None:
                return None
    for k in _MONOTONE_LIST:
        if isinstance(out.get(k), list):
            parts = [_without_contains(v) for v in out[k]]
            if any(p is None for p in parts):
                return None
            out[k] = parts
    for k in _MONOTONE_MAP:
        if isinstance(out.get(k), dict):
            parts = {name: _without_contains(v) for name, v in out[k].items()}
            if any(p is None for p in parts.values()):
                return None
            out[k] = parts
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [p for p in out["anyOf"] if p is not False]
        if not out["anyOf"]:
            return False
    if isinstance(out.get("allOf"), list) and any(p is False for p in out["allOf"]):
        return False
    return None if _holds(out, "contains") else out


WIDE_NUMBER = 1e17  # llguidance builds float ranges up to about here (probed: 1e17 yes, 2^63 no)
# and integer ranges within 64 bits whose bounds survive a trip through a float (probed: a
# minimum of -(2^63 - 1) is read as -2^63 and refused; -(2^63 - 1024) is a float)
INT_RANGE = (-(2**63 - 1024), 2**63 - 1)
_BOUNDS = {"minimum": max, "exclusiveMinimum": max, "maximum": min, "exclusiveMaximum": min}


def _wide_number_bounds(node: dict) -> dict | None:
    """Numbers bounded beyond WIDE_NUMBER (Snowplow: `maximum: 9223372036854775807`), which
    llguidance refuses ("Failed to generate regex for float range"), as "a number within
    WIDE_NUMBER, or an integer within INT_RANGE, in the bounds" (integers bounded beyond
    INT_RANGE: within it): a narrowing (non-integers beyond 1e17 in magnitude, integers beyond
    64 bits). Bounds popped from `node` (its `type` too), the anyOf returned for an allOf; None
    where no bound is that wide or `multipleOf` is there."""
    kinds = node.get("type")
    types = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    bounds = {k: node[k] for k in _BOUNDS if isinstance(node.get(k), (int, float)) and not isinstance(node.get(k), bool)}
    fits = (-WIDE_NUMBER, WIDE_NUMBER) if "number" in types else INT_RANGE  # what llguidance builds
    if not {"number", "integer"} & set(types) or "multipleOf" in node or all(fits[0] <= v <= fits[1] for v in bounds.values()):
        return None
    parts: list[dict] = [{"type": [t for t in types if t not in ("number", "integer")]}]
    for kind, (low, high) in (("number", (-WIDE_NUMBER, WIDE_NUMBER)), ("integer", INT_RANGE)):
        if kind == "number" and "number" not in types:
            continue
        part: dict = {"type": kind}
        for key, value in bounds.items():
            lower = _BOUNDS[key] is max
            if value > high if lower else value < low:
                part = {}  # the whole range lies outside: no such number
                break
            part[key] = max(value, low) if lower else min(value, high)
            if kind == "integer":
                part[key] = int(part[key])
        if part:
            parts.append(part)
    for key in bounds:
        del node[key]
    del node["type"]
    return {"anyOf": [p for p in parts if p.get("type") != []] or [False]}


MAX_KEY_SETS = 64


def _property_counts_as_key_sets(node: dict) -> list[Any]:
    """min/maxProperties of an object that admits only its declared keys, as "one of these key
    sets" (Snowplow's enrichment inputs: `placeholder` and exactly one of `pojo`/`json`): the
    count is the required keys plus the optional ones present, so each set of optional keys whose
    count fits is a branch requiring them and forbidding the rest (exact). Up to MAX_KEY_SETS
    branches; popped from `node`, returned for an allOf. Otherwise left as they are."""
    least, most = node.get("minProperties", 0), node.get("maxProperties")
    props, required = node.get("properties", {}), node.get("required", [])
    if most is None or node.get("additionalProperties", True) is not False or "patternProperties" in node:
        return []
    if not isinstance(props, dict) or not isinstance(required, list) or not set(required) <= set(props):
        return []
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (least, most)):
        return []
    optional = [name for name, sub in props.items() if sub is not False and name not in required]
    counts = range(max(least - len(set(required)), 0), min(most - len(set(required)), len(optional)) + 1)
    if sum(math.comb(len(optional), k) for k in counts) > MAX_KEY_SETS:
        return []
    node.pop("minProperties", None)
    del node["maxProperties"]
    branches = [{"required": [*dict.fromkeys(required), *chosen], "properties": {name: False for name in optional if name not in chosen}}
                for k in counts for chosen in itertools.combinations(optional, k)]
    return [{"anyOf": branches or [{"type": ["null", "boolean", "number", "string", "array"]}]}]  # no count fits: no object


_COUNTED_OBJECT_KEYWORDS = {"properties", "required", "additionalProperties", "minProperties", "maxProperties"}
_UNCOUNTED_OBJECT_KEYWORDS = {"patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
                              "unevaluatedProperties"}


def _open_property_counts_as_key_sets(node: dict) -> list[Any]:
    """maxProperties (and minProperties) of an object that admits undeclared keys, as one branch
    per set of optional declared keys present (catalog-info: exactly one of `$json`, `$text`,
    `$yaml`, or one undeclared key): in each, every declared key it holds is required, the others
    absent, undeclared keys matched by a pattern of every other name, and the counts kept, which
    llguidance takes where every listed key is required. Exact (a value's declared keys pick its
    branch); up to MAX_KEY_SETS branches, the object keywords popped from `node`, returned for
    an allOf with a branch for every other type. Otherwise left as they are."""
    least, most = node.get("minProperties", 0), node.get("maxProperties")
    props, required, extra = node.get("properties", {}), node.get("required", []), node.get("additionalProperties", True)
    if most is None or extra is False or set(node) & _UNCOUNTED_OBJECT_KEYWORDS:
        return []
    if not isinstance(props, dict) or not isinstance(required, list) or not set(required) <= set(props):
        return []
    if not all(_is_count(n) for n in (least, most)) or any(props[name] is False for name in required):
        return []
    others = literals_complement([(name, True) for name in props]) if props else ""
    if others is None:
        return []
    required = list(dict.fromkeys(required))
    optional = [name for name, sub in props.items() if sub is not False and name not in required]
    if not optional:
        return []  # every listed key required: llguidance takes the counts as they are (so does each branch below)
    counts = range(0, max(min(most - len(required), len(optional)) + 1, 0))
    if sum(math.comb(len(optional), k) for k in counts) > MAX_KEY_SETS:
        return []
    for key in _COUNTED_OBJECT_KEYWORDS:
        node.pop(key, None)
    rest = {"patternProperties": {others: extra}} if others else {"additionalProperties": extra}
    branches = [{"type": "object", "properties": {name: props[name] for name in (*required, *chosen)}, "required": [*required, *chosen],
                 **rest, **({"additionalProperties": False} if others else {}), "minProperties": least, "maxProperties": most}
                for k in counts for chosen in itertools.combinations(optional, k)]
    return [{"anyOf": [*branches, {"type": ["null", "boolean", "number", "string", "array"]}]}]


def _min_properties_as_condition(node: dict) -> list[Any]:
    """llguidance takes minProperties only where every listed property is required. minProperties
    m at most one above the required count is "an optional listed key present, or none of them
    and m keys" (exact; each branch is one llguidance takes); popped from `node`, returned for
    an allOf. Larger gaps and maxProperties are left (llguidance refuses, our compiler decides)."""
    least, props, required = node.get("minProperties"), node.get("properties", {}), node.get("required", [])
    if not isinstance(least, int) or isinstance(least, bool) or not isinstance(props, dict) or not isinstance(required, list):
        return []
    optional = [name for name, sub in props.items() if sub is not False and name not in required]
    if least > len(set(required)) + 1 or not optional or len(optional) > 32:
        return []
    del node["minProperties"]
    if least <= len(set(required)):
        return []  # the required keys already count that many
    none = {"properties": dict.fromkeys(optional, False), "minProperties": least}
    return [{"anyOf": [*({"required": [name]} for name in optional), none]}]


_MAY_DECLARE = {"$ref", "if", "then", "else", "dependencies", "dependentSchemas"}  # keys they add are not in sight
_PARTS = ("allOf", "anyOf", "oneOf")


def _declared_in_parts(node: dict) -> set[str] | None:
    """The keys the node's allOf/anyOf/oneOf parts declare (through their own parts), None where
    a part could declare more than it shows (a `$ref`, a condition)."""
    names: set[str] = set()
    todo = [part for k in _PARTS if isinstance(node.get(k), list) for part in node[k]]
    while todo:
        part = todo.pop()
        if not isinstance(part, dict):
            continue
        if set(part) & _MAY_DECLARE:
            return None
        if isinstance(part.get("properties"), dict):
            names |= set(part["properties"])
        todo += [sub for k in _PARTS if isinstance(part.get(k), list) for sub in part[k]]
    return names


def _required_keys_declared(node: dict) -> None:
    """A required key the node does not declare, declared with the schema the node gives it
    anyway (`true` where one of its patterns matches it: llguidance applies those to declared
    keys too; else its additionalProperties): the same language. llguidance writes an undeclared
    required key before every pattern, so a family holding one kept its schema's order; declared,
    it moves like any other (json_key_order, json_required). Not where propertyNames constrains
    it, a pattern does not compile here, or another member of its family declares it or may (a
    part or branch that does, a `$ref` or condition beside: a key two members declare stays in
    schema order; json_key_order frees one that another member declares). The caller skips
    closed objects (declaring would open them) and schemas with unevaluatedProperties (a
    declared key counts as evaluated)."""
    required, props, patterns = node.get("required"), node.get("properties", {}), node.get("patternProperties", {})
    if (not isinstance(required, list) or not isinstance(props, dict) or not isinstance(patterns, dict)
            or "propertyNames" in node or set(node) & _MAY_DECLARE):
        return
    in_parts = _declared_in_parts(node)
    if in_parts is None:
        return
    missing = [k for k in dict.fromkeys(k for k in required if isinstance(k, str)) if k not in props and k not in in_parts]
    if not missing:
        return
    try:
        compiled = [re.compile(pattern) for pattern in patterns]
    except (re.error, TypeError, RecursionError):
        return
    extra = node.get("additionalProperties", True)
    node["properties"] = {**props, **{k: True if any(c.search(k) for c in compiled) else extra for k in missing}}


def _names_as_properties(node: dict, closed_objects: bool = False, deref: Callable[[Any], Any] = lambda s: s) -> dict:
    """propertyNames (which llguidance does not implement) where it is a name pattern, length,
    format or enum, and no patternProperties could disagree: listed names it refuses become
    `false`; undeclared names must match it (patternProperties with additionalProperties' schema,
    where no listed name could also match, or the enum's names listed). Exact; any other form
    is left (llguidance refuses, our compiler decides)."""
    names = node.get("propertyNames")
    if names is None:
        return node
    try:
        names = deref(names)
    except (GrammarError, RecursionError):
        return node
    barred = deref(names.get("not")) if isinstance(names, dict) and set(names) - ANNOTATIONS == {"not"} else None
    if isinstance(barred, dict) and set(barred) - ANNOTATIONS in ({"enum"}, {"const"}) and isinstance(node.get("properties", {}), dict):
        values = enum_values(barred)  # names it must not be: each declared `false` (llguidance has no propertyNames)
        if values is not None and all(isinstance(v, str) for v in values):
            out = {k: v for k, v in node.items() if k != "propertyNames"}
            out["properties"] = {**node.get("properties", {}), **dict.fromkeys(values, False)}
            return out
    names = _name_keywords(names, deref)
    extra, props = node.get("additionalProperties", False if closed_objects else True), node.get("properties", {})
    if names == {} or names is True:
        return {k: v for k, v in node.items() if k != "propertyNames"}
    if not isinstance(names, dict) or not isinstance(extra, (bool, dict)) or not isinstance(props, dict):
        return node
    values = enum_values(names) if set(names) in ({"enum"}, {"const"}) else None  # both: their intersection, left
    if node.get("patternProperties"):
        return _listed_names_with_patterns(node, values, extra, props)
    pattern = _name_pattern(names) if values is None else None
    if values is None and pattern is None or values is not None and not all(isinstance(v, str) for v in values):
        return node
    try:
        allowed = (lambda name: name in values) if values is not None else (lambda name: re.search(pattern, name) is not None)
        out = {k: v for k, v in node.items() if k != "propertyNames"}
        out["properties"] = {name: (sub if allowed(name) else False) for name, sub in props.items()}
    except re.error:
        return node
    if extra is not False and values is not None:
        out["properties"].update({name: extra for name in values if name not in props})
        out["additionalProperties"] = False
    elif extra is not False:
        if extra is not True and any(sub is not False for sub in out["properties"].values()):
            return node  # the pattern's schema would apply to listed names too
        out["patternProperties"], out["additionalProperties"] = {pattern: extra}, False
    return out


def _listed_names_with_patterns(node: dict, values: list | None, extra: Any, props: dict) -> dict:
    """propertyNames listing its names beside patternProperties: every listed name becomes a
    declared key whose value meets its own schema and every pattern it matches (undeclared and
    matching none: additionalProperties'); no other key. Left as it is (llguidance refuses)
    where the names are not a list of strings or a pattern does not compile."""
    patterns = node["patternProperties"]
    if values is None or not isinstance(patterns, dict) or not all(isinstance(v, str) for v in values):
        return node
    try:
        compiled = [(re.compile(pattern), sub) for pattern, sub in patterns.items()]
    except (re.error, TypeError):
        return node
    listed = dict.fromkeys(values)
    out = {k: v for k, v in node.items() if k not in ("propertyNames", "patternProperties")}
    out["properties"] = {name: False for name in props}  # declared first, in their order
    for name in listed:
        parts = [props[name]] if name in props else []
        parts += [sub for pattern, sub in compiled if pattern.search(name)]
        out["properties"][name] = extra if not parts else parts[0] if len(parts) == 1 else {"allOf": parts}
    out["additionalProperties"] = False
    return out


def _name_keywords(names: Any, deref: Callable[[Any], Any]) -> Any:
    """A propertyNames schema's keywords that constrain names (json_merge.name_keywords); names
    it lists (an anyOf of value lists, say) as one enum of them."""
    if not isinstance(names, dict):
        return names
    listed = listed_names(names, deref, FORMAT_PATTERNS)
    return {"enum": listed} if listed is not None else name_keywords(names, FORMAT_PATTERNS)


def _name_pattern(names: dict) -> str | None:
    """A regex for the names a propertyNames schema of one string keyword admits, or None."""
    if set(names) == {"pattern"} and isinstance(names["pattern"], str):
        return names["pattern"]
    if set(names) == {"format"} and names["format"] in FORMAT_PATTERNS:
        return f"^(?:{FORMAT_PATTERNS[names['format']]})$"
    lengths = {k: v for k, v in names.items() if k in ("minLength", "maxLength")}
    if lengths and set(names) == set(lengths) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in lengths.values()):
        return f"^[\\s\\S]{{{lengths.get('minLength', 0)},{lengths.get('maxLength', '')}}}$"
    return None


def _only_required(schema: Any) -> bool:
    """Whether `schema` validates nothing but `required` (a list of names): annotations and
    unknown keywords aside."""
    return (isinstance(schema, dict) and set(schema) & VALIDATION == {"required"}
            and isinstance(schema["required"], list) and all(isinstance(k, str) for k in schema["required"]))


def _dependencies_as_conditions(node: dict, counted: bool) -> list[Any]:
    """Pops `dependencies`/`dependentRequired`/`dependentSchemas` from `node` (where every value
    is a list of names or a schema) and returns them as equivalent schemas for an allOf: key
    absent, or present with what it brings (non-objects satisfy both sides). `counted`: a
    property count bounds the object `node`'s keys go into (_object_of)."""
    found = [(k, node[k]) for k in ("dependencies", "dependentRequired", "dependentSchemas") if isinstance(node.get(k), dict)]
    if not all(isinstance(v, (list, dict, bool)) for _, deps in found for v in deps.values()):
        return []  # left as it is: llguidance refuses the schema, our compiler says why
    conditions = []
    required = node.get("required") if isinstance(node.get("required"), list) else []
    for key, deps in found:
        del node[key]
        for name, need in deps.items():
            if _only_required(need):  # a schema that only requires keys: the list form (what the lift reads)
                need = need["required"]
            if isinstance(need, list):  # keys the node requires anyway need no condition
                need = [k for k in need if k not in required]
                if not need:
                    continue
            # a schema: "absent, or present and it holds" is "absent, or it holds"; the key is declared
            # there, not required (a branch's required key keeps it, and the keys declared before it,
            # in schema order; undeclared, llguidance writes it after every declared key), but where
            # llguidance takes a property count only with every declared key required
            declared = {"required": [name]} if counted else {"properties": {name: True}}
            present = {"required": [name, *need]} if isinstance(need, list) else {"allOf": [declared, need]}
            conditions.append({"anyOf": [{"properties": {name: False}}, present]})
    return conditions


