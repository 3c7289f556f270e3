"""The default backend for JSON schemas: llguidance where it accepts the schema, our compiler
otherwise, never a wider language than the schema's (compiler._llguidance_or_native)."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import jsonschema
import pytest

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema
from constrained_spec.grammar.compiler import clear_cache
from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar
from constrained_spec.grammar.llguidance_schema import llguidance_schema
from constrained_spec.grammar.regex_backend import CompiledRegex
from constrained_spec.grammar.unique_items import UniqueItemsGrammar

from schema_oracle import engine_of, walk
from test_json_schema_keywords import CASES, _text, _valid, _walk

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
SUITE = Path(__file__).parent.parent / "data" / "json_schema_test_suite"


def test_llguidance_where_it_accepts_native_where_it_refuses():
    plain = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert isinstance(engine_of(compile_json_schema(plain, BYTES)), LLGuidanceGrammar)
    # llguidance refuses uniqueItems: enforced on top, scalar enums included (the wrapper knows
    # at a `,` when every value is used)
    finite_unique = {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True}
    compiled = compile_json_schema(finite_unique, BYTES)
    assert isinstance(compiled, UniqueItemsGrammar) and isinstance(engine_of(compiled.inner), LLGuidanceGrammar)
    for text in ["[]", "[1,2]", "[2]", "[1,1]", "[1,2,1]", "[1,1.0]"]:
        assert _walk(compiled, finite_unique, text) == _valid(finite_unique, text), text
    # where both refuse, the error is ours: keyword and pointer named
    with pytest.raises(GrammarError, match="oneOf at /oneOf: branches may overlap"):
        compile_json_schema({"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]}, BYTES)  # not of multipleOf
    # not of a pattern: its complement, written without lookarounds (regular.py)
    patterns = {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]}
    for backend in ("default", "native"):
        compiled = compile_json_schema(patterns, BYTES, backend=backend)
        for text in ['"a"', '"b"', '"ab"', '"c"', '"xa"', '"bx"', '"xbxax"']:
            assert _walk(compiled, patterns, text) == _valid(patterns, text), (backend, text)


def test_disjoint_one_of_and_unique_items_stay_on_llguidance(caplog):
    """llguidance refuses oneOf and uniqueItems; a oneOf our compiler proves disjoint is an anyOf
    there, uniqueItems is enforced on top (unique_items.py)."""
    tagged = {"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
                        {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}]}
    compiled = compile_json_schema(tagged, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text, ok in [('{"kind":"a","x":1}', True), ('{"kind":"b","x":"s"}', True), ('{"kind":"a","x":"s"}', False), ('{"kind":"c"}', False)]:
        assert _walk(compiled, tagged, text) == ok, text
    overlapping = {"oneOf": [{"type": "string"}, {"enum": ["a", 1]}]}  # "a" matches both: B_i and not B_j (json_negation)
    compiled = compile_json_schema(overlapping, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert _walk(compiled, overlapping, '"b"') and _walk(compiled, overlapping, "1") and not _walk(compiled, overlapping, '"a"')
    tags = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    compiled = compile_json_schema(tags, BYTES)  # uniqueItems on top of llguidance, exactly
    assert isinstance(compiled, UniqueItemsGrammar) and isinstance(engine_of(compiled.inner), LLGuidanceGrammar)
    for text, ok in [('["a"]', True), ("[]", True), ('["a","b","ab"]', True), ('["a","a"]', False), ('["a","b","a"]', False)]:
        assert _walk(compiled, tags, text) == ok, text
    negated = {"not": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}  # narrowing under not widens
    with pytest.raises(GrammarError, match="not at /not"):  # so not for llguidance; ours refuses it by name
        compile_json_schema(negated, BYTES)


def test_finite_unique_items_on_llguidance_where_ours_refuses():
    # ours enumerates the unique arrays of a small enum exactly, but refuses a string bounded
    # past its limit; llguidance then takes the schema, with uniqueItems enforced on top
    schema = {"type": "object", "required": ["tags", "id"], "properties": {
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
        "id": {"type": "string", "pattern": "^(ab|ba)+c$", "maxLength": 300}}}
    with pytest.raises(GrammarError, match="maxLength"):
        compile_json_schema(schema, BYTES, backend="native")
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(compiled, UniqueItemsGrammar) and isinstance(engine_of(compiled.inner), LLGuidanceGrammar)
    assert _walk(compiled, schema, '{"tags":["b"],"id":"abc"}')
    too_long = '{"tags":["b"],"id":"' + "ab" * 150 + 'c"}'
    for bad in ('{"tags":["a","a"],"id":"abc"}', too_long, '{"tags":["c"],"id":"abc"}', '{"tags":["a","b","a"],"id":"abc"}'):
        assert not _walk(compiled, schema, bad), bad
    assert _walk(compiled, schema, '{"tags":["a","b"],"id":"abc"}')


@pytest.mark.parametrize("schema,options", [
    ({"type": "integer"}, {"strict": True}),  # our keyword check
    ({"type": "integer"}, {"whitespace": "flexible"}),  # ours bounds whitespace runs
    # closing a merged schema where a part says what undeclared keys may be: ours merges, then closes
    ({"allOf": [{"properties": {"a": {}}}, {"required": ["a"]}, {"patternProperties": {"^x": {}}}]}, {"closed_objects": True}),
])
def test_native_where_llguidance_would_read_the_schema_differently(schema, options):
    assert not isinstance(engine_of(compile_json_schema(schema, BYTES, **options)), LLGuidanceGrammar)


CONDITIONAL = {"type": "object", "properties": {"kind": {"enum": ["x", "y"]}}, "required": ["kind"],
               "if": {"properties": {"kind": {"const": "x"}}},
               "then": {"properties": {"xv": {"type": "integer"}}, "required": ["xv"]},
               "else": {"properties": {"yv": {"type": "string"}}}}


@pytest.mark.parametrize("schema,texts", [
    ({"allOf": [{"properties": {"a": {}}}, {"required": ["a"]}]},
     {'{"a":1}': True, '{"a":1,"b":2}': False, "{}": False}),
    ({"type": "object", "properties": {"a": {"type": "string"}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
     {'{"a":"s"}': True, '{"b":null}': True, '{"a":"s","b":1}': True, "{}": False, '{"a":"s","c":1}': False, '{"a":1}': False}),
    (CONDITIONAL, {'{"kind":"x","xv":1}': True, '{"kind":"x"}': False, '{"kind":"x","xv":1,"zz":1}': False,
                   '{"kind":"y","yv":"s"}': True, '{"kind":"y"}': True, '{"kind":"y","yv":1}': False, '{"kind":"x","xv":"1"}': False}),
])
def test_closed_where_parts_merge_on_llguidance(schema, texts):
    """Closed objects over allOf / anyOf / conditions: closed once, where the parts merge, over
    every key a part declares (the parts left open), so llguidance takes the schema (our compiler
    took seconds on such real schemas: aiproj 36 s) and only declared keys are written."""
    compiled = compile_json_schema(schema, BYTES, closed_objects=True)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text, ok in texts.items():
        assert _walk(compiled, schema, text) == ok, text


def test_escaped_characters_in_free_strings_on_llguidance():
    """json.dumps' default (ensure_ascii=True) writes every non-ASCII character as `\\uXXXX`, a
    surrogate pair beyond U+FFFF: accepted in strings without pattern, format, enum or const, a
    pair counted as one character as JSON Schema counts; a lone surrogate is refused."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}, "note": {"type": "string"}},
              "required": ["name"], "additionalProperties": False}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for value in [{"name": "\u00e9\U0001F600a", "note": "na\u00efve \u2014 \u0000"}, {"name": "\u00e9"}, {"name": ""}]:
        for ascii_only in (True, False):
            assert _accepts(compiled, json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)), (value, ascii_only)
    for text in [json.dumps({"name": "\u00e9\U0001F600ab"}, separators=(",", ":")), '{"name":"\\ud83d"}', '{"name":"\\u00e"}']:
        assert not _accepts(compiled, text), text


def _accepts(compiled, text: str) -> bool:
    """Byte by byte, then EOS (no jsonschema check of the prefixes: it reads multipleOf in binary)."""
    matcher = compiled.matcher()
    for byte in text.encode():
        if matcher.validate_tokens([byte]) != 1:
            return False
        matcher.accept_token(byte)
    return matcher.validate_tokens([BYTES.eos_token_id]) == 1


@pytest.mark.parametrize("uri", [
    "http://iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0#",
    "https://json-schema.org/draft-07/schema#", "http://json-schema.org/schema#"])
def test_metaschema_uris_llguidance_would_fetch_stay_on_llguidance(uri):
    # llguidance tried to fetch these URIs and refused the schema: every Snowplow schema went to
    # our compiler (bounded strings over 256 characters refused there). A property named
    # $schema is a property, not the keyword.
    schema = {"$schema": uri, "type": "object", "additionalProperties": False,
              "properties": {"$schema": {"type": "string", "maxLength": 300}, "n": {"$schema": uri, "type": "integer"},
                             "items": {"type": "array", "items": [{"type": "integer"}], "additionalItems": False}},
              "required": ["$schema"]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"$schema":"x","n":3}', '{"$schema":"","items":[1]}', '{"$schema":"a","n":-1,"items":[]}'):
        assert _walk(compiled, schema, text), text
    for text in ('{"n":3}', '{"$schema":1}', '{"$schema":"x","n":"3"}', '{"$schema":"x","items":[1,2]}', '{"$schema":"x","m":1}'):
        assert not _walk(compiled, schema, text), text


