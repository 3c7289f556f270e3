"""References to other documents (json_refs.py): the JSON Schema meta-schemas built in, documents
registered with register_schema, bundled as local pointers. The suite's refRemote.json and
anchor.json run in test_json_schema_suite.py and test_schema_differential.py (jsonschema with its
own resolver as the oracle); here: a meta-schema reference on both backends against jsonschema,
documents named relative to the schema's $id or by a bare name, cycles between documents, and the
errors."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema, register_schema
from constrained_spec.grammar.json_refs import bundle

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], 256)  # one token per byte, EOS = 256

CONFIG = {  # a config format that embeds a JSON schema (as SchemaStore's aio-connector-metadata does)
    "$id": "https://example.org/config.json",
    "type": "object",
    "properties": {"name": {"type": "string"}, "settings": {"$ref": "http://json-schema.org/draft-07/schema#"}},
    "required": ["name", "settings"],
}
VALID = [
    {"name": "a", "settings": {}},
    {"name": "a", "settings": True},
    {"name": "b", "settings": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0}}, "required": ["x"]}},
    {"name": "c", "settings": {"anyOf": [{"type": "string"}, {"enum": [1, 2]}], "definitions": {"d": {"$ref": "#"}}}},
]
# VALID's last two with their keys in the meta-schema's declared order (required, properties,
# type; definitions, anyOf): our compiler writes an object's declared keys in that order.
DECLARED_ORDER = [
    {"name": "b", "settings": {"required": ["x"], "properties": {"x": {"minimum": 0, "type": "integer"}}, "type": "object"}},
    {"name": "c", "settings": {"definitions": {"d": {"$ref": "#"}}, "anyOf": [{"type": "string"}, {"enum": [1, 2]}]}},
]
INVALID = [
    {"name": "a", "settings": 3},
    {"name": "a", "settings": {"type": "integr"}},
    {"name": "a", "settings": {"minLength": -1}},
    {"name": "a", "settings": {"required": "x"}},
    {"name": "a", "settings": {"properties": {"x": {"type": 5}}}},
    {"name": "a", "settings": {"items": [{"maxItems": 1.5}]}},
]


def _accepts(compiled, value) -> bool:
    ids = list(json.dumps(value, separators=(",", ":")).encode()) + [256]
    return compiled.matcher().validate_tokens(ids) == len(ids)


def _walk(compiled, rng: random.Random, limit: int = 300) -> bytes | None:
    """A random output of `compiled` (uniform over allowed bytes, EOS taken half the time it is
    allowed), None past `limit` bytes."""
    matcher, mask, text = compiled.matcher(), new_bitmask(1, BYTES.size), b""
    while len(text) < limit:
        matcher.fill_bitmask(mask)
        allowed = unpack_bitmask(mask, BYTES.size)[0].nonzero().flatten().tolist()
        assert allowed, f"dead end after {text!r}"
        if 256 in allowed and (len(allowed) == 1 or rng.random() < 0.5):
            return text
        token = rng.choice([t for t in allowed if t != 256])
        matcher.accept_token(token)
        text += bytes([token])
    return None


@pytest.mark.parametrize("backend", ["default", "native"])
def test_a_meta_schema_reference_is_built_in_and_exact(backend):
    # (our compiler refused the meta-schema until optional members around recursion were written
    # right-nested: 2^n Lark alternatives)
    compiled = compile_json_schema(CONFIG, BYTES, backend=backend)
    validator = jsonschema.Draft202012Validator(CONFIG)  # jsonschema resolves the meta-schema itself
    for value in VALID if backend == "default" else VALID[:2] + DECLARED_ORDER:
        assert validator.is_valid(value), value
        assert _accepts(compiled, value), value
    for value in INVALID:
        assert not validator.is_valid(value), value
        assert not _accepts(compiled, value), value
    # sampled outputs: 60 seeded walks, each finished one valid per jsonschema. On the root
    # closed: with its required keys in any order, a walk uniform over bytes writes undeclared
    # keys before them and finished none of 60 within 3,000 bytes
    closed = {**CONFIG, "additionalProperties": False}
    compiled, validator = compile_json_schema(closed, BYTES, backend=backend), jsonschema.Draft202012Validator(closed)
    rng, finished = random.Random(7), 0
    for _ in range(60):
        text = _walk(compiled, rng)
        if text is not None:
            validator.validate(json.loads(text))
            finished += 1
    assert finished >= 10


def test_documents_named_relative_to_the_id_or_by_bare_name_and_cycles():
    register_schema("https://example.org/defs/tree.json", {
        "type": "object", "properties": {"leaf": {"$ref": "#/$defs/leaf"}, "kids": {"$ref": "forest.json"}},
        "required": ["leaf"], "additionalProperties": False, "$defs": {"leaf": {"enum": ["x", "y"]}}})
    register_schema("https://example.org/defs/forest.json", {"type": "array", "items": {"$ref": "tree.json"}, "maxItems": 2})  # back to tree.json
    register_schema("units.json", {"enum": ["cm", "in"]})  # what a schema without $id names "units.json"
    with_id = {"$id": "https://example.org/main.json", "$ref": "defs/tree.json"}
    bare = {"type": "object", "properties": {"unit": {"$ref": "units.json"}}, "required": ["unit"], "additionalProperties": False}
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    from constrained_spec.grammar.json_refs import registered_schema

    oracle = Registry().with_resources((uri, DRAFT202012.create_resource(registered_schema(uri))) for uri in
                                       ["https://example.org/defs/tree.json", "https://example.org/defs/forest.json", "units.json"])
    cases = [
        (with_id, {"leaf": "x"}, True), (with_id, {"leaf": "x", "kids": [{"leaf": "y", "kids": []}]}, True),
        (with_id, {"leaf": "z"}, False), (with_id, {"leaf": "x", "kids": [{"kids": []}]}, False),
        (with_id, {"leaf": "x", "kids": [{"leaf": "y", "kids": [{"leaf": "q"}]}]}, False),
        (with_id, {"leaf": "x", "kids": [{"leaf": "x"}, {"leaf": "y"}, {"leaf": "x"}]}, False),
        (bare, {"unit": "cm"}, True), (bare, {"unit": "mm"}, False),
    ]
    for schema, value, valid in cases:
        assert jsonschema.Draft202012Validator(schema, registry=oracle).is_valid(value) is valid, (schema, value)
        for backend in ("default", "native"):
            assert _accepts(compile_json_schema(schema, BYTES, backend=backend), value) is valid, (backend, schema, value)


def test_a_property_named_like_a_value_keyword_has_its_references_rewritten():
    # the copied document's property "enum" (and "default") holds a local $ref: it means the copy's
    # own definitions, not the root's (the root defines "word" otherwise, so a miss shows)
    register_schema("https://example.org/defs/names.json", {
        "type": "object", "properties": {"enum": {"$ref": "#/definitions/word"}, "default": {"$ref": "#/definitions/word"}},
        "required": ["enum"], "additionalProperties": False, "definitions": {"word": {"enum": ["on", "off"]}}})
    schema = {"$id": "https://example.org/root.json", "$ref": "defs/names.json", "definitions": {"word": {"type": "integer"}}}
    bundled = bundle(schema)
    copied = next(iter(bundled["$defs"].values()))
    assert copied["properties"]["enum"]["$ref"] == copied["properties"]["default"]["$ref"] != "#/definitions/word"
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    from constrained_spec.grammar.json_refs import registered_schema

    oracle = Registry().with_resources([("https://example.org/defs/names.json",
                                         DRAFT202012.create_resource(registered_schema("https://example.org/defs/names.json")))])
    validator = jsonschema.Draft202012Validator(schema, registry=oracle)
    for value, valid in [({"enum": "on"}, True), ({"enum": "off", "default": "on"}, True), ({"enum": 3}, False),
                         ({"enum": "on", "default": 1}, False), ({"default": "on"}, False)]:
        assert validator.is_valid(value) is valid, value
        for backend in ("default", "native"):
            assert _accepts(compile_json_schema(schema, BYTES, backend=backend), value) is valid, (backend, value)


def test_a_document_that_is_not_available_is_refused_by_name():
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.org/nowhere.json#/$defs/a"}}}
    for backend in ("default", "native"):
        with pytest.raises(GrammarError, match=r"\$ref 'https://example.org/nowhere.json#/\$defs/a' at /properties/a/\$ref names "
                                               r"another document, which is not available: .*register_schema"):
            compile_json_schema(schema, BYTES, backend=backend)


def test_bundle_leaves_local_schemas_alone_and_register_schema_checks_its_input():
    local = {"$defs": {"a": {"type": "integer"}}, "$ref": "#/$defs/a"}
    assert bundle(local) is local
    with pytest.raises(GrammarError, match="uri must name a document"):
        register_schema("#/only-a-fragment", {})
    with pytest.raises(GrammarError, match="must be a JSON schema"):
        register_schema("https://example.org/x.json", ["not", "a", "schema"])


def test_id_is_an_identifier_only_where_the_dialect_says_so():
    """Draft 4: a nested `id` is a resource and `#/...` below it points into it; draft 7: `id` is an
    annotation (often a plain name) and `#/...` stays a root pointer. jsonschema agrees."""
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"n": {"type": "integer"}},
              "properties": {"a": {"id": "plain-name", "properties": {"b": {"$ref": "#/definitions/n"}}}}}
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.org/root.json",
              "definitions": {"n": {"type": "integer"}},
              "properties": {"a": {"id": "http://example.org/sub.json", "definitions": {"n": {"type": "string"}},
                                   "properties": {"b": {"$ref": "#/definitions/n"}}}}}
    assert bundle(draft7) is draft7  # nothing to bundle: an annotation moves no reference
    for schema, good, bad in ((draft7, 1, "x"), (draft4, "x", 1)):
        validator = jsonschema.validators.validator_for(schema)(schema)
        assert validator.is_valid({"a": {"b": good}}) and not validator.is_valid({"a": {"b": bad}})
        for backend in ("default", "native"):
            compiled = compile_json_schema(schema, BYTES, backend=backend)
            assert _accepts(compiled, {"a": {"b": good}}) and not _accepts(compiled, {"a": {"b": bad}}), (backend, schema["$schema"])


def test_dollar_id_is_an_annotation_in_draft_4():
    """Draft 4 names resources with `id` only: a `$id` there is an annotation (SchemaStore's
    cryproj schemas, generated with `$id` paths on every node), so `#/...` beside it stays a root
    pointer. We read `$id` as a resource and refused the `$ref`; llguidance, handed the `$id`s,
    missed the resource too. jsonschema agrees with the reading."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "$id": "http://example.org/root.json",
              "definitions": {"n": {"$id": "/definitions/n", "type": "integer"}},
              "properties": {"a": {"$id": "/properties/a", "type": "object",
                                   "properties": {"b": {"$id": "/properties/a/properties/b", "$ref": "#/definitions/n"}}}}}
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert validator.is_valid({"a": {"b": 1}}) and not validator.is_valid({"a": {"b": "x"}})
    for backend in ("default", "native"):
        compiled = compile_json_schema(schema, BYTES, backend=backend)
        assert _accepts(compiled, {"a": {"b": 1}}) and not _accepts(compiled, {"a": {"b": "x"}}), backend


