"""Keywords a schema's declared draft lacks are ignored, as that draft's validators ignore them
(grammar/json_dialects.py); walks checked against jsonschema's validator for the declared draft."""

from __future__ import annotations

import logging

import pytest

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema
from constrained_spec.grammar.json_dialects import declared_draft, in_declared_drafts, may_hold_older_forms

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
    out = in_declared_drafts(schema, left_out, {})
    assert out == {
        "$schema": DRAFT4, "type": "object",
        "properties": {"const": {}, "c": {"default": {"const": 2}, "enum": [{"if": 1}]}},  # a property named const, data untouched
        "definitions": {"later": {"$schema": DRAFT7, "if": {"const": 1}, "then": {"const": 1}}},
    }
    assert left_out == {"const": "/properties/const/const", "contains": "/properties/c/contains", "propertyNames": "/propertyNames",
                        "if": "/if", "then": "/then", "dependentRequired": "/definitions/later/dependentRequired"}
    unchanged = {"type": "object", "properties": {"a": {"const": 1}}, "dependentRequired": {"a": ["b"]}}  # no $schema: every keyword
    assert in_declared_drafts(unchanged, {}, {}) == unchanged
    import json

    assert may_hold_older_forms(json.dumps(schema)) and not may_hold_older_forms(json.dumps(unchanged))


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
    with pytest.raises(GrammarError, match="keyword 'const' at /properties/orientation/oneOf/0/const is not read by the draft"):
        compile_json_schema(schema, BYTES, strict=True)


def test_a_refs_siblings_are_ignored_where_the_declared_draft_ignores_them(caplog):
    """Drafts 3 to 7 read only the `$ref` of an object holding one: a sibling `minimum` bound
    nothing (valid instances were refused), and a sibling `id` moved the base URI the `$ref`
    resolved against (the suite's draft-3 ref.json: a string accepted where the reference
    names a number). 2019-09 on, and without `$schema`, siblings apply."""
    for draft, applies in ((DRAFT4, False), (DRAFT7, False), ("https://json-schema.org/draft/2020-12/schema", True), (None, True)):
        schema = {"definitions": {"a": {"type": "integer"}}, "type": "object",
                  "properties": {"x": {"$ref": "#/definitions/a", "minimum": 5, "description": "d"}}}
        if draft:
            schema["$schema"] = draft
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="constrained_spec.grammar.json_schema"):
            compiled = compile_json_schema(schema, BYTES, backend="native")
        for text in ('{"x":1}', '{"x":7}', '{"x":"a"}'):
            assert _walk(compiled, schema, text) == _valid(schema, text), (draft, text)
        assert ("minimum (at /properties/x/minimum)" in caplog.text) is not applies
        assert "description (at" not in caplog.text
    moved = {"$schema": DRAFT7, "$id": "http://example.com/base/", "definitions": {
        "foo": {"$id": "http://example.com/foo.json", "type": "string"},
        "base_foo": {"$id": "foo.json", "type": "number"}},
        "allOf": [{"$id": "http://example.com/", "$ref": "foo.json"}]}
    compiled = compile_json_schema(moved, BYTES, backend="native")
    assert not _walk(compiled, moved, '"a"') and _walk(compiled, moved, "1")
    with pytest.raises(GrammarError, match="keyword 'minimum' at /properties/x/minimum is not read by the draft"):
        compile_json_schema({"$schema": DRAFT7, "properties": {"x": {"$ref": "#/definitions/a", "minimum": 5}},
                             "definitions": {"a": {}}}, BYTES, strict=True)


def test_a_boolean_required_is_draft_3s_form(caplog):
    """A GitHub schema's `"required": true` beside `"type": "object"` crashed our compiler
    (TypeError). Where draft 3 is declared it requires the property (json_dialects); elsewhere
    it is no keyword of the schema's draft: left out and logged, as later drafts' validators read it."""
    inner = {"type": "object", "properties": {"a": {"type": "object", "required": True}, "b": {"type": "string", "required": False}}}
    for backend in ("native", "default"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="constrained_spec.grammar.json_schema"):
            compiled = compile_json_schema(inner, BYTES, backend=backend)
        assert "required (at /properties/a/required)" in caplog.text
        assert _walk(compiled, {}, "{}") and _walk(compiled, {}, '{"a":{}}')
        declared = {"$schema": "http://json-schema.org/draft-03/schema#", **inner}
        compiled = compile_json_schema(declared, BYTES, backend=backend)
        for text in ("{}", '{"a":{}}', '{"b":"x"}', '{"a":{},"b":"x"}'):
            assert _walk(compiled, declared, text) == _valid(declared, text), (backend, text)