def test_a_nested_draft_04_id_does_not_rebase_root_pointers_on_llguidance():
    # JSONSchemaBench o44063: a definition declaring draft 04 and an `id`, under a root with no
    # $schema. We and jsonschema read the schema in its root's dialect, where `id` names nothing,
    # so the `$ref`s inside point from the root; llguidance took the `id` as their base, missed
    # the resource and refused the schema (our Lark path: 330 ms compiles, 3.5 ms masks).
    schema = {"type": "object", "properties": {"lemon": {"$ref": "#/definitions/lemon"}},
              "definitions": {"lemon": {"$schema": "http://json-schema.org/draft-04/schema", "id": "schema/lemon",
                                        "type": "object", "additionalProperties": False,
                                        "properties": {"size": {"$ref": "#/definitions/lemon/definitions/size"}},
                                        "definitions": {"size": {"enum": ["small", "large"]}}}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"lemon":{"size":"small"}}', '{"lemon":{}}', '{}', '{"other":[1]}'):
        assert _valid(schema, text) and _walk(compiled, schema, text), text
    for text in ('{"lemon":{"size":"medium"}}', '{"lemon":{"id":"x"}}', '{"lemon":[]}'):
        assert not _valid(schema, text) and not _walk(compiled, schema, text), text


def test_a_root_reference_into_a_cycle_keeps_its_definitions_on_llguidance():
    # JSONSchemaBench o83258: a root `$ref` into a cycle beside `type: object` (what the target
    # says already) and the definitions. The vacuous `type` was dropped with every other
    # sibling, the definitions too: llguidance refused the dangling pointer, our Lark path took it.
    element = {"type": "object", "additionalProperties": False, "required": ["type"],
               "properties": {"type": {"type": "string"},
                              "children": {"oneOf": [{"type": "string"}, {"$ref": "#/definitions/element"},
                                                    {"type": "array", "items": {"$ref": "#/definitions/element"}}]}}}
    schema = {"$ref": "#/definitions/element", "type": "object", "title": "element", "definitions": {"element": element}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"type":"div"}', '{"type":"div","children":"x"}', '{"type":"a","children":[{"type":"b","children":{"type":"c"}}]}'):
        assert _valid(schema, text) and _walk(compiled, schema, text), text
    for text in ('{}', '{"type":"a","children":[{"children":"x"}]}', '{"type":"a","x":1}', '"div"'):
        assert not _valid(schema, text) and not _walk(compiled, schema, text), text


def test_then_and_else_without_if_say_nothing_on_llguidance():
    # JSONSchemaBench o36012 and SchemaStore's meta.json: an allOf member holding only `else`.
    # Without an `if` neither `then` nor `else` has any effect; llguidance refused the keyword
    # and the schema went to our compiler (o36012: the Lark path; meta.json: refused as too large).
    schema = {"type": "object", "properties": {"name": {"type": "string"}},
              "allOf": [{"if": {"properties": {"name": {"const": "a"}}}, "then": {"required": ["x"]}},
                        {"else": {"required": ["name"]}}, {"then": {"properties": {"name": {"type": "integer"}}}}]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"x":1}', '{"name":"b"}', '{"name":"a","x":1}'):
        assert _valid(schema, text) and _walk(compiled, schema, text), text
    for text in ('{}', '{"name":"a"}', '{"name":1,"x":1}'):  # (the first `if` holds where `name` is absent)
        assert not _valid(schema, text) and not _walk(compiled, schema, text), text


@pytest.mark.parametrize("counts", [{"minProperties": 2, "maxProperties": 2}, {"maxProperties": 2}, {"minProperties": 3, "maxProperties": 4}])
def test_property_counts_of_a_closed_object_on_llguidance(counts):
    # Snowplow's enrichment inputs: `placeholder` and exactly one of `pojo`/`json`. llguidance
    # refuses min/maxProperties beside optional keys, our compiler a maxProperties below the
    # declared count; as key sets, llguidance takes it. Every key subset in declared order (and
    # pairs in other orders that lack `p`, or start with it: required keys come first) against
    # jsonschema.
    schema = {"type": "array", "items": {"type": "object", "additionalProperties": False, "required": ["p"],
                                         "properties": {"p": {"type": "integer"}, "a": {"type": "string"}, "b": {}, "c": {"type": "null"}}, **counts}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    values = {"p": "1", "a": '"x"', "b": "[]", "c": "null"}
    subsets = [keys for n in range(5) for keys in itertools.combinations("pabc", n)]
    pairs = [keys for keys in itertools.permutations("pabc", 2) if keys[1] != "p"]
    for keys in subsets + pairs:
        text = "[{" + ",".join(f'"{k}":{values[k]}' for k in keys) + "}]"
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert not _walk(compiled, schema, '[{"p":1,"d":2}]')


def test_property_counts_no_closed_object_meets_leave_other_types():
    schema = {"type": ["object", "string"], "properties": {"p": {}, "a": {}}, "additionalProperties": False,
              "required": ["p"], "minProperties": 3, "maxProperties": 3}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert _walk(compiled, schema, '"x"')
    for text in ('{"p":1,"a":2}', '{"p":1}', '{}', '1'):
        assert not _walk(compiled, schema, text), text


def test_cyclic_references_beside_a_type_or_a_twin_pattern_on_llguidance():
    # The Washington Post's ANS credits: items `{"type": "object", "anyOf": [author, reference]}`
    # (the type says nothing the branches do not) under a property `by` whose schema is also
    # that of a patternProperties entry matching `by`. llguidance refused both ("circular
    # references with sibling keys") and left it to our compiler (slower, and refusing the real
    # ANS schemas); the type left out and the twin as `true` are the same language.
    credits = {"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/author"}, {"$ref": "#/$defs/ref"}]}}
    schema = {"$ref": "#/$defs/credits", "$defs": {
        "author": {"type": "object", "additionalProperties": False,
                   "properties": {"name": {"type": "string"}, "credits": {"$ref": "#/$defs/credits"}}},
        "ref": {"type": "object", "properties": {"type": {"const": "reference"}}, "required": ["type"], "additionalProperties": False},
        "credits": {"type": "object", "properties": {"by": {"title": "By", **credits}}, "patternProperties": {"^[a-z_]*": credits}}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"by":[{"name":"a"}]}', '{"by":[{"type":"reference"}],"x_y":[]}', '{"by":[{"name":"a","credits":{"by":[],"Q":[{}]}}]}', '{}'):
        assert _walk(compiled, schema, text), text
    for text in ('{"by":[1]}', '{"by":[{"name":1}]}', '{"Ab":1}', '{"by":{}}', '{"by":[{"type":"x"}]}', '{"by":[{"credits":{"z":[2]}}]}'):
        assert not _walk(compiled, schema, text), text


def test_a_property_within_a_match_all_pattern_on_llguidance():
    # ANS's related_content: `redirect` (arrays of one redirect) and `.*` (arrays of content,
    # references or embeds, where content, an open object, admits a redirect) around a cycle
    # (content holds related_content). llguidance refused the intersection; as the redirect's
    # schema lies within the pattern's, the pattern skips `redirect`: the same instances.
    schema = {"$ref": "#/$defs/content", "$defs": {
        "redirect": {"type": "object", "additionalProperties": False, "required": ["type", "url"],
                     "properties": {"type": {"type": "string", "enum": ["redirect"]}, "url": {"type": "string"}}},
        "reference": {"type": "object", "additionalProperties": False, "required": ["type"], "properties": {"type": {"const": "reference"}}},
        "content": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "related": {"$ref": "#/$defs/related"}}},
        "related": {"type": "object",
                    "properties": {"redirect": {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/redirect"}}},
                    "patternProperties": {".*": {"type": "array", "items": {"type": "object", "anyOf": [{"$ref": "#/$defs/content"}, {"$ref": "#/$defs/reference"}]}}}}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"type":"story","related":{"redirect":[{"type":"redirect","url":"u"}]}}', '{"type":"s","related":{"redirect":[]}}',
                 '{"type":"s","related":{"a":[{"type":"reference"}],"redirects":[{"type":"x","related":{"x\\ny":[]}}]}}'):
        assert _walk(compiled, schema, text), text
    for text in ('{"type":"s","related":{"redirect":[{"type":"reference"}]}}', '{"type":"s","related":{"redirect":[{"type":"redirect","url":"u"},{"type":"redirect","url":"v"}]}}',
                 '{"type":"s","related":{"a":[{"type":1}]}}', '{"type":"s","related":{"redirect":{}}}'):
        assert not _walk(compiled, schema, text), text


def test_one_of_whose_branch_is_an_all_of_of_a_disjoint_reference_stays_on_llguidance():
    # ANS's taxonomy: oneOf [site, allOf [reference, {referent: {type: site}}]]: the allOf lies
    # within `reference`, which is closed and lacks site's required `name`: disjoint, an anyOf
    # (site is recursive, so "this branch and not the other" is no way out)
    defs = {"site": {"type": "object", "additionalProperties": False, "required": ["type", "name"],
                     "properties": {"type": {"enum": ["site"]}, "name": {"type": "string"}, "parent": {"$ref": "#/$defs/site"}}},
            "reference": {"type": "object", "additionalProperties": False, "required": ["type", "referent"],
                          "properties": {"type": {"enum": ["reference"]}, "referent": {"type": "object"}}}}
    schema = {"$defs": defs, "oneOf": [{"$ref": "#/$defs/site"}, {"allOf": [{"$ref": "#/$defs/reference"},
                                                                            {"properties": {"referent": {"properties": {"type": {"enum": ["site"]}}}}}]}]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"type":"site","name":"a"}', '{"type":"reference","referent":{"type":"site"}}', '{"type":"reference","referent":{}}',
                 '{"type":"site","name":"a","parent":{"type":"site","name":"b"}}'):
        assert _walk(compiled, schema, text), text
    for text in ('{"type":"site"}', '{"type":"reference","referent":{"type":"x"}}', '{"type":"site","name":"a","referent":{}}', '{}'):
        assert not _walk(compiled, schema, text), text


@pytest.mark.parametrize("kind_required", [True, False])
def test_one_of_in_an_all_of_told_apart_by_what_the_other_members_require(kind_required):
    """A oneOf in an allOf member, its kinds told apart by a key another member requires
    (GitHub's file lists: `allOf: [{"$ref": common}, {"oneOf": [file, dir, link]}]`, `type`
    required by `common` only). Every value the allOf admits has the key, so there the oneOf
    is an anyOf of the branches as written; before, each branch was "and not the others",
    negating the mode patterns (a rewrite seven times larger, logged as narrower). Where no
    member requires the key (`kind_required` False) `{"name":"a"}` meets all three branches:
    the oneOf stays exact (refused), walked byte by byte against jsonschema both ways."""
    common = {"type": "object", "required": ["name", "type"] if kind_required else ["name"], "properties": {"name": {"type": "string"}}}
    branches = [{"properties": {"type": {"enum": ["file"]}, "mode": {"type": "string", "pattern": "^[0-7]{3,4}$"}}},
                {"properties": {"type": {"enum": ["dir"]}, "mode": {"type": "string", "pattern": "^[0-4]?[0-7]{3}$"}}},
                {"properties": {"type": {"enum": ["link"]}}}]
    schema = {"type": "array", "items": {"$ref": "#/definitions/file"}, "definitions": {
        "common": common, "file": {"allOf": [{"$ref": "#/definitions/common"}, {"properties": {"user": {"type": "string"}}, "oneOf": branches}]}}}
    narrowed: dict = {}
    member = llguidance_schema(schema, False, {}, narrowed)["definitions"]["file"]["allOf"][1]
    assert (member.get("anyOf") == branches and not narrowed) == kind_required, (member, narrowed)
    compiled = compile_json_schema(schema, BYTES)
    valid = ['{"name":"a","type":"file","mode":"0644"}', '{"name":"a","type":"dir","mode":"0644"}', '{"name":"a","type":"link","mode":"x"}',
             '{"name":"a","type":"dir"}']
    invalid = ['{"name":"a","type":"file","mode":"99"}', '{"name":"a","type":"other"}', '{"type":"file"}', '{"name":"a","type":"link","user":1}']
    for text in [*valid, *invalid, '{"name":"a"}']:
        assert _walk(compiled, schema, f"[{text}]") == _valid(schema, f"[{text}]"), text
    assert all(_valid(schema, f"[{t}]") for t in valid) and not any(_valid(schema, f"[{t}]") for t in [*invalid, '{"name":"a"}'])


@pytest.mark.parametrize("shared_negation", [True, False])
def test_one_of_told_apart_by_a_negated_required_both_branches_share(shared_negation):
    """JSON-RPC 2.0's response: `oneOf: [success, error]`, each `allOf: [common, {"required":
    [result]}]` (`[error]`), `common` saying "cannot have result and error at the same time"
    (`not: {"required": ["result", "error"]}`). A value in both would hold both keys, which
    common forbids: the branches are apart, so the oneOf is an anyOf of them as written (before,
    each was "and not the other", a rewrite logged as narrower). Without the shared negation
    (`shared_negation` False) `{"id":1,"result":1,"error":{}}` meets both and is refused: the
    oneOf stays exact. Walked byte by byte against jsonschema both ways."""
    common = {"type": "object", "required": ["id"], "properties": {"id": {"type": ["string", "integer", "null"]}}}
    if shared_negation:
        common["not"] = {"description": "cannot have result and error at the same time", "required": ["result", "error"]}
    schema = {"oneOf": [{"$ref": "#/definitions/success"}, {"$ref": "#/definitions/error"}], "definitions": {
        "common": common,
        "success": {"allOf": [{"$ref": "#/definitions/common"}, {"required": ["result"]}]},
        "error": {"allOf": [{"$ref": "#/definitions/common"}, {"required": ["error"], "properties": {"error": {"type": "object"}}}]}}}
    narrowed: dict = {}
    rewritten = llguidance_schema(schema, False, {}, narrowed)
    assert (rewritten.get("anyOf") == schema["oneOf"] and not narrowed) == shared_negation, (rewritten, narrowed)
    compiled = compile_json_schema(schema, BYTES)
    valid = ['{"id":1,"result":"Hello"}', '{"id":null,"error":{"code":1}}', '{"id":"a","result":null,"x":2}']
    invalid = ['{"id":1}', '{"result":1}', '{"id":1,"error":2}', '[]']
    for text in [*valid, *invalid, '{"id":1,"result":1,"error":{}}']:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert all(_valid(schema, t) for t in valid) and not any(_valid(schema, t) for t in [*invalid, '{"id":1,"result":1,"error":{}}'])


