"""Key order on shapes real schemas use, each found refusing valid instances (issue 11).

Each case is a small schema with the construction a corpus schema used (named below) and a set
of keys with one value each. Every arrangement of every subset of the keys is walked byte by byte
with EOS on a byte vocabulary: nothing jsonschema refuses is accepted, the arrangement the corpus
instance used (refused before) is accepted, and the count of valid arrangements accepted is
pinned (where it is below the valid ones, some keys still keep schema order).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import jsonschema
import pytest

from constrained_spec.grammar import Vocabulary, compile_json_schema

_VOCAB = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)

_CLOSED_A = {"type": "object", "additionalProperties": False, "required": ["status", "x"],
             "properties": {"x": {"type": "string"}, "status": {"const": "ok"}}}
_CLOSED_B = {"type": "object", "additionalProperties": False, "required": ["status", "y"],
             "properties": {"y": {"type": "string"}, "status": {"const": "err"}}}

# name -> (schema, key -> value text, the arrangement a corpus instance used, valid arrangements accepted)
CASES = {
    # SchemaStore chrome-manifest, schema-app: a key the root declares is required again by a
    # branch; it kept every root key declared before it in schema order
    "required-again-in-a-branch": (
        {"type": "object", "properties": {"v": {"type": "integer"}, "p": {"type": "string"}},
         "anyOf": [{"properties": {"w": {"type": "string"}}}, {"required": ["v"], "properties": {"v": {"minimum": 5}}}]},
        {"v": "3", "w": '"x"', "p": '"y"', "q": "1"}, ["v", "w", "p"], 32),
    # SchemaStore schema-app, block: if/then on a required kind (the dispatch's branches require it again)
    "condition-on-a-required-kind": (
        {"type": "object", "properties": {"a": {}, "t": {"enum": ["x", "y"]}, "b": {"type": "object"}}, "required": ["t"],
         "allOf": [{"if": {"properties": {"t": {"const": "x"}}}, "then": {"properties": {"c": {"type": "integer"}}}}]},
        {"t": '"x"', "c": "1", "b": "{}", "a": "null"}, ["t", "c", "b"], 10),
    # SchemaStore v4-config: conditions on a kind the node requires (each dispatch branch required it again)
    "conditions-on-a-kind-the-node-requires": (
        {"type": "object", "required": ["p"], "properties": {"a": {}, "s": {}, "p": {"enum": ["x", "y"]}},
         "allOf": [{"if": {"properties": {"p": {"const": "x"}}}, "then": {"properties": {"t": {"type": "integer"}}}},
                   {"if": {"properties": {"p": {"const": "y"}}}, "then": {"properties": {"u": {"type": "integer"}}}}]},
        {"a": "1", "p": '"x"', "t": "2", "s": "3"}, ["a", "p", "t", "s"], 49),
    # SchemaStore bootstraprc: a `not` of a required key is written with the key declared `false`
    "a-key-declared-false": (
        {"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
                                     {"not": {"properties": {"e": {}}, "required": ["e"]}}]},
        {"a": "1", "b": "2", "e": "3", "q": "4"}, ["b", "a"], 16),
    # SchemaStore chrome-manifest: draft 7 `dependencies` with a schema
    "dependency-schema": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "dependencies": {"c": {"not": {"required": ["b"]}}}},
        {"a": '"x"', "b": '"y"', "c": "1", "q": "2"}, ["b", "a"], 27),
    # JSONSchemaBench Handwritten dep7: the same in an object with a property count (llguidance
    # takes it only with every declared key required: the key is required in its branch there)
    "dependency-schemas-in-a-counted-object": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "patternProperties": {"^[a-e]$": True},
         "additionalProperties": False, "maxProperties": 2,
         "allOf": [{"dependencies": {"a": {"anyOf": [{"required": ["c"]}, {"required": ["b"]}]}, "b": {"not": {"required": ["c"]}},
                                     "c": {"not": {"required": ["d"]}}, "d": {"not": {"required": ["e"]}}, "e": {"not": {"required": ["a"]}}}},
                   {"required": ["a"]}]},
        {"a": "true", "b": "true", "c": "true", "d": "true", "e": "true"}, ["a", "b"], 2),
    # SchemaStore lintstagedrc: names an object must not use (llguidance has no propertyNames)
    "property-names-not-listed": (
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
         "propertyNames": {"not": {"enum": ["c"]}}, "additionalProperties": {"type": "string"}},
        {"a": '"x"', "b": "1", "c": '"y"', "d": '"z"'}, ["b", "d", "a"], 16),
    # GitHub o61004, SchemaStore swagger-2.0: a union of tagged objects beside a branch that is no
    # object of its own (an empty closed object here): the kind first, as the instance wrote it
    "a-union-with-an-untagged-branch": (
        {"oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}, {"type": "object", "additionalProperties": False, "properties": {}}],
         "$defs": {"A": _CLOSED_A, "B": _CLOSED_B}},
        {"status": '"ok"', "x": '"a"', "y": '"b"', "q": "1"}, ["status", "x"], 3),
    # SchemaStore solidarity: union branches naming their kind with a few values each
    "kinds-listed-as-enums": (
        {"anyOf": [{"type": "object", "required": ["rule", "location"],
                    "properties": {"location": {"type": "string"}, "platform": {"type": "string"}, "rule": {"enum": ["dir", "directory"]}}},
                   {"type": "object", "required": ["rule", "binary"],
                    "properties": {"binary": {"type": "string"}, "platform": {"type": "string"}, "rule": {"enum": ["cli"]}}}]},
        {"rule": '"dir"', "location": '"/x"', "platform": '"linux"', "binary": '"b"'}, ["rule", "location", "platform"], 12),
    # SchemaStore kustomization: closed union branches told apart only by which key they require
    "branches-told-apart-by-their-keys": (
        {"type": "object", "oneOf": [
            {"required": ["path"], "additionalProperties": False,
             "properties": {"options": {"type": "boolean"}, "path": {"type": "string"}, "target": {"type": "string"}}},
            {"required": ["patch"], "additionalProperties": False,
             "properties": {"options": {"type": "boolean"}, "patch": {"type": "string"}, "target": {"type": "string"}}}]},
        {"target": '"t"', "path": '"p"', "options": "true", "patch": '"q"'}, ["target", "path"], 22),
    # SchemaStore travis' deploy: plain allOf parts beside a union part (read as the node's own keys,
    # which go into each branch: llguidance wrote the parts' keys before each branch's kind)
    "plain-parts-beside-a-union": (
        {"allOf": [{"properties": {"on": {"type": "integer"}}},
                   {"oneOf": [{"properties": {"p": {"enum": ["a"]}, "x": {}}, "required": ["p", "x"]},
                              {"properties": {"p": {"enum": ["b"]}}, "required": ["p"]}]}]},
        {"p": '"a"', "x": "1", "on": "2", "q": "3"}, ["p", "x", "on"], 7),
    # the same with the union's branches copied kind first themselves (`x` declared before the kind):
    # the spread takes the union part's branches, which are not copied again as its own node's
    "plain-parts-beside-a-union-of-late-kinds": (
        {"allOf": [{"properties": {"on": {"type": "integer"}}},
                   {"oneOf": [{"properties": {"x": {}, "p": {"enum": ["a"]}}, "required": ["p", "x"]},
                              {"properties": {"p": {"enum": ["b"]}}, "required": ["p"]}]}]},
        {"p": '"a"', "x": "1", "on": "2", "q": "3"}, ["p", "x", "on"], 12),
    # GitHub o64859: the union part first, a plain part requiring keys after it: written in part
    # order, the branch's keys first (the spread would put the plain part's required keys first)
    "a-union-part-before-plain-parts": (
        {"allOf": [{"oneOf": [{"properties": {"c": {"type": "integer"}, "p": {"enum": ["a"]}}, "required": ["p"]},
                              {"properties": {"p": {"enum": ["b"]}}, "required": ["p"]}]},
                   {"properties": {"id": {"type": "integer"}}, "required": ["id"]}]},
        {"c": "1", "p": '"a"', "id": "2", "q": "3"}, ["c", "p", "id"], 14),
    # GitHub o29445: a closed object with a pattern admitting endless keys (`^\.`): a new key can
    # always follow, so its declared keys move
    "an-endless-pattern": (
        {"type": "object", "additionalProperties": False, "patternProperties": {"^\\.": {}},
         "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
        {"a": '"x"', "b": '"y"', ".k": "1", "z": "2"}, ["b", "a"], 16),
    # SchemaStore proxies: a documented placeholder key declared beside the pattern it stands for
    "a-placeholder-key-beside-its-pattern": (
        {"type": "object", "additionalProperties": False, "patternProperties": {"^h\\..+$": {"type": "string"}},
         "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "h.<N>": {"type": "string"}}},
        {"a": '"x"', "h.x": '"y"', "b": '"z"', "q": '"w"'}, ["a", "h.x", "b"], 16),
    # the same open, undeclared keys integers: the placeholder's pattern still holds for `h.x`
    # (an integer there is invalid), and a key matching no pattern is an integer
    "a-placeholder-key-beside-its-pattern-open": (
        {"type": "object", "additionalProperties": {"type": "integer"}, "patternProperties": {"^h\\..+$": {"type": "string"}},
         "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "h.<N>": {"type": "string"}}},
        {"a": '"x"', "h.x": "1", "b": '"z"', "q": "2"}, ["a", "b", "q"], 16),
    # WashingtonPost wp_29: `additionalProperties: {}` (says nothing) beside branches into a cycle
    "vacuous-additional-properties": (
        {"type": "object", "additionalProperties": {}, "anyOf": [{"$ref": "#/definitions/L"}, {"$ref": "#/definitions/T"}],
         "definitions": {
             "L": {"type": "object", "additionalProperties": False, "required": ["type"],
                   "properties": {"items": {"type": "array", "items": {"$ref": "#"}}, "name": {"type": "string"}, "type": {"enum": ["list"]}}},
             "T": {"type": "object", "additionalProperties": False, "required": ["type"],
                   "properties": {"content": {"type": "string"}, "type": {"enum": ["text"]}}}}},
        {"type": '"list"', "name": '"u"', "items": '[{"type":"text"}]', "content": '"c"'}, ["type", "name", "items"], 8),
}


def _judge(compiled, validator, values: dict[str, str]) -> tuple[Counter, set[tuple[str, ...]]]:
    """Every arrangement of every subset of `values`' keys, byte by byte with EOS: the matcher
    accepts only what `validator` says valid. Returns the counts (valid, invalid, valid accepted)
    and the accepted arrangements."""
    judged, accepted = Counter(), set()
    for size in range(len(values) + 1):
        for keys in itertools.permutations(values, size):
            text = "{" + ",".join(f'"{k}":{values[k]}' for k in keys) + "}"
            ids = list(text.encode()) + [_VOCAB.eos_token_id]
            valid = validator.is_valid(json.loads(text))
            taken = compiled.matcher().validate_tokens(ids) == len(ids)
            assert valid or not taken, text
            judged["valid" if valid else "invalid"] += 1
            if taken:
                judged["accepted"] += 1
                accepted.add(keys)
    return judged, accepted


@pytest.mark.parametrize("case", list(CASES))
def test_valid_arrangements_of_real_shapes_are_accepted_and_only_they(case):
    schema, values, corpus_order, count = CASES[case]
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    judged, accepted = _judge(compile_json_schema(schema, _VOCAB), validator, values)
    assert tuple(corpus_order) in accepted, judged
    assert judged["accepted"] == count, judged
