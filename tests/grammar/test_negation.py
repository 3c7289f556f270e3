"""`not` and overlapping `oneOf` (json_negation.py): the complement algebra against jsonschema,
then whole schemas on both backends, walked byte by byte against jsonschema."""

from __future__ import annotations

import json
import logging

import jsonschema
import pytest

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema
from constrained_spec.grammar.json_negation import complement, ways_to_fail
from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar

from schema_oracle import engine_of
from test_json_schema_keywords import _valid, _walk

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)

# values that tell the cases below apart: every type, keys present and absent, numbers around the bounds
POOL = [
    None, True, False, 0, 1, 2, -1, 2.5, 0.1, 3, "", "a", "ab", "abc", "b-]", "panel", [], [1], ["a"], [1, "a"], [{"a": 1}],
    {}, {"a": 1}, {"a": "x"}, {"b": 1}, {"a": 1, "b": 2}, {"a": 1, "c": True}, {"ps": "x"}, {"cmd": "x"}, {"ps": "x", "cmd": "y"},
    {"ps": 1}, {"t": "panel"}, {"t": "panel", "x": 1}, {"t": "other", "x": 1}, {"c": None}, {"a": {"v": 2}}, {"a": {"v": 2.5}},
    {"a": 1.0}, {"a": [1]}, {"a": [1, 2]}, {"a": [2]}, {"a": {}}, {"ps": "void"}, {"ps": "void", "cmd": "x"}, [1.0], [1, "b"], [[1]],
    [["a"]], [1, "a", None], [{"a": 1, "b": 2}],
]  # fmt: skip
OBJECT = {"type": "object"}
CLOSED_PS = {"type": "object", "additionalProperties": False, "properties": {"ps": {"type": "string"}}}
CLOSED_CMD = {"type": "object", "additionalProperties": False, "properties": {"cmd": {"type": "string"}}}
# (negated, context): complement(negated, context) conjoined with context must admit exactly
# the context's values that fail `negated`
EXPRESSIBLE = [
    ({"type": "string"}, {}),
    ({"type": "integer"}, {"type": "integer"}),
    ({"type": "integer", "minimum": 2, "maximum": 2}, {"type": "integer"}),
    ({"required": ["a"], "not": {"required": ["b"]}}, {}),
    ({"required": ["a", "b"]}, OBJECT),
    ({"properties": {"a": {"type": "string"}}}, {}),
    ({"properties": {"a": {"properties": {"v": {"type": "number", "minimum": 2.5}}}}}, {}),
    (CLOSED_PS, CLOSED_CMD),
    (CLOSED_CMD, {**CLOSED_PS, "required": ["ps"]}),
    ({"additionalProperties": {"type": "string"}, "properties": {"a": True}}, {"additionalProperties": False, "properties": {"a": True, "b": True}}),
    ({"if": {"properties": {"t": {"const": "panel"}}, "required": ["t"]}, "then": {"required": ["x"]}, "else": {"maxProperties": 1}}, {}),
    ({"enum": ["a", "ab", 1, 2.5, None, True]}, {}),
    ({"const": "b-]"}, {"type": "string"}),
    ({"minLength": 2}, {}),
    ({"maxItems": 0, "items": {"type": "string"}}, {}),
    ({"contains": {"type": "string"}}, {}),
    ({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, OBJECT),
    ({"anyOf": [{"type": "null"}, {"minimum": 2}]}, {}),
    ({"allOf": [{"type": "object"}, {"required": ["c"]}]}, {}),
    ({"dependentRequired": {"a": ["b"]}}, {}),
    ({"minProperties": 2}, OBJECT),
    ({"$ref": "#/$defs/named"}, {}),
    (CLOSED_PS, {}),  # an undeclared key of an open object: counted per subset of declared keys
    ({"additionalProperties": False, "properties": {"a": True, "b": {"type": "string"}}}, OBJECT),
    # objects and arrays except listed ones: a key absent, added or holding another value; another
    # length or item (Swagger 1.2's dataType: voidType's {"type": "void"} against modelType)
    ({"enum": [{"a": 1}, [1, "a"], {"a": [1]}, [[1]], {}, "ab"]}, {}),
    ({"const": {"ps": "void"}}, CLOSED_PS),
    ({"const": {"a": {"v": 2}}}, OBJECT),
    ({"enum": [[], [{"a": 1}], 0]}, {}),
    ({"pattern": "^a(?:b|c)$"}, {}),  # a pattern's complement, written without lookarounds (regular.py)
    ({"type": "string", "pattern": "b$"}, {"type": "string"}),
]
NOT_EXPRESSIBLE = [
    ({"pattern": "^(a)\\1$"}, {}),  # a backreference: not regular
    ({"multipleOf": 2}, {}),
    ({"type": "integer"}, {}),  # numbers that are not integers
    ({"properties": {"a": {"type": "integer"}}}, {}),
    ({"additionalProperties": False, "properties": {"a": True, "b": True, "c": True, "d": True}}, {}),  # > 3 declared, open context
    ({"uniqueItems": True}, {}),
    ({"contains": {"type": "string"}, "minContains": 2}, {}),
]
DEFS = {"named": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}


def _is_valid(value, schema) -> bool:
    return jsonschema.Draft202012Validator({**schema, "$defs": DEFS} if isinstance(schema, dict) else schema).is_valid(value)


def _has_not(schema) -> bool:
    if isinstance(schema, dict):
        return "not" in schema or any(_has_not(v) for v in schema.values())
    return isinstance(schema, list) and any(_has_not(v) for v in schema)


@pytest.mark.parametrize("negated, context", EXPRESSIBLE, ids=[json.dumps(n)[:40] for n, _ in EXPRESSIBLE])
def test_complement_matches_jsonschema(negated, context):
    found = complement(negated, context, lambda ref: DEFS[ref.rsplit("/", 1)[-1]])
    assert found is not None
    assert not _has_not(found), found  # for engines without `not`
    for value in POOL:
        expected = _is_valid(value, context) and not _is_valid(value, negated)
        assert _is_valid(value, {"allOf": [context, found]}) == expected, (value, found)


@pytest.mark.parametrize("negated, context", NOT_EXPRESSIBLE, ids=[json.dumps(n)[:40] for n, _ in NOT_EXPRESSIBLE])
def test_complement_refuses_what_it_cannot_say(negated, context):
    assert complement(negated, context, lambda ref: None) is None


@pytest.mark.parametrize("negated, context", NOT_EXPRESSIBLE + EXPRESSIBLE, ids=[json.dumps(n)[:40] for n, _ in NOT_EXPRESSIBLE + EXPRESSIBLE])
def test_partial_complement_is_never_wider(negated, context):
    """complement(partial=True): parts that cannot be said admit nothing, so the result is a
    subset of `context` minus `negated` (a narrowing, for positive use only), never None; where
    the exact complement exists and holds no reference, it is that complement."""
    found = complement(negated, context, lambda ref: DEFS[ref.rsplit("/", 1)[-1]], partial=True)
    assert found is not None and not _has_not(found), found
    for value in POOL:
        if _is_valid(value, {"allOf": [context, found]}):
            assert _is_valid(value, context) and not _is_valid(value, negated), (value, found)
    exact = complement(negated, context, lambda ref: DEFS[ref.rsplit("/", 1)[-1]])
    if exact is not None and "$ref" not in json.dumps(negated):
        assert found == exact


def test_partial_complement_keeps_the_ways_it_can_say():
    # a string holding "aa" twice apart: fails by another type (said) or by the pattern (a
    # backreference: not said)
    found = complement({"type": "string", "pattern": "(a)\\1"}, {}, lambda ref: None, partial=True)
    kept = [v for v in POOL if _is_valid(v, found)]
    assert kept and all(not isinstance(v, str) for v in kept)
    # a required key whose value is a recursive definition: absent, or not an object, is said;
    # failing deeper inside the cycle is not (references are followed 4 complements deep)
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}
    negated = {"required": ["a"], "properties": {"a": {"$ref": "#/$defs/tree"}}}
    assert complement(negated, OBJECT, lambda ref: tree) is None
    found = complement(negated, OBJECT, lambda ref: tree, partial=True)
    valid = lambda value, schema: jsonschema.Draft202012Validator({**schema, "$defs": {"tree": tree}}).is_valid(value)  # noqa: E731
    values = POOL + [{"a": {"kids": [1]}}, {"a": {"kids": [{"kids": [{"kids": [{"kids": [{"kids": [2]}]}]}]}]}}]
    kept = [v for v in values if valid(v, {"allOf": [OBJECT, found]})]
    assert all(not valid(v, negated) for v in kept)
    assert [v for v in values if isinstance(v, dict) and ("a" not in v or not isinstance(v["a"], dict))] == [v for v in kept if "a" not in v or not isinstance(v["a"], dict)]
    assert values[-1] not in kept  # failing five levels down the cycle is not said