def test_conditions_discriminated_by_one_required_key_stay_on_llguidance():
    # GitHub's issue forms: an allOf of six `if type = c then T` conditions on an object that
    # requires `type`; as separate two-way choices llguidance refused the schema as too large
    # (2^16 combinations here; the real schema's nested items made six too many)
    kinds = ["markdown", "input", "dropdown", "checkboxes", "upload", "textarea", *(f"k{i}" for i in range(10))]
    conditions = [{"if": {"properties": {"type": {"const": kind}}},
                   "then": {"required": ["type", f"a_{kind}"], "properties": {"type": {}, f"a_{kind}": {"type": "integer"}}, "additionalProperties": False}}
                  for kind in kinds]
    schema = {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}, "allOf": conditions}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    texts = ['{"type":"markdown","a_markdown":1}', '{"type":"upload","a_upload":2}', '{"type":"other"}', '{"type":"other","a_input":"x"}',
             '{"type":"markdown"}', '{"type":"markdown","a_input":1}', '{"type":"markdown","a_markdown":"1"}', '{"a_markdown":1}',
             '{"type":"input","a_input":1,"x":2}', '{"type":1}', '{"type":"textarea","a_textarea":0}', '{}']
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert sum(_valid(schema, t) for t in texts) == 5  # both sides walked


def test_untyped_kinds_told_apart_by_a_property_on_llguidance():
    # enonic-xp's form items: input kinds without `type: object`, each requiring `type` with its
    # own constant (a string meets every kind, so no non-object is in exactly one); a fragment
    # (`type` declared, not required; unevaluatedProperties beside a oneOf of `required` and
    # `not`); an item set (allOf of a base requiring `type` and a part fixing it)
    kind = lambda c, extra: {"properties": {"type": {"const": c}, "name": {"type": "string"}, extra: {"type": "integer"}},  # noqa: E731
                             "required": ["type", "name"], "additionalProperties": False}
    defs = {"text": kind("Text", "max"), "area": kind("Area", "rows"),
            "inputs": {"oneOf": [{"$ref": "#/$defs/text"}, {"$ref": "#/$defs/area"}]},
            "fragment": {"type": "object", "properties": {"include": {"type": "string"}, "type": {"const": "Fragment"}, "name": {"type": "string"}},
                         "oneOf": [{"required": ["include"], "not": {"anyOf": [{"required": ["name"]}, {"required": ["type"]}]}},
                                   {"required": ["type", "name"], "not": {"required": ["include"]}}],
                         "unevaluatedProperties": False},
            "base": {"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]},
            "set": {"allOf": [{"$ref": "#/$defs/base"}, {"type": "object", "properties": {"type": {"const": "Set"}, "items": {"type": "array"}},
                                                           "required": ["items"], "additionalProperties": False}]}}
    schema = {"$defs": defs, "oneOf": [{"$ref": "#/$defs/inputs"}, {"$ref": "#/$defs/fragment"}, {"$ref": "#/$defs/set"}]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    texts = ['{"type":"Text","name":"a","max":1}', '{"type":"Area","name":"a"}', '{"include":"x"}', '{"type":"Fragment","name":"n"}',
             '{"type":"Set","items":[]}', '"abc"', '1', '{"type":"Text","name":"a","rows":1}', '{"include":"x","name":"n"}',
             '{"include":"x","other":1}', '{"type":"Set"}', '{"type":"Fragment","name":"n","include":"i"}', '{}', 'null', '{"type":"Area"}']
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert sum(_valid(schema, t) for t in texts) == 5  # both sides walked


def test_numbers_bounded_beyond_llguidance_float_ranges():
    # Snowplow's `maximum: 9223372036854775807` on numbers: llguidance builds no float range that
    # wide and refused the schema. Now "a number within 1e17, or an integer within 64 bits":
    # non-integers beyond 1e17 are a narrowing (listed on the log); nothing invalid gets in.
    schema = {"type": "object", "properties": {"n": {"type": ["number", "null"], "minimum": 0, "maximum": 9223372036854775807},
                                               "m": {"type": "number", "exclusiveMinimum": -1e300}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"n":12.5}', '{"n":null}', '{"n":9223372036854775807}', '{"n":0,"m":-3.5}', '{"n":123456789012345678}'):
        assert _walk(compiled, schema, text), text
    for text in ('{"n":-1}', '{"n":9223372036854775808}', '{"n":"x"}', '{"n":-0.5}', '{"m":null}'):
        assert not _walk(compiled, schema, text), text
    assert not _accepts(compiled, '{"n":123456789012345678.5}')  # valid: the narrowing


def test_fractional_multiple_of_on_llguidance_where_both_read_it_alike():
    # 10^-k: at most k decimal places for llguidance and for our compiler (which refuses bounds
    # beside it, so such schemas were refused); other steps are read apart (llguidance takes
    # 0.25 as two places and refuses 2.5; jsonschema: 0.9 / 0.3 != 3), our compiler refuses them
    for schema, good, bad in (
            ({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 100}, ["19.99", "0.5", "100", "7"], ["1.005", "-0.01", "100.01"]),
            ({"type": "number", "multipleOf": 0.001}, ["1.005", "-2", "0.1"], ["0.0005", "1e-3"])):
        compiled = compile_json_schema(schema, BYTES)
        assert isinstance(engine_of(compiled), LLGuidanceGrammar)
        for text in good:
            assert _accepts(compiled, text), (schema, text)
        for text in bad:
            assert not _accepts(compiled, text), (schema, text)
    for step in (0.25, 0.3):
        with pytest.raises(GrammarError, match="multipleOf"):
            compile_json_schema({"type": "number", "multipleOf": step}, BYTES)


def test_date_with_own_pattern_and_length_on_llguidance():
    # our date pattern joins the string's own pattern (allOf) and length bounds: all hold
    schema = {"type": "string", "format": "date", "maxLength": 10, "pattern": "^2024"}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert _walk(compiled, schema, '"2024-02-29"')
    for bad in ('"2023-02-28"', '"2024-02-30"', '"2024-02-29T"'):
        assert not _walk(compiled, schema, bad), bad
    compiled = compile_json_schema(schema, BYTES, backend="native")  # ours intersects them (regular.py)
    assert _walk(compiled, schema, '"2024-02-29"')
    for bad in ('"2023-02-28"', '"2024-02-30"', '"2024-02-29T"', '"2024-2-29"'):
        assert not _walk(compiled, schema, bad), bad


def test_dates_are_exact():
    """llguidance's own date formats admit 2023-02-29 and 23:59:60: ours go in their place."""
    for fmt, good, bad in [("date", "2024-02-29", "2023-02-29"), ("date-time", "2024-02-29T23:59:59Z", "2023-01-01T23:59:60Z"),
                           ("time", "23:59:59+01:00", "23:59:60Z")]:
        schema = {"type": "string", "format": fmt}
        compiled = compile_json_schema(schema, BYTES)
        assert isinstance(engine_of(compiled), LLGuidanceGrammar)
        assert _walk(compiled, schema, json.dumps(good)) and not _walk(compiled, schema, json.dumps(bad)), fmt


def test_closed_objects():
    schema = {"type": "object", "properties": {"a": {"type": "object"}, "m": {"additionalProperties": {"type": "integer"}}}}
    compiled = compile_json_schema(schema, BYTES, closed_objects=True)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert _walk(compiled, schema, '{"a":{},"m":{"k":1}}')  # a declared map stays a map
    for extra in ['{"z":1}', '{"a":{"z":1}}']:
        assert not _walk(compiled, schema, extra) and _walk(compile_json_schema(schema, BYTES), schema, extra)


def test_rewrite_declines_where_closing_could_widen():
    # closing a oneOf branch can make an instance that matched two branches match one
    assert llguidance_schema({"oneOf": [{"type": "object"}, {"required": ["b"]}]}, closed_objects=True) is None
    # a `not` is rewritten on the open schema first (every object fails to fail it), then closed
    rewritten = llguidance_schema({"not": {"type": "object", "properties": {"a": {}}}}, closed_objects=True)
    assert [jsonschema.Draft202012Validator(rewritten).is_valid(v) for v in (1, "s", {}, {"a": 1})] == [True, True, False, False]
    # an `if` no schema without `not` expresses the failure of stays a condition: not closed here
    assert llguidance_schema({"if": {"type": "object", "properties": {"a": {"pattern": "^(x)\\1"}}},
                              "then": {"required": ["a"]}}, closed_objects=True) is None
    assert llguidance_schema({"properties": {"a": {}}, "required": ["b"]}, closed_objects=True) is None  # would allow nothing
    # our date pattern under oneOf/not: exact or not, a changed part of a negation is left to ours
    assert llguidance_schema({"oneOf": [{"format": "date"}, {"type": "integer"}]}, closed_objects=False) is None
    # without closing, only the formats are rewritten; enum/const/default data is never touched
    data = {"const": {"format": "date"}, "default": {"type": "object"}}
    assert llguidance_schema(data, closed_objects=True) == data


@pytest.mark.parametrize("name,schema,valid,invalid", CASES, ids=[c[0] for c in CASES])
def test_keyword_cases_sound(name, schema, valid, invalid):
    """Every keyword case, default backend: no invalid instance accepted (valid ones may be
    refused where llguidance is narrower: undeclared keys only after the declared ones)."""
    try:
        compiled = compile_json_schema(schema, BYTES, closed_objects=False)
    except GrammarError:
        return
    for instance in invalid:
        assert not _walk(compiled, schema, _text(instance)), f"{name}: accepts {_text(instance)!r}"
    for instance in valid:  # EOS is allowed only after valid prefixes (_walk asserts it)
        _walk(compiled, schema, _text(instance))


def test_suite_sound():
    """The whole vendored JSON-Schema-Test-Suite through the default backend: no invalid instance
    accepted, and at least as many valid ones as our compiler alone accepts."""
    invalid_accepted, accepted, native_accepted = [], 0, 0
    for path in sorted(SUITE.glob("*.json")):
        for case in json.loads(path.read_text()):
            compiled = native = None
            try:
                compiled = compile_json_schema(case["schema"], BYTES, closed_objects=False)
                native = compile_json_schema(case["schema"], BYTES, closed_objects=False, backend="native")
            except GrammarError:
                pass
            for test in case["tests"]:
                text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
                ok = compiled is not None and _accepts(compiled, text)
                if ok and not test["valid"]:
                    invalid_accepted.append((path.name, case["description"], test["description"]))
                escaped = json.dumps(test["data"], separators=(",", ":"))  # json.dumps' default: \uXXXX
                if escaped != text and compiled is not None and _accepts(compiled, escaped) and not test["valid"]:
                    invalid_accepted.append((path.name, case["description"], test["description"], "escaped"))
                accepted += ok and test["valid"]
                native_accepted += native is not None and test["valid"] and _accepts(native, text)
    assert invalid_accepted == []
    assert accepted >= native_accepted, (accepted, native_accepted)


def _accepts(compiled, text: str) -> bool:
    ids = list(text.encode()) + [256]
    return compiled.matcher().validate_tokens(ids) == len(ids)


def test_ignored_keywords_are_logged(caplog):
    with caplog.at_level(logging.INFO, logger="constrained_spec.grammar.json_schema"):
        compiled = compile_json_schema({"type": "object", "properties": {"a": {"type": "integer", "x-vendor": 1}}}, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar) and "x-vendor (at /properties/a/x-vendor)" in caplog.text


# llguidance has no `not` and no dependencies: the forms real schemas use are rewritten exactly
REWRITTEN = [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "not": {"required": ["b"]}},
     [{"a": 1}, {"a": 1, "b": 2}, {}, {"c": 1}]),
    ({"properties": {"a": {}}, "not": {"required": ["a", "b"], "properties": {"a": {"title": "t"}}}},
     [{"a": 1}, {"a": 1, "b": 2}, {"b": 1}, 3, "s", [1]]),
    ({"not": {"type": ["string", "number"]}}, [1, 1.5, "s", None, True, {}, []]),
    ({"type": "object", "properties": {"libraries": {"type": "array", "items": {"type": "object"}, "not": {"contains": {"required": ["f"]}}}}},
     [{"libraries": [{"g": 1}]}, {"libraries": [{"g": 1}, {"f": 2}]}, {"libraries": []}]),
    ({"$defs": {"has": {"required": ["x"]}}, "type": "object", "not": {"anyOf": [{"$ref": "#/$defs/has"}, {"required": ["y"]}]}},
     [{}, {"x": 1}, {"y": 1}, {"z": 1}]),
    ({"$schema": "http://json-schema.org/draft-07/schema#",  # `dependencies` is a draft 4-7 keyword
      "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "integer"}},
      "dependencies": {"a": ["b"], "c": {"properties": {"a": {"minimum": 5}}}}},
     [{}, {"a": 1}, {"a": 1, "b": "x"}, {"c": 1}, {"a": 6, "b": "x", "c": 1}, {"a": 2, "b": "x", "c": 1}]),
    ({"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}, {"b": 2}]),
]


@pytest.mark.parametrize("schema,instances", REWRITTEN, ids=range(len(REWRITTEN)))
def test_not_and_dependencies_rewritten_for_llguidance(schema, instances):
    """Exact rewrites (`not` of required keys, types, contains, anyOf, $ref;
    dependencies as `key absent or present with what it brings`): llguidance takes the schema,
    and every instance is accepted iff jsonschema says it is valid (EOS never after an invalid
    prefix: _walk checks it)."""
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar), type(compiled)
    verdicts = {_text(i): _walk(compiled, schema, _text(i)) for i in instances}
    assert verdicts == {_text(i): _valid(schema, _text(i)) for i in instances}
    assert any(verdicts.values()) and not all(verdicts.values())


def test_negations_llguidance_cannot_say_stay_with_ours():
    assert llguidance_schema({"not": {"pattern": "^(a)\\1"}}, closed_objects=False) == {"not": {"pattern": "^(a)\\1"}}  # a backreference: ours
    assert llguidance_schema({"not": {"type": "integer"}}, closed_objects=False) == {"not": {"type": "integer"}}  # non-integer numbers


@pytest.mark.parametrize("backend", ["default", "llguidance"])
def test_no_key_twice_on_llguidance(backend):
    """llguidance alone let an open object repeat a key another anyOf branch declares; under the
    unique-keys wrapper no key appears twice. Closed schemas need no wrapper (no undeclared keys)."""
    branches = {"anyOf": [{"type": "object", "properties": {"x": {}}, "required": ["id"]}, {"type": "object"}]}
    compiled = compile_json_schema(branches, BYTES, backend=backend)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert _walk(compiled, branches, '{"id":null,"k":1}') and not _walk(compiled, branches, '{"id":null,"id":null}')
    assert not _walk(compile_json_schema({"type": "object"}, BYTES, backend=backend), {"type": "object"}, '{"a":1,"a":2}')
    closed = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"$ref": "#/$defs/p"}}},
              "required": ["a", "b"], "additionalProperties": False,
              "$defs": {"p": {"type": "object", "properties": {"q": {"type": "integer"}}, "required": ["q"], "additionalProperties": False}}}
    # every key required and closed: under closed_objects (strict mode) in schema order, no wrapper
    assert isinstance(compile_json_schema(closed, BYTES, backend=backend, closed_objects=True), LLGuidanceGrammar)
    if backend == "default":  # by default those keys come in any order (tracked), and none twice
        compiled = compile_json_schema(closed, BYTES, backend=backend)
        assert _walk(compiled, closed, '{"b":[{"q":1}],"a":"x"}') and _walk(compiled, closed, '{"a":"x","b":[]}')
        assert not _walk(compiled, closed, '{"b":[],"a":"x","a":"y"}') and not _walk(compiled, closed, '{"b":[]}')
    if backend == "default":  # open: optional keys come in any order (json_key_order), a patterned key must not repeat
        optional = {k: v for k, v in closed.items() if k not in ("required", "additionalProperties")}
        compiled = compile_json_schema(optional, BYTES, backend=backend)
        assert _walk(compiled, optional, '{"b":[],"a":"x"}') and _walk(compiled, optional, '{"a":"x","b":[]}')
        assert not _walk(compiled, optional, '{"a":"x","a":"y"}') and not _walk(compiled, optional, '{"b":[],"b":[]}')