def test_definitions_no_reference_reaches_are_left_out():
    """A GitHub schema kept, among its definitions, one no reference reaches whose `$ref` names
    a document that is not available: llguidance resolves every reference and refused the whole
    schema, which our compiler then took 10 s to compile. Unused definitions are left out first."""
    from constrained_spec.grammar.json_refs import without_unreachable_definitions

    schema = {"type": "object", "properties": {"a": {"$ref": "#/definitions/used"}, "b": {"$ref": "#/$defs/x~1y/items"}},
              "definitions": {"used": {"items": {"$ref": "#/definitions/chained"}}, "chained": {"type": "integer"},
                              "unused": {"$ref": "http://example.com/missing.json"}},
              "$defs": {"x/y": {"items": {"type": "string"}}, "unused": {}},
              "links": [{"targetSchema": {"$ref": "#/definitions/unused"}}]}  # an annotation's reference reaches nothing
    out = without_unreachable_definitions(schema)
    assert out["definitions"] == {"used": schema["definitions"]["used"], "chained": {"type": "integer"}}
    assert out["$defs"] == {"x/y": schema["$defs"]["x/y"]}
    for backend in ("native", "default"):
        compiled = compile_json_schema(schema, BYTES, backend=backend)
        for instance, valid in (({"a": [1]}, True), ({"a": ["x"]}, False), ({"b": "x"}, True), ({"b": ["x"]}, False)):
            ids = list(json.dumps(instance, separators=(",", ":")).encode()) + [256]
            assert (compiled.matcher().validate_tokens(ids) == len(ids)) is valid, (backend, instance)
    # an entry holding schemas under names of its own (SchemaStore's travis: notificationObject/webhooks)
    grouped = {"properties": {"a": {"$ref": "#/definitions/group/a"}, "b": {"$ref": "#/x-table/b"}},
               "definitions": {"group": {"a": {"$ref": "#/definitions/inner"}}, "inner": {"type": "integer"}, "viaTable": {},
                               "unused": {}},
               "x-table": {"b": {"$ref": "#/definitions/viaTable"}}}
    assert set(without_unreachable_definitions(grouped)["definitions"]) == {"group", "inner", "viaTable"}
    anchored = {"properties": {"a": {"$ref": "#here"}}, "definitions": {"x": {"$anchor": "here"}, "y": {}}}
    assert without_unreachable_definitions(anchored) is anchored  # an anchor: kept whole
    assert without_unreachable_definitions({"type": "string"}) == {"type": "string"}