# whole schemas with overlapping oneOf branches or negations, as real schemas write them
# (SchemaStore: appveyor's commands, JSON Feed's content, if/then manifests)
SCHEMAS = [
    ("closed-objects", {"oneOf": [{"type": "string"}, CLOSED_PS, CLOSED_CMD]},
     ['"x"', '{"ps":"a"}', '{"cmd":"b"}', "{}", '{"ps":"a","cmd":"b"}', '{"ps":1}', "1", '{"sh":"c"}']),
    ("required-not-required", {"type": "object", "properties": {"h": {"type": "string"}, "t": {"type": "string"}}, "oneOf": [
        {"required": ["h"], "not": {"required": ["t"]}}, {"required": ["t"], "not": {"required": ["h"]}}, {"required": ["t", "h"]}]},
     ['{"h":"a"}', '{"t":"b"}', '{"h":"a","t":"b"}', "{}", '{"x":1}', '{"h":1}']),
    ("integers-and-ranges", {"oneOf": [{"type": "integer", "minimum": 2, "maximum": 2}, {"type": "integer", "minimum": 0}]},
     ["2", "1", "0", "3", "-1", "2.5"]),
    ("enums-and-strings", {"oneOf": [{"enum": ["a", "b", 1]}, {"type": "string", "maxLength": 1}]},
     ['"a"', '"c"', '"ab"', "1", '""', "2"]),
    ("if-then-else", {"type": "object", "properties": {"t": {"enum": ["panel", "command"]}}, "required": ["t"],
                      "if": {"properties": {"t": {"const": "panel"}}}, "then": {"required": ["x"]}, "else": {"not": {"required": ["x"]}}},
     ['{"t":"panel","x":1}', '{"t":"panel"}', '{"t":"command"}', '{"t":"command","x":1}']),
    ("an-object-value-inside-an-open-branch", {"type": "object", "oneOf": [  # Swagger 1.2's dataType, its overlapping pair
        {"required": ["$ref"], "properties": {"$ref": {"type": "string"}}, "additionalProperties": False},
        {"enum": [{"type": "void"}]},
        {"required": ["type"], "properties": {"type": {"enum": ["string", "integer"]}, "format": {"type": "string"}}, "additionalProperties": False},
        {"required": ["type"], "properties": {"type": {"type": "string", "not": {"enum": ["string", "integer", "array"]}}}, "additionalProperties": False},
        {"required": ["type", "items"], "properties": {"type": {"const": "array"}, "items": {"type": "object"}}, "additionalProperties": False}]},
     ['{"type":"void"}', '{"type":"Pet"}', '{"$ref":"x"}', '{"type":"string","format":"d"}', '{"type":"array","items":{}}', '{"type":"array"}',
      '{"type":"void","x":1}', '{"type":"string"}', '{"$ref":"x","type":"Pet"}', "{}"]),
    ("not-of-a-closed-object", {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "integer"}, "b": True},
                                "not": {"additionalProperties": False, "properties": {"a": {"minimum": 5}}}},
     ["{}", '{"a":1}', '{"a":7}', '{"b":null}', '{"a":7,"b":1}']),
]