@pytest.mark.parametrize("spec,admits", [
    ({"type": "object"}, True), ({}, True), ({"type": "string"}, False), ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, False),
    ({"type": "object", "properties": {"a": {"enum": [{"x": 1}]}}, "additionalProperties": False}, False),
    ({"type": "object", "properties": {"a": {"description": "any value"}}, "additionalProperties": False}, True),
    ({"type": "object", "additionalProperties": False, "patternProperties": {"^x": {}}}, True),
    ({"type": "object", "properties": {"a": {"type": "array"}}, "additionalProperties": False}, True),  # items: anything
    ({"type": "array", "items": {"type": "object", "properties": {"k": {}}, "additionalProperties": False}}, True),  # k: anything
])
def test_which_schemas_admit_undeclared_keys(spec, admits):
    from constrained_spec.grammar.compiler import _admits_undeclared_keys

    assert _admits_undeclared_keys(spec) == admits


def test_llguidance_matchers_copy_a_pristine_start_state():
    """matcher() copies the compiled start state (constructing an LLMatcher recompiles the
    grammar: seconds for large schemas); copies are independent, the start never advances."""
    from constrained_spec.grammar.llguidance_backend import compile_llguidance

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
    grammar = compile_llguidance("json_schema", schema, BYTES)
    first = grammar.matcher()
    for byte in b'{"a":1}':
        first.accept_token(byte)
    assert first.is_accepting()
    second = grammar.matcher()  # after `first` advanced: still at the start
    assert second.validate_tokens(list(b'{"a":2}')) == 7 and not second.is_accepting()
    assert second.validate_tokens([ord("}")]) == 0


def test_first_mask_does_not_import_llguidance_torch():
    """llguidance.torch compiles a kernel with @torch.compile at import (~2 s, the first mask of
    a process used to pay it); our matcher calls llguidance's mask function directly."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from constrained_spec.grammar import Vocabulary, compile_json_schema\n"
        "from constrained_spec.bitmask import new_bitmask\n"
        "v = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)\n"
        "m = compile_json_schema({'type': 'object', 'properties': {'a': {'type': 'string'}}}, v, backend='llguidance').matcher()\n"
        "mask = new_bitmask(2, v.size); m.fill_bitmask(mask, 1)\n"
        "assert int(mask[0].abs().sum()) == 0 and int((mask[1] >> 27 & 1)[3]) == 1  # row 1 only; '{' (123) allowed\n"
        "print('llguidance.torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


NAMES_AND_COUNTS = [  # llguidance refuses propertyNames, and minProperties next to optional keys
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "properties": {"ab": {"type": "integer"}, "Zz": {}}},
     ["{}", '{"ab":1}', '{"ab":"x"}', '{"Zz":1}', '{"cd":null}', '{"c1":2}']),
    ({"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": {"type": "integer"}}, ["{}", '{"ab":1}', '{"abc":1}', '{"a":"x"}']),
    ({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "properties": {"a": {"type": "string"}, "c": {}}},
     ['{"a":"x"}', '{"b":[]}', '{"c":1}', '{"a":1}', '{"d":1}']),
    # golangci-lint's govet settings (listed names beside a pattern; was our Lark path, 9 s)
    ({"type": "object", "propertyNames": {"enum": ["a", "b", "cd"]}, "patternProperties": {"^.*$": {"type": "object"}}},
     ["{}", '{"a":{}}', '{"a":1}', '{"e":{}}', '{"b":{"x":1},"cd":{}}']),
    ({"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "properties": {"a": {"maximum": 3}, "z": {}},
      "patternProperties": {"^[ab]": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     ['{"a":2}', '{"a":5}', '{"a":"x"}', '{"b":7}', '{"b":"x"}', '{"c":"x"}', '{"c":1}', '{"z":1}', '{"d":"x"}']),
    ({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "patternProperties": {"^a": {}}, "additionalProperties": False},
     ['{"a":1}', '{"b":1}', "{}"]),
    ({"type": "object", "propertyNames": {"format": "uuid"}}, ['{"123e4567-e89b-12d3-a456-426614174000":1}', '{"x":1}']),
    ({"type": "object", "propertyNames": {"$ref": "#/$defs/key"}, "additionalProperties": {"enum": [1, 2]}, "$defs": {"key": {"type": "string", "pattern": "^k[0-9]$"}}},
     ['{"k1":1}', '{"k1":3}', '{"kk":1}', '{"k1":1,"k2":2}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "minProperties": 1}, ["{}", '{"a":1}', '{"b":1}', '{"c":1}', '{"a":"x"}']),
    ({"type": "object", "properties": {"a": {}, "b": {}, "r": {}}, "required": ["r"], "minProperties": 2, "additionalProperties": False},
     ['{"r":1}', '{"a":1,"r":1}', '{"b":2,"r":1}', '{"a":1,"b":1,"r":1}']),
    ({"type": "object", "properties": {"a": {}}, "required": ["a"], "minProperties": 1}, ['{"a":1}', "{}"]),
]


@pytest.mark.parametrize("schema, texts", NAMES_AND_COUNTS, ids=range(len(NAMES_AND_COUNTS)))
def test_property_names_and_min_properties_stay_on_llguidance(schema, texts):
    """Rewritten exactly (llguidance_backend._names_as_properties, _min_properties_as_condition):
    the schema stays on llguidance, and acceptance equals jsonschema's."""
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text


def test_property_names_with_enum_and_const_is_their_intersection():
    """propertyNames {enum, const}: a name must be in both (the rewrite for llguidance takes one
    of them only, so such a schema is left to our compiler)."""
    schema = {"type": "object", "propertyNames": {"enum": ["a", "b"], "const": "a"}}
    compiled = compile_json_schema(schema, BYTES)
    for text in ['{"a":1}', '{"b":1}', "{}"]:
        assert _walk(compiled, schema, text) == _valid(schema, text), text


