"""unevaluatedProperties read as additionalProperties where the keys it sees are static."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from constrained_spec.grammar import GrammarError, compile_json_schema
from constrained_spec.grammar.json_unevaluated import unevaluated_as_additional
from test_json_schema_keywords import BYTES, _valid, _walk

SUITE_FILE = Path(__file__).parent.parent / "data" / "json_schema_test_suite" / "unevaluatedProperties.json"
DEFS = {"base": {"type": "object", "properties": {"name": {"type": "string"}}, "patternProperties": {"^x-": {"type": "integer"}}},
        "named": {"allOf": [{"$ref": "#/$defs/base"}], "properties": {"kind": {"const": "n"}}}}  # fmt: skip
SCHEMAS = [  # SchemaStore's forms: enonic-xp's styles (allOf of a base), yamllint's ($ref beside properties)
    ("allOf-of-a-base", {"$defs": DEFS, "allOf": [{"$ref": "#/$defs/base"}], "properties": {"size": {"type": "integer"}},
                         "unevaluatedProperties": False}),
    ("ref-beside-properties", {"$defs": DEFS, "$ref": "#/$defs/named", "properties": {"size": {"type": "integer"}},
                               "unevaluatedProperties": {"type": "boolean"}}),
    ("branches-that-evaluate-nothing", {"properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                                        "oneOf": [{"required": ["a"]}, {"required": ["b"]}], "unevaluatedProperties": False}),
]  # fmt: skip
# (at most one declared key per text beside patterned ones: key order is a documented narrowing)
TEXTS = ['{}', '{"name":"n"}', '{"size":1}', '{"name":"n","x-b":2}', '{"x-a":1}', '{"x-a":"s"}', '{"other":1}', '{"other":true}', '{"kind":"n"}',
         '{"kind":"m"}', '{"size":"s"}', '{"a":"s"}', '{"b":"s"}', '{"a":"s","b":"t"}', '{"a":"s","c":1}', '{"name":1}']  # fmt: skip


@pytest.mark.parametrize("backend", ["default", "native"])
@pytest.mark.parametrize("name, schema", SCHEMAS, ids=[n for n, _ in SCHEMAS])
def test_static_unevaluated_keys_walk_as_jsonschema_judges(name, schema, backend):
    """Each text of TEXTS (some valid, some not, for every schema) walks as jsonschema judges it
    on the default backend; our compiler is sound on them (it generates undeclared keys beside
    patternProperties only where they match a pattern: a documented narrowing)."""
    compiled = compile_json_schema(schema, BYTES, closed_objects=False, backend=backend)
    verdicts = [_valid(schema, t) for t in TEXTS]
    assert True in verdicts and False in verdicts
    for text, valid in zip(TEXTS, verdicts):
        walked = _walk(compiled, schema, text)
        assert walked == valid if backend == "default" else not walked or valid, text


def test_the_suite_file_on_the_default_backend():
    """JSON-Schema-Test-Suite's unevaluatedProperties.json (41 schemas): every one compiled is
    exact on the default backend, and most compile (the rest are refused by name)."""
    compiled_cases = 0
    for case in json.loads(SUITE_FILE.read_text()):
        try:
            compiled = compile_json_schema(case["schema"], BYTES, closed_objects=False)
        except GrammarError as exc:
            assert " at /" in str(exc) or "unevaluated" in str(exc), exc
            continue
        compiled_cases += 1
        for test in case["tests"]:
            ids = list(json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False).encode()) + [256]
            accepted = compiled.matcher().validate_tokens(ids) == len(ids)
            assert accepted == test["valid"], (case["description"], test["description"])
    assert compiled_cases >= 30


def test_the_caller_schema_is_untouched_and_branches_that_evaluate_keys_stay():
    schema = {"$defs": DEFS, "allOf": [{"$ref": "#/$defs/base"}], "unevaluatedProperties": False}
    before = copy.deepcopy(schema)
    out = unevaluated_as_additional(schema)
    assert schema == before
    assert out["additionalProperties"] is False and set(out["properties"]) == {"name"} and set(out["patternProperties"]) == {"^x-"}
    conditional = {"anyOf": [{"properties": {"a": True}}, {"required": ["b"]}], "unevaluatedProperties": False}
    assert unevaluated_as_additional(conditional) is conditional
    with pytest.raises(GrammarError, match="unevaluatedProperties"):
        compile_json_schema(conditional, BYTES, backend="native")
