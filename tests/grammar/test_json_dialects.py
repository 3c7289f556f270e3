"""Keywords a schema's declared draft lacks are ignored, as that draft's validators ignore them
(grammar/json_dialects.py); walks checked against jsonschema's validator for the declared draft."""

from __future__ import annotations

import logging

import pytest

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema
from constrained_spec.grammar.json_dialects import declared_draft, may_use_later_keywords, without_later_keywords

from test_json_schema_keywords import _valid, _walk

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize("uri, draft", [
    (DRAFT4, 4), ("https://json-schema.org/draft-06/schema", 6), (DRAFT7, 7), ("http://json-schema.org/draft-03/schema#", 3),
    ("https://json-schema.org/draft/2019-09/schema", 2019), ("https://json-schema.org/draft/2020-12/schema", 2020),
    ("http://json-schema.org/schema#", None), ("https://iglucentral.com/schemas/x/jsonschema/1-0-0#", None), (None, None),
])
def test_declared_draft(uri, draft):
    assert declared_draft(uri) == draft


def test_later_keywords_leave_each_resource_by_its_own_draft():
    schema = {
        "$schema": DRAFT4, "type": "object",
        "properties": {"const": {"const": 1}, "c": {"contains": {"type": "string"}, "default": {"const": 2}, "enum": [{"if": 1}]}},
        "propertyNames": {"maxLength": 3}, "if": {"required": ["c"]}, "then": {"required": ["const"]},
        "definitions": {"later": {"$schema": DRAFT7, "if": {"const": 1}, "then": {"const": 1}, "dependentRequired": {"a": ["b"]}}},
    }
    left_out: dict[str, str] = {}
    out = without_later_keywords(schema, left_out)
    assert out == {
        "$schema": DRAFT4, "type": "object",
        "properties": {"const": {}, "c": {"default": {"const": 2}, "enum": [{"if": 1}]}},  # a property named const, data untouched
        "definitions": {"later": {"$schema": DRAFT7, "if": {"const": 1}, "then": {"const": 1}}},
    }
    assert left_out == {"const": "/properties/const/const", "contains": "/properties/c/contains", "propertyNames": "/propertyNames",
                        "if": "/if", "then": "/then", "dependentRequired": "/definitions/later/dependentRequired"}
    unchanged = {"type": "object", "properties": {"a": {"const": 1}}, "dependentRequired": {"a": ["b"]}}  # no $schema: every keyword
    assert without_later_keywords(unchanged, {}) == unchanged
    import json

    assert may_use_later_keywords(json.dumps(schema)) and not may_use_later_keywords(json.dumps(unchanged))


def test_a_draft_4_one_of_of_consts_is_what_draft_4_validators_say(caplog):
    """SchemaStore's web-manifest: draft 4 has no `const`, so each orientation branch is `{}`,
    every value meets all of them, and no orientation is valid: generating one was an invalid
    output for a draft-4 validator (found by benchmarks/sweep_schemas.py)."""
    schema = {"$schema": DRAFT4, "type": "object", "properties": {
        "orientation": {"oneOf": [{"const": "any"}, {"const": "landscape"}]}, "name": {"type": "string"},
        "kind": {"const": "app"}, "tags": {"type": "array", "contains": {"const": "x"}}}}
    with caplog.at_level(logging.INFO, logger="constrained_spec.grammar.json_schema"):
        compiled = compile_json_schema(schema, BYTES)
    assert "ignored as validators do: const (at /properties/orientation/oneOf/0/const)" in caplog.text
    for text in ('{"orientation":"landscape"}', '{"orientation":"any"}', '{"name":"x"}', '{"kind":"app"}', '{"kind":"web"}',
                 '{"tags":["y"]}', '{"tags":[]}', "{}"):
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    for name in ("orientation", "kind", "tags"):  # each member in draft 7: const and contains hold
        seven = {"$schema": DRAFT7, "type": "object", "properties": {name: schema["properties"][name]}}
        compiled = compile_json_schema(seven, BYTES)
        for text in ('{"orientation":"landscape"}', '{"orientation":"up"}', '{"kind":"web"}', '{"kind":"app"}', '{"tags":["y"]}', '{"tags":["x"]}', "{}"):
            if text == "{}" or f'"{name}"' in text:  # (undeclared keys: a documented narrowing where a regex grows too large)
                assert _walk(compiled, seven, text) == _valid(seven, text), (name, text)
    with pytest.raises(GrammarError, match="keyword 'const' at /properties/orientation/oneOf/0/const is not part of the draft"):
        compile_json_schema(schema, BYTES, strict=True)