def test_property_names_listed_only_where_nothing_else_constrains_them():
    """An anyOf branch of propertyNames that is an enum beside a length lists no names: read as
    its enum (the llguidance rewrite made it `enum: [a, bb, c]`), `{"bb":1}` was accepted. A
    format neither engine knows constrains nothing, so such a branch still lists its names."""
    schema = {"type": "object", "propertyNames": {"anyOf": [{"enum": ["a", "bb"], "maxLength": 1}, {"const": "c"}]}}
    compiled = compile_json_schema(schema, BYTES)
    for text in ['{"a":1}', '{"bb":1}', '{"c":1}', '{"d":1}', "{}"]:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    listed = {"type": "object", "propertyNames": {"anyOf": [{"enum": ["a", "bb"], "format": "no-such-format"}, {"const": "c"}]}}
    compiled = compile_json_schema(listed, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ['{"a":1}', '{"bb":1}', '{"c":1}', '{"d":1}']:
        assert _walk(compiled, listed, text) == _valid(listed, text), text


def test_a_negation_through_contains_is_narrowed_for_llguidance(caplog):
    """packer's provisioner: oneOf [ansible (requires playbook_file), shell (inline: array of
    strings)], both open, so an object may match both. "Ansible and not shell" holds where
    `inline` is not an array or holds a non-string item; the second way needs `contains`, which
    llguidance lacks, so the whole schema went to our compiler (19 s for packer, keys in schema
    order). That way is now left out (narrower: sound) and logged; llguidance takes the rest."""
    schema = {"type": "object", "oneOf": [
        {"type": "object", "properties": {"playbook_file": {"type": "string"}}, "required": ["playbook_file"]},
        {"type": "object", "properties": {"inline": {"type": "array", "items": {"type": "string"}}}}]}
    with caplog.at_level(logging.INFO):
        compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert "a negation's ways through an array item (`contains`) left out" in caplog.text
    for text in ['{"inline":["a"]}', '{"playbook_file":"p","inline":3}', "{}", '{"inline":[],"x":1}']:
        assert _valid(schema, text) and _walk(compiled, schema, text), text
    for text in ['{"playbook_file":"p","inline":["a"]}', '{"playbook_file":"p"}', '{"x":1,"playbook_file":"p"}']:  # both match
        assert not _valid(schema, text) and not _walk(compiled, schema, text), text
    narrowed = '{"playbook_file":"p","inline":[1]}'  # valid (only ansible matches), left out
    assert _valid(schema, narrowed) and not _walk(compiled, schema, narrowed)
    under_not = {"type": "object", "not": schema}  # there a narrower part would widen the whole: never narrowed
    compiled = compile_json_schema(under_not, BYTES)
    for text in ['{"playbook_file":"p","inline":["a"]}', '{"inline":["a"]}', narrowed, '{"playbook_file":"p","inline":3}']:
        assert _walk(compiled, under_not, text) == _valid(under_not, text), text


_SIBLING_CYCLES = [
    # resjson: keywords beside an anyOf one of whose branches refers into a cycle
    ({"type": "object", "additionalProperties": {"minProperties": 1, "anyOf": [{"type": "string"}, {"$ref": "#/definitions/r"}]},
      "definitions": {"r": {"type": "object", "additionalProperties": {
          "minProperties": 1, "anyOf": [{"type": "string"}, {"$ref": "#/definitions/r"}]}}}},
     {'{"a":"x"}': True, '{"a":{"b":"y"}}': True, '{"a":{}}': False, '{"a":{"b":{}}}': False, '{"a":1}': False, "{}": True}),
    # minecraft's number providers: a reference back into itself beside a type
    ({"$ref": "#/definitions/n", "definitions": {"n": {"properties": {
        "kind": {"enum": ["c", "u"]}, "min": {"$ref": "#/definitions/n", "type": ["number", "object"]}}}}},
     {'{"kind":"u","min":{"kind":"c","min":2}}': True, '{"min":"s"}': False, '{"min":{"min":"s"}}': False,
      '{"min":{"min":{"min":1.5}}}': True, '"s"': True, '{"min":{"kind":"x"}}': False}),
    # ninjs: the root (by its $id) referred to beside other keywords
    ({"$id": "http://example.com/root.json#", "type": "object", "additionalProperties": False, "properties": {
        "name": {"type": "string"},
        "sub": {"type": "array", "items": {"anyOf": [{"$ref": "http://example.com/root.json#", "required": ["name"]}]}}}},
     {'{"sub":[{"name":"a"}]}': True, '{"sub":[{}]}': False, '{"sub":[{"name":"a","sub":[{"name":"b"}]}]}': True,
      '{"sub":[{"name":"a","sub":[{"x":1}]}]}': False, '{"sub":[{"name":"a","sub":[{"sub":[]}]}]}': False}),
    # renovate's managers: the root beside a type it implies and an array keyword objects ignore
    ({"type": "object", "properties": {"name": {"type": "string"}, "m": {"$ref": "#/definitions/m"}},
      "definitions": {"m": {"$ref": "#", "type": "object", "items": {"type": "string"}, "description": "a manager"}}},
     {'{"m":{"name":"x","m":{}}}': True, '{"m":1}': False, '{"m":{"name":2}}': False, "{}": True}),
    # a type beside a oneOf of closed objects, one of which refers back into the cycle (logical
    # conditions: and / not of conditions): the branches are apart, so once the type moves into
    # them they stay an anyOf (as "branch i and no other" the rewrite nested past the stack)
    ({"$ref": "#/definitions/c", "definitions": {
        "leaf": {"type": "object", "properties": {"is": {"type": "string"}}, "required": ["is"], "additionalProperties": False},
        "logic": {"type": "object", "oneOf": [
            {"type": "object", "properties": {"and": {"type": "array", "items": {"$ref": "#/definitions/c"}}},
             "required": ["and"], "additionalProperties": False},
            {"type": "object", "properties": {"not": {"$ref": "#/definitions/c"}}, "required": ["not"], "additionalProperties": False}]},
        "c": {"type": "object", "oneOf": [{"$ref": "#/definitions/leaf"}, {"$ref": "#/definitions/logic"}]}}},
     {'{"is":"a"}': True, '{"not":{"is":"a"}}': True, '{"and":[{"is":"a"},{"not":{"and":[]}}]}': True,
      '{"is":"a","not":{"is":"b"}}': False, '{"not":{"is":1}}': False, '{"and":[{"x":1}]}': False, '"s"': False}),
]


@pytest.mark.parametrize("schema,texts", _SIBLING_CYCLES)
def test_references_into_a_cycle_beside_keywords_on_llguidance(schema, texts):
    """llguidance refuses a `$ref` into a cycle beside other keywords ("circular references with
    sibling keys", and it moves an anyOf's siblings into its branches), and our compiler recursed
    without end on these shapes (six SchemaStore schemas: minecraft x3, loki, ninjs 2.0, resjson):
    each (reference, siblings) pair becomes one definition that refers back to itself."""
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    if "m" in schema.get("definitions", {}):  # siblings that say nothing beside the root: a plain reference
        assert llguidance_schema(schema, closed_objects=False)["definitions"]["m"] == {"$ref": "#"}
    if "logic" in schema.get("definitions", {}):  # branches apart: an anyOf, no "branch i and not j" negations
        rewritten = llguidance_schema(schema, closed_objects=False)
        assert len(rewritten["definitions"]["c"]["anyOf"]) == 2 and len(json.dumps(rewritten)) < 1.5 * len(json.dumps(schema))
    for text, ok in texts.items():
        assert _valid(schema, text) == ok, f"test case is wrong about {text}"
        assert _walk(compiled, schema, text) == ok, text


_KINDS = {"allOf": [
    {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"x": {"type": "integer"}}, "required": ["x"]}},
    {"if": {"properties": {"kind": {"const": "b"}}}, "then": {"properties": {"y": {"type": "string"}}}},
    {"if": {"properties": {"kind": {"const": "c"}}}, "then": {"properties": {"x": {"type": "string"}}}}]}


_KINDS_BY_ENUM = {"allOf": [{**m, "if": {"properties": {"kind": {"enum": [m["if"]["properties"]["kind"]["const"]]}}}} for m in _KINDS["allOf"]]}


def test_a_subschema_no_value_meets_is_false_for_llguidance():
    """Atom's content construct (JSONSchemaBench o10421, o10515): its `type` property references
    an object type beside a oneOf of string references, which no value meets. llguidance refused
    the whole schema as unsatisfiable (so did it a reference to `false`); the rewrite writes
    `false` in place (the key cannot appear) and the schema stays on llguidance, exact."""
    schema = {"type": "object", "properties": {"type": {"$ref": "#/definitions/kind"}, "src": {"type": "string"}},
              "definitions": {"kind": {"type": "object", "additionalProperties": False,
                                       "oneOf": [{"$ref": "#/definitions/text"}, {"$ref": "#/definitions/mime"}]},
                              "text": {"enum": ["text", "html"]}, "mime": {"type": "string", "pattern": "^[a-z]+/.+$"}}}
    rewritten = llguidance_schema(schema, closed_objects=False)
    assert rewritten["definitions"]["kind"] is False
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    texts = ['{"src":"a"}', "{}", '{"type":"text"}', '{"type":{}}', '{"type":"image/png","src":"a"}', '{"src":"a","x":1}']
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert not any(_walk(compiled, schema, t) for t in texts[2:5]) and _walk(compiled, schema, texts[0])
    with pytest.raises(GrammarError):  # at the root: refused by name, as before
        compile_json_schema(schema["definitions"]["kind"] | {"definitions": schema["definitions"]}, BYTES)


def test_a_reference_the_type_reading_cannot_follow_is_left_to_llguidance(monkeypatch):
    """Where the compiler's type reading cannot follow a reference (it raised on 13 of
    JSONSchemaBench's schemas, Washington Post's among them, and the whole compile failed),
    nothing is written `false`: the schema compiles on llguidance as before."""
    from constrained_spec.grammar.json_schema import _Translator

    kinds = _Translator.kinds

    def unsure(self, schema, depth=0):
        if isinstance(schema, dict) and "$ref" in schema:
            raise GrammarError(f"$ref {schema['$ref']!r} at /$ref does not resolve")
        return kinds(self, schema, depth)

    monkeypatch.setattr(_Translator, "kinds", unsure)
    clear_cache()
    schema = {"type": "object", "properties": {"a": {"$ref": "#/definitions/a"}}, "definitions": {"a": {"type": "integer"}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ['{"a":1}', '{"a":"x"}', "{}"]:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    clear_cache()


def test_a_rewrite_nested_past_the_stack_leaves_the_schema_to_our_compiler(monkeypatch):
    """Where the rewrite for llguidance recurses past Python's stack, compile() goes on with our
    compiler (its answer or its refusal by name), never a RecursionError to the caller."""
    import constrained_spec.grammar.llguidance_schema as rewrite_module

    def too_deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(rewrite_module, "llguidance_schema", too_deep)
    clear_cache()  # another test of this worker may have compiled the schema on llguidance
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    compiled = compile_json_schema(schema, BYTES)
    assert not isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ['{"a":1}', '{"a":"x"}', "{}"]:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    with pytest.raises(GrammarError, match="bounded at 512 characters"):
        compile_json_schema({"type": "string", "maxLength": 512}, BYTES)


def test_a_rewrite_past_its_node_budget_is_cut_off_once(monkeypatch):
    """An overlapping oneOf of open objects through a cycle: each "branch i and no other" holds
    the negated cycle, which the rewrite meets again (a GitHub schema of five query kinds visited
    876,000 nodes in 90 s). Past MAX_REWRITE_NODES the rewrite stops, once (not again for the
    second try), and our compiler decides: here it refuses the schema."""
    import constrained_spec.grammar.llguidance_schema as rewrite_module

    queries = [{"$ref": f"#/definitions/{k}"} for k in ("pattern", "code", "not", "and")]
    schema = {"$ref": "#/definitions/query", "definitions": {
        "query": {"oneOf": queries},
        "pattern": {"type": "object", "properties": {"pattern": {"type": "object"}}, "required": ["pattern"]},
        "code": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        "not": {"type": "object", "properties": {"not": {"oneOf": queries}}, "required": ["not"]},
        "and": {"type": "object", "properties": {"and": {"type": "array", "items": {"oneOf": queries}}}, "required": ["and"]}}}
    with pytest.raises(rewrite_module.RewriteTooLarge):
        with monkeypatch.context() as patch:
            patch.setattr(rewrite_module, "MAX_REWRITE_NODES", 200)
            llguidance_schema(schema, closed_objects=False)
    calls = []
    real = rewrite_module.llguidance_schema

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(rewrite_module, "llguidance_schema", counted)
    monkeypatch.setattr(rewrite_module, "MAX_REWRITE_NODES", 200)
    with pytest.raises(GrammarError, match="nested too deeply|oneOf at /definitions/query/oneOf"):
        compile_json_schema(schema, BYTES)
    assert len(calls) == 1


_WORDS = "^$|(^(?:\\S+\\s+){0,99}\\S+$)"  # up to 100 words (a GitHub schema's question/answer fields)


def test_a_pattern_llguidance_cannot_lex_under_a_long_bound_fails_loudly_or_is_narrowed(smollm2_vocab, smollm2_tokenizer):
    """Under maxLength 5000, llguidance's lexer runs out of derivatives at the first mask inside
    the value ("too many expressions constructed") and leaves only EOS set: sampled, an output
    cut off mid-string. The matcher raises that instead, and the default backend probes such a
    pair at compile time and writes it with maxLength 256 (narrower: listed as narrowed)."""
    from constrained_spec.bitmask import new_bitmask
    from constrained_spec.grammar.llguidance_backend import compile_llguidance

    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 1, "maxLength": 5000, "pattern": _WORDS}},
              "required": ["q"], "additionalProperties": False}
    opening = smollm2_tokenizer.encode('{"q":"', add_special_tokens=False)
    mask = new_bitmask(1, smollm2_vocab.size)
    as_written = compile_llguidance("json_schema", schema, smollm2_vocab).matcher()
    for token in opening:
        as_written.accept_token(token)
    with pytest.raises(GrammarError, match="could not compute the mask at output position 3: lexer error"):
        as_written.fill_bitmask(mask)
    narrowed: dict[str, str] = {}
    assert llguidance_schema(schema, False, narrowed=narrowed, vocab=smollm2_vocab)["properties"]["q"]["maxLength"] == 256
    assert "/properties/q/maxLength" in narrowed
    assert llguidance_schema(schema, False)["properties"]["q"]["maxLength"] == 5000  # no vocabulary, no probe
    simple = {"type": "string", "pattern": "^[a-z]+(?:-[a-z]+)*$", "maxLength": 5000}  # lexed fine: left as written
    assert llguidance_schema(simple, False, vocab=smollm2_vocab)["maxLength"] == 5000
    compiled = compile_json_schema(schema, smollm2_vocab)
    for value in ["What is the meaning of life?", "a", "two  words", " lead", "x" * 300]:
        text = json.dumps({"q": value}, separators=(",", ":"))
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        expected = _valid(schema, text) and len(value) <= 256
        result = walk(compiled, ids, smollm2_vocab.token_bytes, smollm2_vocab.eos_token_id, check_mask=True)
        assert (result.refused_at is None and result.eos_at[-1][1]) == expected, value