@pytest.mark.parametrize("name, schema, texts", SCHEMAS, ids=[name for name, _, _ in SCHEMAS])
def test_overlapping_one_of_and_not_on_both_backends(name, schema, texts):
    """The default backend (llguidance, the negations rewritten without `not`) is exact. Our
    compiler is sound on the same schemas: it may refuse one by name, or miss a valid text where
    its Lark lexer splits a key differently in two branches (Limitations), never accept an
    invalid one (`_walk` also checks every prefix where EOS is allowed)."""
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar), name  # no `not` left: llguidance takes it
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    try:
        compiled = compile_json_schema(schema, BYTES, backend="native")
    except GrammarError as exc:
        assert " at /" in str(exc)
        return
    for text in texts:
        assert not _walk(compiled, schema, text) or _valid(schema, text), text


def test_numbers_that_are_not_integers_natively():
    """`not integer` where numbers are allowed: fractions (and Python's 1e-05 spelling) only."""
    schema = {"type": "object", "properties": {"v": {"not": {"type": "integer"}}}, "required": ["v"]}
    compiled = compile_json_schema(schema, BYTES, backend="native")
    for text, ok in [('{"v":1.5}', True), ('{"v":1}', False), ('{"v":1.0}', False), ('{"v":-0.25}', True), ('{"v":1e-05}', True),
                     ('{"v":"s"}', True), ('{"v":null}', True), ('{"v":2.50}', True), ('{"v":1.e-5}', False), ('{"v":1.5e-3}', True),
                     ('{"v":1.}', False), ('{"v":.5}', False)]:  # fmt: skip
        assert _valid(schema, text) == ok, text
        assert _walk(compiled, schema, text) == ok, text
    with pytest.raises(GrammarError, match="not integers"):  # next to a bound: refused by name
        compile_json_schema({"minimum": 1, "not": {"type": "integer"}}, BYTES, backend="native")



