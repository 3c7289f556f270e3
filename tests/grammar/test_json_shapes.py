"""Misshapen keyword values are refused by name (grammar/json_shapes.py), never a Python error.

The grid below found, before the check existed, TypeErrors from our compiler on `type`,
`format` and `required` values of the wrong shape (a GitHub schema's draft-3 `"required": true`
beside `"type": "object"` among them)."""

from __future__ import annotations

import itertools

import pytest

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)

KEYWORDS = [
    "type", "enum", "const", "required", "properties", "patternProperties", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains",
    "minProperties", "maxProperties", "propertyNames", "dependencies", "dependentRequired", "dependentSchemas", "allOf",
    "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs", "definitions", "unevaluatedProperties", "unevaluatedItems",
]  # fmt: skip
VALUES = [True, "x", 3, -1, 1.5, None, [], [1], {}, {"a": 1}, ["a", 1]]
BASES = [{}, {"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "string"}, {"type": "array"}, {"type": "integer"}]


@pytest.mark.parametrize("keyword", KEYWORDS)
def test_any_value_of_a_keyword_compiles_or_is_refused_by_name(keyword):
    """11 values x 5 neighbourhoods x (at the root, in a property, in a draft-3 property): 165 schemas a keyword, both backends."""
    for base, value in itertools.product(BASES, VALUES):
        schema = {**base, keyword: value}
        draft3 = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object", "properties": {"p": schema}}
        for whole in (schema, {"type": "object", "properties": {"p": schema}}, draft3):
            for backend in ("native", "default"):
                try:
                    compile_json_schema(whole, BYTES, backend=backend)
                except GrammarError:
                    pass


@pytest.mark.parametrize("schema, message", [
    ({"type": 3}, "keyword 'type' at /type must be a type name or a non-empty array of them, got 3"),
    ({"type": []}, "keyword 'type' at /type must be a type name"),
    ({"properties": {"a": {"required": "a", "type": "object"}}}, "keyword 'required' at /properties/a/required must be an array of property names"),
    ({"items": [{"minLength": "3"}]}, "keyword 'minLength' at /items/0/minLength must be a non-negative integer, got \"3\""),
    ({"format": ["date"]}, "keyword 'format' at /format must be a string"),
    ({"anyOf": []}, "keyword 'anyOf' at /anyOf must be a non-empty array of schemas"),
    ({"dependencies": {"a": ["b", 1]}}, "keyword 'dependencies' at /dependencies/a must list property names"),
    ({"$ref": "#/definitions/x", "definitions": {"x": 3}}, "schema at /definitions/x must be an object or a boolean, got 3"),
    ({"multipleOf": 0}, "keyword 'multipleOf' at /multipleOf must be a number above 0"),
    ({"maximum": True}, "keyword 'maximum' at /maximum must be a number, got true"),
])  # fmt: skip
def test_a_misshapen_value_is_named(schema, message):
    for backend in ("native", "default"):
        with pytest.raises(GrammarError, match=message.replace("[", r"\[").replace("(", r"\(")):
            compile_json_schema(schema, BYTES, backend=backend)


def test_shapes_the_drafts_allow_compile():
    for schema in ({"type": ["string", "null"]}, {"minLength": 2.0}, {"exclusiveMinimum": True, "minimum": 1, "$schema": "http://json-schema.org/draft-04/schema#"},
                   {"items": [{"type": "string"}]}, {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}, {"enum": [1]}):
        compile_json_schema(schema, BYTES, backend="native")