_POSITIONS = {"type": "number"}


_COORDINATES = {"oneOf": [{"type": "array", "items": _POSITIONS}, {"type": "array", "items": {"type": "array", "items": _POSITIONS}}]}


@pytest.mark.parametrize("schema,on_llguidance", [
    (_COORDINATES, True),  # GeoJSON's coordinates: a position, or a list of positions; only [] is in both
    ({"type": "object", "properties": {"c": {"oneOf": [{"type": "array", "items": {"type": "string"}, "minItems": 2},
                                                        {"type": "array", "items": {"type": "integer"}, "maxItems": 3}]}}}, True),
    # one branch does not admit []: the rule for the other, the general rewrite for this one
    ({"oneOf": [{"type": "array", "items": _POSITIONS}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]}, True),
    # items not apart (every integer is a number): the general rewrite, our compiler here
    ({"oneOf": [{"type": "array", "items": _POSITIONS}, {"type": "array", "items": {"type": "integer"}}]}, False),
])
def test_a_one_of_of_arrays_with_items_apart_shares_only_the_empty_array(schema, on_llguidance):
    """Arrays of items proven apart meet only at []: each branch is written "and non-empty",
    with no negation through `contains` (which llguidance lacks: both branches were narrowed to
    nothing, llguidance refused the "unsatisfiable" property, and our compiler took 7.6 s)."""
    if schema is _COORDINATES:
        assert llguidance_schema(schema, closed_objects=False) == {"anyOf": [{"allOf": [branch, {"minItems": 1}]} for branch in schema["oneOf"]]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar) == on_llguidance
    values = [[], [1], [1, 2.5], [[1, 2]], [[]], [[1], 2], [1, [2]], ["a"], ["a", "b"], [1, 2, 3, 4], ["a", 1], [[1], [2, 3]], 3]
    for value in values:
        text = json.dumps({"c": value} if "properties" in schema else value, separators=(",", ":"))
        assert _walk(compiled, schema, text) == _valid(schema, text), text