@pytest.mark.parametrize("schema", [
    {"type": "object", "required": ["a"], "properties": {"a": {}, "b": False}, "minProperties": 2, "additionalProperties": {"type": "integer"}},
    {"type": "object", "not": {"additionalProperties": False, "properties": {"a": {"type": "string"}, "b": True}},
     "additionalProperties": {"type": "integer"}},
], ids=["one-more-than-required", "not-of-a-closed-object-in-an-open-one"])
def test_undeclared_key_counted_natively(schema):
    """minProperties one above the required count where every other declared key is absent: one
    undeclared key at least (the way `not` of a closed object says "a key outside these")."""
    compiled = compile_json_schema(schema, BYTES, backend="native")
    for text in ["{}", '{"a":1}', '{"a":1,"c":2}', '{"c":2}', '{"a":"x"}', '{"a":1,"b":2}', '{"b":1}', '{"a":"x","c":1}', '{"a":1,"c":"s"}']:
        assert _walk(compiled, schema, text) == _valid(schema, text), text


SWAGGER_RESPONSES = {  # Swagger 2.0's `responses`: status codes or x- extensions, not only extensions
    "$defs": {"extension": {"additionalProperties": True, "additionalItems": True}, "response": {"type": "object", "required": ["d"]}},
    "type": "object", "minProperties": 1, "additionalProperties": False,
    "patternProperties": {"^([0-9]{3})$|^(default)$": {"$ref": "#/$defs/response"}, "^x-": {"$ref": "#/$defs/extension"}},
    "not": {"type": "object", "additionalProperties": False, "patternProperties": {"^x-": {"$ref": "#/$defs/extension"}}},
}


@pytest.mark.parametrize("backend", ["default", "native"])
def test_some_key_outside_the_negated_patterns(backend):
    """`not` of "every key is an extension" beside patternProperties: some member of a kind the
    negated schema refuses, written passing-members* failing-member any-members* (was refused:
    no positive keyword says "some key matches P")."""
    schema = SWAGGER_RESPONSES
    compiled = compile_json_schema(schema, BYTES, backend=backend)
    texts = ["{}", '{"200":{"d":1}}', '{"x-a":1}', '{"x-a":1,"x-b":[2]}', '{"x-a":1,"404":{"d":0}}', '{"default":{"d":1},"x-a":{}}',
             '{"x-a":1,"x-b":2,"500":{"d":3},"x-c":4,"201":{"d":5}}', '{"200":{}}', '{"abc":{"d":1}}', '{"x-a":1,"200":1}']  # fmt: skip
    assert {_valid(schema, t) for t in texts} == {True, False}
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    # a kind the negated schema neither always refuses nor always takes: still refused by name
    partly = {**schema, "not": {"additionalProperties": False, "patternProperties": {"^x-": {"type": "integer"}}}}
    with pytest.raises(GrammarError, match="not at /not"):
        compile_json_schema(partly, BYTES, backend="native")


