"""json_subset.within (a conservative subset proof) against jsonschema on sampled instances."""

from __future__ import annotations

import itertools
import re

import jsonschema
from constrained_spec.grammar.json_subset import within

DEFS = {"r": {"type": "object", "additionalProperties": False, "required": ["t"], "properties": {"t": {"enum": ["r"]}, "u": {"type": "string"}}},
        "c": {"type": "object", "required": ["t"], "properties": {"t": {"type": "string"}}}}
INSTANCES = [None, 1, 2.5, True, False, 1.0, "r", "", [], [1], [{}], [{"t": "r"}], [{"t": "r"}, {"t": "r"}], {}, {"t": "r"}, {"t": 1}, {"t": "r", "u": "x"},
             {"t": "r", "u": 1}, {"t": "x", "v": 1}, {"u": "x"}, {"t": "r", "x": None}, [{"t": 1}], [{"t": "r", "u": 2}]]
SCHEMAS = [True, {}, {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"const": 1}, {"enum": [1, "r", None]}, {"type": ["string", "null"]}, {"type": "string", "enum": ["r"]}, {"enum": ["r"]}, {"$ref": "#/$defs/r"}, {"$ref": "#/$defs/c"},
           {"type": "object", "anyOf": [{"$ref": "#/$defs/c"}, {"type": "object", "required": ["u"]}]},
           {"type": "array", "items": {"$ref": "#/$defs/r"}}, {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/r"}},
           {"type": "array", "items": {"$ref": "#/$defs/c"}}, {"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/c"}]}},
           {"type": "array"}, {"type": "object", "properties": {"t": {"type": "string"}}}, {"type": "object", "additionalProperties": False},
           {"type": "object", "properties": {"u": {"type": "string"}}, "additionalProperties": False},
           {"type": "object", "properties": {"t": {"enum": ["r"]}}, "additionalProperties": False},
           {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/r"}]}, {"minimum": 1}, {"minimum": 1, "maximum": 3}]


def _deref(schema):
    while isinstance(schema, dict) and set(schema) == {"$ref"}:
        schema = DEFS[schema["$ref"].split("/")[-1]]
    return schema


def _valid(schema, instance) -> bool:
    return jsonschema.Draft202012Validator({**schema, "$defs": DEFS} if isinstance(schema, dict) else schema).is_valid(instance) if isinstance(schema, dict) else schema


def test_within_is_never_wrong():
    """Every pair of SCHEMAS: where within(p, q) holds, no instance valid under p fails q."""
    proven = 0
    for p, q in itertools.product(SCHEMAS, repeat=2):
        if within(p, q, _deref):
            proven += 1
            for instance in INSTANCES:
                assert not _valid(p, instance) or _valid(q, instance), (p, q, instance)
    assert proven >= 100, proven  # 108 of 729 pairs: the rules prove more than p == q (27)


def test_within_proves_what_the_rewrite_needs():
    related = {"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/c"}]}}
    assert within({"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/r"}}, related, _deref)
    assert within({"$ref": "#/$defs/r"}, {"$ref": "#/$defs/c"}, _deref)
    assert not within({"$ref": "#/$defs/c"}, {"$ref": "#/$defs/r"}, _deref)
    assert not within({"type": "object", "properties": {"x": {}}, "additionalProperties": False}, {"type": "object", "additionalProperties": False}, _deref)