def test_generated_one_ofs_of_arrays_match_jsonschema():
    """Differential, on generated inputs, for the arrays-apart rule and the general rewrite
    beside it: 80 oneOf schemas of two array branches (items of a scalar type, of arrays of
    numbers, or any; minItems 0-2; maxItems none or 1-3), seeded (random.Random(11)), each
    walked on 25 generated values. Nothing jsonschema refuses is ever accepted; where the two
    items schemas are apart (the rule's case) every valid value is accepted too. (Items that
    overlap go through negations needing `contains`, a narrowing that is logged.)"""
    import random

    rng = random.Random(11)
    items = [{"type": "number"}, {"type": "integer"}, {"type": "string"}, {"type": "boolean"},
             {"type": "array", "items": {"type": "number"}}, {}]
    atoms = [0, 1, 2.5, -3, "a", "", True, False, None, [], [1], [1.5, 2], ["x"], {}]

    def branch() -> dict:
        out = {"type": "array", "items": rng.choice(items)}
        if rng.random() < 0.4:
            out["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.3:
            out["maxItems"] = rng.randint(1, 3)
        return out

    compiled_count = 0
    for _ in range(80):
        schema = {"oneOf": [branch(), branch()]}
        texts = [json.dumps(rng.choice(atoms) if rng.random() < 0.1 else [rng.choice(atoms) for _ in range(rng.randint(0, 4))],
                            separators=(",", ":")) for _ in range(25)]
        try:
            compiled = compile_json_schema(schema, BYTES)
        except GrammarError as exc:  # refused by name: only where no value is valid
            assert "allows no value" in str(exc) and not any(_valid(schema, text) for text in texts), (schema, str(exc))
            continue
        compiled_count += 1
        kinds = [{"integer": "number"}.get(b["items"].get("type"), b["items"].get("type")) for b in schema["oneOf"]]
        apart = None not in kinds and kinds[0] != kinds[1]
        for text in texts:
            accepted, valid = _walk(compiled, schema, text), _valid(schema, text)
            assert accepted == valid if apart else valid or not accepted, (schema, text, accepted, valid)
    assert compiled_count >= 60


def test_conditions_on_single_value_enums_are_discriminated_too():
    """`enum: [c]` is `const: c`: jfrog-pipelines writes its 28 step kinds so, and as 2^28
    separate conditions its schema took over 300 s to compile (25 s as one choice)."""
    from constrained_spec.grammar.json_merge import discriminated_conditions

    for schema in (_KINDS, _KINDS_BY_ENUM):
        node = json.loads(json.dumps(schema))
        discriminated_conditions(node)
        assert len(node["allOf"]) == 1 and len(node["allOf"][0]["anyOf"]) == 3 + 3  # 3 kinds; another kind, no kind, non-objects
    typed = {"allOf": [{**m, "if": {**m["if"], "type": "object"}} for m in _KINDS["allOf"]]}
    node = json.loads(json.dumps(typed))
    discriminated_conditions(node)
    assert "allOf" not in node["allOf"][0]["anyOf"][-1]  # non-objects: no then applies
    mixed = {"allOf": [_KINDS["allOf"][0], {**_KINDS["allOf"][1], "if": {"properties": {"kind": {"enum": ["b", "c"]}}}}]}
    node = json.loads(json.dumps(mixed))
    discriminated_conditions(node)  # a two-value enum is not one constant: left as written
    assert node == mixed
    # `type: string` beside the constant (yippee-ki's config writes each so) is the same constant;
    # a type the constant is not leaves the conditions as written
    string_typed = {"allOf": [{**m, "if": {"properties": {"kind": {"type": "string", **m["if"]["properties"]["kind"]}}}} for m in _KINDS["allOf"]]}
    node = json.loads(json.dumps(string_typed))
    discriminated_conditions(node)
    assert len(node["allOf"]) == 1 and len(node["allOf"][0]["anyOf"]) == 6
    wrong_type = {"allOf": [{**m, "if": {"properties": {"kind": {"type": "integer", **m["if"]["properties"]["kind"]}}}} for m in _KINDS["allOf"]]}
    node = json.loads(json.dumps(wrong_type))
    discriminated_conditions(node)
    assert node == wrong_type
    # a sibling member requiring the key and saying `type: object` leaves neither the no-key
    # branch nor the non-object one (each met every `then` at once)
    base = {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a", "b", "c"]}}}
    node = {"allOf": [base, *json.loads(json.dumps(_KINDS["allOf"]))]}
    discriminated_conditions(node)
    assert node["allOf"][0] == base and len(node["allOf"][1]["anyOf"]) == 3 + 1


@pytest.mark.parametrize("schema", [
    _KINDS,  # K optional, non-objects admitted (minecraft's number providers)
    {**_KINDS, "type": "object"},
    {**_KINDS, "type": "object", "required": ["kind"]},  # K required (GitHub's issue forms)
    {"allOf": [{**m, "if": {**m["if"], "required": ["kind"]}} for m in _KINDS["allOf"]]},  # each if requires K
    _KINDS_BY_ENUM,  # `enum: [c]` for `const: c` (jfrog-pipelines)
    # each if says `type: object` (v2ray's config; 7.6 s natively, as separate conditions
    # llguidance found the schema too large): a non-object meets no then
    {"allOf": [{**m, "if": {**m["if"], "type": "object", "required": ["kind"]}} for m in _KINDS["allOf"]]},
    {"allOf": [{**m, "if": {**m["if"], "type": "object"}} for m in _KINDS["allOf"]]},
])
@pytest.mark.parametrize("backend", ["default", "native"])
def test_discriminated_conditions_as_one_choice(schema, backend):
    """Conditions on one key's constants are one anyOf (linear, not 2^n choices for llguidance
    or for our compiler), exactly: checked against jsonschema on objects with each kind, another
    kind, no kind, and non-objects (where every `if` holds). Natively, `not enum` makes the schema
    recursive, where keys only an open object admits are not generated (a logged narrowing, the
    same before this rewrite): objects with keys their branch leaves undeclared may only be
    refused there."""
    compiled = compile_json_schema(schema, BYTES, backend=backend)
    texts = ['{"kind":"a","x":1}', '{"kind":"a"}', '{"kind":"a","x":"s"}', '{"kind":"b","y":"s"}', '{"kind":"b","y":1}',
             '{"kind":"c","x":"s"}', '{"kind":"c","x":1}', '{"kind":"d","x":null}', '{"kind":"d"}', '{"x":1}', '{"x":1,"y":"s"}', '{}',
             '{"y":"s"}', "3", '"s"', "[]"]
    verdicts = [_valid(schema, t) for t in texts]
    assert True in verdicts and False in verdicts
    narrowed = set()  # natively: objects whose keys the branch admitting them leaves undeclared
    if backend == "native":
        narrowed = {'{"kind":"d","x":null}'}
        if all("required" in m["if"] for m in schema["allOf"]):  # no `if` holds without kind: no then declares x, y
            narrowed |= {'{"x":1}', '{"x":1,"y":"s"}', '{"y":"s"}'}
    for text, ok in zip(texts, verdicts):
        assert _walk(compiled, schema, text) == (ok and text not in narrowed), text


@pytest.mark.parametrize("backend", ["default", "native"])
def test_described_references_to_discriminated_conditions_that_recur(backend):
    """yippee-ki's config: each kind an allOf of a base member (`type: object`, `name` required)
    and if/then's on `name`'s constants (each `{type: string, const}`), referenced as `allOf:
    [{$ref}, {description}]`, one kind's `then` referring back. Our compiler merged the
    referenced conditions pairwise (2^n ways) and inlined the described reference without end;
    it refused the schema after 13 s. Now one choice and one rule: walked against jsonschema."""
    described = lambda ref: {"allOf": [{"$ref": ref}, {"description": "the supplier"}]}  # noqa: E731
    kinds = ["static", "upper", "file"]
    supplier = {"allOf": [{"type": "object", "properties": {"name": {"type": "string", "enum": kinds}}, "required": ["name"]},
                          *({"if": {"type": "object", "properties": {"name": {"type": "string", "const": k}}}, "then": {"$ref": f"#/$defs/{k}"}}
                            for k in kinds)]}
    kind = lambda name, props: {"type": "object", "required": ["name", *props], "additionalProperties": False,  # noqa: E731
                                "properties": {"name": {"const": name}, **props}}
    schema = {"$defs": {"supplier": supplier, "static": kind("static", {"value": {"type": "string"}}),
                        "upper": kind("upper", {"of": described("#/$defs/supplier")}), "file": kind("file", {"path": {"type": "string"}})},
              "type": "object", "properties": {"key": described("#/$defs/supplier")}, "required": ["key"], "additionalProperties": False}
    compiled = compile_json_schema(schema, BYTES, backend=backend)
    texts = ['{"key":{"name":"static","value":"v"}}', '{"key":{"name":"upper","of":{"name":"file","path":"p"}}}',
             '{"key":{"name":"upper","of":{"name":"upper","of":{"name":"static","value":"v"}}}}', '{"key":{"name":"file","path":"p"}}',
             '{"key":{"name":"static"}}', '{"key":{"name":"static","path":"p"}}', '{"key":{"name":"upper","of":{"name":"upper"}}}',
             '{"key":{"name":"other","value":"v"}}', '{"key":{"value":"v"}}', '{"key":"static"}', '{"key":{"name":"file","path":1}}']
    verdicts = [_valid(schema, t) for t in texts]
    assert verdicts.count(True) == 4
    for text, ok in zip(texts, verdicts):
        assert _walk(compiled, schema, text) == ok, (backend, text)


_ASSERTION_KINDS = {  # helm's test suite: each assertion an object with one kind's key (26 there); no
    # integers, whose complement ("a number with a fraction") llguidance cannot be told exactly
    "equal": {"type": "object", "required": ["path", "value"], "properties": {"path": {"type": "string"}, "value": {}},
              "additionalProperties": False},
    "exists": {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False},
    "contains": {"type": "object", "required": ["content"], "properties": {"content": {}, "count": {"type": "number", "minimum": 0}}},
    "isKind": {"type": "object", "required": ["of"], "properties": {"of": {"type": "string"}}},
    "hasDocuments": {"type": "object", "required": ["count"], "properties": {"count": {"type": "string"}}},
    "lengthEqual": {"type": "number", "minimum": 1},
    "isNull": {"type": "boolean"},
    "matchSnapshot": True,
}


@pytest.mark.parametrize("typed", ["none", "branches", "siblings"])
def test_one_of_kinds_each_by_a_required_key_of_their_own(typed):
    """A oneOf of eight kinds, each `{"properties": {k: S}, "required": [k]}`: exactly one kind's
    key present and meeting its schema, every other kind's key absent or failing its own (so
    `{"equal": ..., "isNull": 3}` is valid: isNull's branch fails). As pairwise negations of
    whole branches (8 x 7) llguidance found helm's 26 kinds too large and our compiler refused
    them after 5 s; now one object per kind on llguidance, each other key's schema negated once.
    A kind's key named `contains` is a property, not the keyword. Walked against jsonschema."""
    branch = lambda k, s: {"properties": {k: s}, "required": [k], **({"type": "object"} if typed == "branches" else {})}  # noqa: E731
    schema = {"properties": {k: True for k in [*_ASSERTION_KINDS, "template"]}, "additionalProperties": False,
              "oneOf": [branch(k, s) for k, s in _ASSERTION_KINDS.items()], **({"type": "object"} if typed == "siblings" else {})}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    texts = ['{"equal":{"path":"a","value":1}}', '{"exists":{}}', '{"contains":{"content":[1]}}', '{"contains":{"content":1,"count":-1}}',
             '{"lengthEqual":2,"template":"t"}', '{"lengthEqual":0}', '{"isNull":true}', '{"matchSnapshot":null}',
             '{"equal":{"path":"a","value":1},"exists":{}}', '{"equal":{"path":"a","value":1},"isNull":3}', '{"isKind":{"of":"x"},"lengthEqual":0}',
             '{"isKind":{"of":"x"},"matchSnapshot":1}', '{"exists":{"path":"p","x":1}}', '{"hasDocuments":{"count":2},"isNull":false}',
             '{"template":"t"}', "{}", '{"other":1}', "3", '"equal"', "[]", "null"]
    verdicts = [_valid(schema, text) for text in texts]
    assert verdicts.count(True) >= 8 and verdicts.count(False) >= 8
    for text, ok in zip(texts, verdicts):
        assert _walk(compiled, schema, text) == ok, (typed, text)


def test_one_of_kinds_by_key_through_a_cycle():
    """component_spec's predicates: seven kinds by key, one kind's value the predicate itself.
    `not predicate` cannot be written (a negation through a cycle), so beside another kind's key
    that key is only absent: a narrowing, listed; everything accepted is valid, and everything
    valid but the narrowed shape is accepted. (Keys in declared order: in a union's branches our
    default backend keeps them so.) Walked against jsonschema."""
    kind = lambda key, value: {"type": "object", "required": [key], "properties": {key: value}}  # noqa: E731
    numbers = {"type": "array", "items": {"type": "number"}}
    preds = {"type": "array", "items": {"$ref": "#/$defs/pred"}}
    schema = {"$defs": {"pred": {"oneOf": [kind("==", numbers), kind("!=", numbers), kind("<", numbers), kind(">", numbers),
                                           kind("and", preds), kind("or", preds), kind("not", {"$ref": "#/$defs/pred"})]}},
              "$ref": "#/$defs/pred"}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    narrowed = '{"==":[1],"not":5}'  # `not` fails its kind (5 is no predicate): valid, not generated
    texts = ['{"==":[1,2]}', '{"and":[{"==":[1]},{"not":{"<":[]}}]}', '{"not":{"not":{"or":[]}}}', '{"==":5,"and":[]}', '{"!=":{},">":[2]}',
             '{"==":[1],"and":[]}', '{"==":[1],"not":{"==":[]}}', '{"and":[{"==":[1],"or":[]}]}', '{"not":{}}', "{}", "[]", narrowed]
    verdicts = [_valid(schema, text) for text in texts]
    assert verdicts == [True] * 5 + [False] * 6 + [True]
    for text, ok in zip(texts, verdicts):
        assert _walk(compiled, schema, text) == (ok and text != narrowed), text


def test_one_of_kinds_by_key_where_one_is_untyped_stays_exact():
    """One kind untyped, the others `type: object`, nothing beside: a non-object meets the
    untyped kind alone, so it is valid; the one-object-per-kind writing would drop it, and is not
    used. Three kinds are negated pairwise on llguidance: the `contains` property in a negated
    branch is no `contains` keyword (taken for one, the negation was refused)."""
    kinds = list(_ASSERTION_KINDS.items())[:3]
    schema = {"oneOf": [{"properties": {k: s}, "required": [k], **({"type": "object"} if i else {})} for i, (k, s) in enumerate(kinds)]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    texts = ["3", '"s"', "[]", '{"equal":{"path":"a","value":1}}', '{"exists":{}}', '{"exists":{},"contains":{"content":1}}', "{}"]
    verdicts = [_valid(schema, text) for text in texts]
    assert verdicts[:3] == [True, True, True] and False in verdicts
    for text, ok in zip(texts, verdicts):
        assert _walk(compiled, schema, text) == ok, text


@pytest.mark.parametrize("branches", [
    [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}, "c": {"type": "string"}}}],  # traefik's services
    [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}, "required": ["b"]}],  # one branch alone takes {}
    [{"properties": {"a": {}}, "required": ["a"]}, {"properties": {"b": {}}, "required": ["b"]}, {"type": "object", "properties": {"c": {}}}],
])
def test_one_of_closed_objects_with_their_own_keys(branches):
    """A oneOf of closed objects declaring disjoint keys meets only on `{}` and non-objects: as
    disjoint branches for llguidance (traefik's file providers took over 20 s on our compiler),
    exactly: walked against jsonschema."""
    schema = {"oneOf": [{**b, "additionalProperties": False} for b in branches]}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    texts = ["{}", '{"a":1}', '{"a":"x"}', '{"b":null}', '{"c":"s"}', '{"b":1,"c":"s"}', '{"a":1,"b":1}', '{"c":1}', "1", '"s"', "[]"]
    verdicts = [_valid(schema, t) for t in texts]
    assert True in verdicts and False in verdicts
    for text, ok in zip(texts, verdicts):
        assert _walk(compiled, schema, text) == ok, text