def test_strings_except_long_words_is_flat_and_exact():
    """Every string but the given words, for short words (nested) and words past 40 characters
    (flat: nested, two groups a character passed Rust regex-syntax's nesting limit of 250, and
    llguidance refused utcm-monitor). Seeded: 200 word sets over {a, b}, 60 strings each (the
    words, their prefixes and one-character extensions, random strings), against membership."""
    import random
    import re

    from constrained_spec.grammar.json_negation import _strings_except

    rng = random.Random(0)
    for trial in range(200):
        words = ["".join(rng.choice("ab") for _ in range(rng.randint(0, 50 if trial % 2 else 5))) for _ in range(rng.randint(1, 4))]
        pattern = _strings_except(words)
        regex = re.compile("^" + pattern + "$")
        if max(map(len, words)) > 40:
            assert pattern.count("(") < 4 * sum(map(len, words)) and "(?:(?:(?:(?:" not in pattern  # flat
        for _ in range(60):
            word = rng.choice(words)
            text = rng.choice([word, word[: rng.randint(0, len(word))] + rng.choice(["", "a", "b"]),
                               "".join(rng.choice("abc") for _ in range(rng.randint(0, 55)))])
            assert bool(regex.match(text)) == (text not in words), (words, text)


def test_overlapping_one_of_keeps_a_declared_key_failing_beside_open_extras():
    """Branch 1 fails by `K` absent, by `K` other than "b", or by an undeclared key holding a
    non-integer; the last has no union of positive schemas ("some key, any name but K"), so
    `B_2 and not B_1` keeps the first two ways (a narrowing, logged). {"K":1} and {"K":"c"} were
    refused before: the whole properties/additionalProperties group was left out with it."""
    branch = {"type": "object", "properties": {"K": {"const": "b"}}, "additionalProperties": {"type": "integer"}, "required": ["K"]}
    schema = {"oneOf": [branch, {"type": "object"}]}
    group = {"properties": branch["properties"], "additionalProperties": branch["additionalProperties"]}
    assert ways_to_fail(group, {}) is None
    assert ways_to_fail(group, {}, partial=True) == [{"type": "object", "required": ["K"], "properties": {"K": {"not": {"const": "b"}}}}]
    compiled = compile_json_schema(schema, BYTES)
    for text, accepted in [('{"K":1}', True), ('{"K":"c"}', True), ("{}", True), ('{"a":"x"}', True), ('{"K":"b"}', False),
                           ('{"K":"b","a":1}', False), ('{"K":"b","a":"x"}', False), ("[]", False)]:  # fmt: skip
        assert _walk(compiled, schema, text) == accepted, text
        assert not accepted or _valid(schema, text), text  # the last one left out is valid: the narrowing
    compiled = compile_json_schema(schema, BYTES, backend="native")
    for text in ['{"K":1}', '{"K":"c"}', '{"K":"b"}', '{"K":"b","a":1}', '{"K":"b","a":"x"}']:
        assert _walk(compiled, schema, text) == (text in ('{"K":1}', '{"K":"c"}')), text


def test_overlapping_one_of_through_a_cycle_is_narrowed_soundly(caplog):
    """Branch 0 and not branch 1: branch 1 fails by a missing `value`, a `kind` outside its
    enum, or a `value` failing a recursive definition; the complement of a cycle cannot be
    written without `not`, so the default backend follows it a few levels and leaves the rest
    out, logging the narrowing: every text it accepts is valid, and so is every valid text that
    fails branch 1 near the surface."""
    schema = {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
              "type": "object", "properties": {"kind": {"enum": ["leaf", "tree", "both"]}, "value": {}}, "oneOf": [
                  {"properties": {"kind": {"enum": ["leaf", "both"]}}, "required": ["kind"]},
                  {"properties": {"kind": {"enum": ["tree", "both"]}, "value": {"$ref": "#/$defs/node"}}, "required": ["value"]}]}
    with caplog.at_level(logging.INFO, logger="constrained_spec.grammar.json_schema"):
        compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert "/oneOf/1: values that fail this schema only in ways not expressible" in caplog.text
    exact = ['{"kind":"leaf"}', '{"kind":"tree","value":{}}', '{"value":{"kids":[]}}', '{"kind":"both"}', '{"kind":"both","value":{}}',
             '{"kind":"leaf","value":{}}', '{"kind":"tree"}', "{}", '{"kind":"leaf","value":1}', '{"kind":"tree","value":{"kids":[{}]}}',
             '{"kind":"both","value":1}', '{"kind":"both","value":{"kids":[]}}']
    for text in exact:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    narrowed = '{"kind":"both","value":{"kids":[{"kids":[{"kids":[{"kids":[1]}]}]}]}}'  # valid: fails branch 1 only deep in the cycle
    assert _valid(schema, narrowed) and not _walk(compiled, schema, narrowed)