def test_schemas_a_reference_finds_outside_keyword_positions_are_rewritten_too():
    """`#/$defs/group/a`: `group` is a definition, `a` an unknown keyword of it holding a schema
    (venvironment's `#/definitions/d15ff/full`). Left as written, llguidance read its `format:
    date` itself and took 2023-02-29, which format checkers refuse (found in the SchemaStore sweep)."""
    schema = {"type": "object", "properties": {"d": {"$ref": "#/$defs/group/a"}, "e": {"$ref": "#/$defs/group/b"}},
              "$defs": {"group": {"a": {"type": "string", "format": "date"},
                                  "b": {"if": {"required": ["k"]}, "then": {"required": ["v"]}}}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ['{"d":"2023-02-28"}', '{"d":"2023-02-29"}', '{"d":"x"}', '{"e":{"k":1,"v":2}}', '{"e":{"k":1}}', '{"e":{}}']:
        assert _walk(compiled, schema, text) == _valid(schema, text), text


def test_parts_of_a_closed_object_need_no_unique_keys_wrapper():
    """An object closed where its parts merge holds only its declared keys: llguidance alone,
    without the unique-keys wrapper (~5 us of Python a mask), and still no key twice. (Where
    the parts only require keys, "at least one of a, b", the anyOf is lifted to the required-keys
    tracker and the keys move: the wrappers then keep them single, in any order.)"""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "null"}},  # (a third branch: no lift)
              "anyOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["a"], "minLength": 2}]}
    compiled = compile_json_schema(schema, BYTES, closed_objects=True)
    assert isinstance(compiled, LLGuidanceGrammar)
    for text, ok in {'{"a":"x"}': True, '{"a":"x","b":null}': True, '{"a":"x","a":"y"}': False, '{"c":1}': False, "{}": False}.items():
        assert _walk(compiled, schema, text) == ok, text
    lifted = {**schema, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    compiled = compile_json_schema(lifted, BYTES, closed_objects=True)
    assert not isinstance(compiled, LLGuidanceGrammar)
    for text, ok in {'{"a":"x"}': True, '{"b":null,"a":"x"}': True, '{"a":"x","a":"y"}': False, '{"b":null,"b":null}': False,
                     '{"c":1}': False, "{}": False}.items():
        assert _walk(compiled, lifted, text) == ok, text


@pytest.mark.parametrize("schema,dropped", [
    # editor schemas suggest values beside the free type: the suggestions add nothing
    ({"anyOf": [{"enum": ["auto", "none"], "description": "d"}, {"type": "string"}]}, 1),
    ({"anyOf": [{"enum": ["green", "blue"]}, {"type": "string", "minLength": 1, "x-note": 1}]}, 1),
    ({"anyOf": [{"type": "string", "enum": ["a", "bb"]}, {"const": 3}, {"type": ["string", "integer"], "maxLength": 2}]}, 2),
    ({"anyOf": [{"enum": [1, 2.5]}, {"type": "number"}]}, 1),
    ({"anyOf": [{"const": True}, {"type": "boolean"}, {"enum": [None]}, {"type": "null"}]}, 2),
    # kept: a value the scalar branch does not admit, a constraint beyond the value list, no scalar branch
    ({"anyOf": [{"enum": ["", "x"]}, {"type": "string", "minLength": 1}]}, 0),
    ({"anyOf": [{"enum": ["abc"]}, {"type": "string", "maxLength": 2}]}, 0),
    ({"anyOf": [{"enum": [1.0]}, {"type": "integer"}]}, 0),  # an integer from draft 6 on, not in draft 4
    ({"anyOf": [{"enum": ["a"], "minLength": 2}, {"type": "string"}]}, 0),
    ({"anyOf": [{"enum": ["a"]}, {"type": "string", "pattern": "^a"}]}, 0),
    ({"anyOf": [{"enum": [[1]]}, {"type": "array"}]}, 0),
    ({"oneOf": [{"enum": ["a"]}, {"type": "string"}]}, 0),  # "a" meets both branches: no instance of oneOf
])
def test_value_lists_a_scalar_branch_admits_are_left_out_of_any_of(schema, dropped):
    """`anyOf: [enum, {type: string}]` made llguidance lex both at a string's start (~300 us a
    mask instead of ~10): the value list is left out where a bare scalar branch admits every
    value. The same instances, checked against jsonschema."""
    rewritten = llguidance_schema(schema, closed_objects=False)
    key = "anyOf" if "anyOf" in schema else "oneOf"
    assert len(schema[key]) - len(rewritten.get("anyOf", rewritten.get("oneOf", []))) == dropped
    compiled = compile_json_schema(schema, BYTES, closed_objects=False)
    for text in ('"auto"', '"green"', '""', '"x"', '"a"', '"bb"', '"abc"', '"zz"', "3", "1", "2.5", "true", "false", "null", "[1]", "[]", "{}"):
        assert _walk(compiled, schema, text) == _valid(schema, text), text  # (1.0: integers are written canonically)


def test_one_of_told_apart_by_property_names_stays_on_llguidance():
    """lsdlschema's phrasings: each branch requires its own key and lists, in propertyNames (an
    anyOf of a const and a shared enum, through a reference), the only names it takes, so no
    object meets two branches. The disjointness proof reads propertyNames lists and a member of
    an allOf within its parent's `type`; propertyNames' unknown format constrains nothing."""
    def branch(key: str) -> dict:
        return {"type": "object", "allOf": [
            {"properties": {key: {"type": "integer"}}, "propertyNames": {"anyOf": [{"const": key}, {"$ref": "#/$defs/common"}]}, "required": [key]},
            {"$ref": "#/$defs/commonProps"}]}
    schema = {"$defs": {"common": {"enum": ["State", "Weight"]}, "commonProps": {"properties": {"State": {"type": "string"}, "Weight": {"type": "number"}}},
                        "identifier": {"type": "string", "pattern": "^.+$", "format": "identifier"}},
              "type": "object", "properties": {"phrasings": {"type": "array", "items": {"oneOf": [branch("A"), branch("B"), branch("C")]}},
                                               "names": {"type": "object", "propertyNames": {"$ref": "#/$defs/identifier"}}}}
    from constrained_spec.grammar.json_schema import _Translator

    branches = schema["properties"]["phrasings"]["items"]["oneOf"]
    assert _Translator(schema, "compact").disjoint(branches, {})  # proven apart: an anyOf for llguidance, no exclusions
    rewritten = llguidance_schema(schema, closed_objects=False)["properties"]["phrasings"]["items"]
    assert set(rewritten) == {"anyOf"} and [len(b["allOf"]) for b in rewritten["anyOf"]] == [2, 2, 2]  # each branch as it was
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for text in ('{"phrasings":[{"A":1}]}', '{"phrasings":[{"A":1,"State":"s"},{"C":2,"Weight":1.5}]}', '{"phrasings":[{"A":1,"B":2}]}',
                 '{"phrasings":[{"State":"s"}]}', '{"phrasings":[{"A":1,"Other":1}]}', '{"phrasings":[1]}', '{"phrasings":[{"A":"x"}]}',
                 '{"names":{"x":1}}', '{"names":{"":1}}', '{"names":{}}'):
        assert _walk(compiled, schema, text) == _valid(schema, text), text


OPEN_COUNTS = [
    # catalog-info's API definition: a string, or an object of exactly one key (`$json`, `$text`,
    # `$yaml`, or any other)
    {"type": ["string", "object"], "minLength": 1, "minProperties": 1, "maxProperties": 1,
     "properties": {"$json": {"type": "string", "minLength": 1}, "$text": {"type": "string"}, "$yaml": {"type": "string"}}},
    {"type": "object", "required": ["p"], "maxProperties": 2, "properties": {"p": {"type": "integer"}, "a": {"type": "string"}, "b": {}},
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "minProperties": 2, "maxProperties": 3, "properties": {"a": {"type": "string"}, "b": False}},
]


@pytest.mark.parametrize("schema", OPEN_COUNTS, ids=range(len(OPEN_COUNTS)))
def test_property_counts_of_an_open_object_on_llguidance(schema):
    """min/maxProperties beside optional keys where undeclared keys are allowed: llguidance
    refuses them as written; one branch per set of declared keys present
    (_open_property_counts_as_key_sets) keeps the schema on llguidance, exactly. Every subset of
    declared and undeclared keys, each with a value of a type some key takes and one it may not,
    against jsonschema."""
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    keys = [*schema["properties"], "x", "y"]
    texts = ['"s"', '""', "1", "[]"]
    for n in range(4):
        for chosen in itertools.combinations(keys, n):
            for value in ('"v"', "7"):
                texts.append("{" + ",".join(f'"{k}":{value}' for k in chosen) + "}")
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    for text in ('{"a":"v","p":1}', '{"x":2,"a":"v"}', '{"p":1,"a":"v","x":"v"}'):  # keys out of declared order: sound only
        assert not _walk(compiled, schema, text) or _valid(schema, text), text


def test_listed_patterns_beside_other_patterns_on_llguidance():
    """patternProperties that list their keys beside a pattern matching them too (chrome-manifest:
    `.*` and `^_execute_browser_action$`; minecraft: `^(?:nbt|team)$` and `^(?:nbt|potion|tag)$`):
    llguidance refuses patterns that are not disjoint; as declared properties, which llguidance
    intersects with the patterns matching them, the schema stays on llguidance, exactly (keys
    in declared order, as the compiler writes them)."""
    schema = {"type": "object", "properties": {"team": {"maximum": 8}},
              "patternProperties": {".*": {"type": "integer"}, "^(?:nbt|team)$": {"minimum": 3}, "^(?:nbt|potion)$": {"multipleOf": 2}}}
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    for key in ("nbt", "team", "potion", "other", "nb", "teams"):
        for value in ("1", "2", "4", "5", "9", "10", '"x"'):
            text = "{" + f'"{key}":{value}' + "}"
            assert _walk(compiled, schema, text) == _valid(schema, text), text
    # listed keys are declared ones now: written after `team` (declared first), in name order
    assert _walk(compiled, schema, '{"team":5,"nbt":4,"potion":6,"z":-1}')
    assert not _walk(compiled, schema, '{"team":5,"nbt":5,"potion":6,"z":-1}')


@pytest.mark.parametrize("between", [{"allOf": [{"type": "object"}]}, {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
                                     {"oneOf": [{"type": "object"}]}, {"$ref": "#/$defs/any"}], ids=["allOf", "anyOf", "oneOf", "$ref"])
@pytest.mark.parametrize("rest", [False, {"type": "string"}], ids=["closed", "typed"])
def test_patterns_after_an_applicator_still_meet_additional_properties(between, rest):
    """llguidance 1.9 read `additionalProperties`, then an allOf/anyOf/oneOf/`$ref`, then
    `patternProperties` as two schemas merged: the patterns' keys counted as additional there
    (`{"a":1}` refused under `^a` beside additionalProperties false; found where json_key_order
    appended its patterns after an anyOf). The patterns move next to additionalProperties before
    llguidance reads the schema: every text judged as jsonschema judges it."""
    schema = {"type": "object", "additionalProperties": rest, **between, "patternProperties": {"^a": {"type": "integer"}},
              "$defs": {"any": {"type": "object"}}}
    compiled = compile_json_schema(schema, BYTES)
    texts = ['{"a":1}', '{"a":3,"ab":2}', '{"a":"s"}', '{"b":"s"}', '{"b":1}', '{"b":"s","a":1}', "{}"]
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert _valid(schema, '{"a":1}')


def test_string_branches_told_apart_over_code_points_stay_a_union():
    """pubspec's version constraint: a oneOf of `any`, a version, a range (`>=1.0.0 <2.0.0`, a
    loop over `\\d`, `\\S`, `\\s`) and a caret version. No string matches two, but the byte
    automata for the range outgrow their budget on the Unicode classes, so the branches were not
    shown apart; written "this one and no other", the version and caret branches narrowed to
    `false` ("1.0.0" and "^2.10.0" refused). Over code points (regular.patterns_disjoint, both
    readings) they are apart: a union, every text judged as jsonschema judges it."""
    from constrained_spec.grammar.byte_dfa import patterns_share
    from constrained_spec.grammar.regular import patterns_disjoint

    version, caret = "^\\d+\\.\\d+\\.\\d+(?:[+-]\\S+)?$", "^\\^\\d+\\.\\d+\\.\\d+(?:[+-]\\S+)?$"
    ranges = "^(?:(?:>=|>|<=|<)\\d+\\.\\d+\\.\\d+(?:[+-]\\S+)?\\s*)+$"
    assert patterns_share(version, ranges) is None and patterns_disjoint(version, ranges)
    assert not patterns_disjoint(ranges, "^>=1") and not patterns_disjoint(version, "\\d$")  # overlapping ones stay apart-less
    schema = {"oneOf": [{"type": "string", "enum": ["any", ""]}, {"$ref": "#/definitions/version"},
                        {"type": "string", "pattern": ranges}, {"type": "string", "pattern": caret}],
              "definitions": {"version": {"type": "string", "pattern": version}}}
    assert False not in llguidance_schema(schema, closed_objects=False)["anyOf"]
    compiled = compile_json_schema(schema, BYTES)
    texts = ['"1.0.0"', '"^2.10.0"', '">=2.12.0 <3.0.0"', '"any"', '""', '"x"', '">1.0.0 ^1.0.0"', '"1.0"', '"^1.0.0-beta"']
    for text in texts:
        assert _walk(compiled, schema, text) == _valid(schema, text), text
    assert all(_walk(compiled, schema, t) for t in texts[:5])


@pytest.mark.parametrize("schema, texts", [
    # SchemaStore sounds: `not if` of an array's items needs `contains`, which llguidance lacks
    ({"type": "array", "if": {"items": {"type": "string"}}, "then": {"items": {"type": "string"}},
      "else": {"items": {"properties": {"n": {"type": "integer"}}}}},
     ['["s",{"n":1}]', '["s",{"n":"x"}]', '["a","b"]', '[{"n":1}]', '[1,{"n":"q"}]', "[]", '[{"n":1.5},"t"]']),
    ({"type": "object", "if": {"properties": {"k": {"const": "a"}}, "required": ["k"]}, "then": {"required": ["k"]},
      "else": {"required": ["z"]}},
     ['{"k":"a"}', '{"k":"b"}', '{"z":1,"k":"b"}', "{}", '{"z":1}', '{"z":1,"k":"a"}']),
], ids=["array-items", "object-kind"])
def test_a_condition_its_then_holds_for_is_written_as_if_or_else(schema, texts):
    """Where every value meeting `if` meets `then`, (if and then) or (not if and else) is `if` or
    `else`: no negation of `if` needed (sounds' `else` side had been left out as `not if` needs
    `contains`). Each text byte by byte (EOS only after valid prefixes) against jsonschema;
    valid and invalid texts both present, every valid one accepted."""
    spec = llguidance_schema(schema, False)
    assert '"if"' not in json.dumps(spec)
    compiled = compile_json_schema(schema, BYTES)
    verdicts = {text: _valid(schema, text) for text in texts}
    assert set(verdicts.values()) == {True, False}
    for text, valid in verdicts.items():
        assert _walk(compiled, schema, text) is valid, text
