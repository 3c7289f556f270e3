"""Optional keys in any order on the default backend (grammar/json_key_order.py, issue 11).

llguidance writes declared keys in schema order; the default backend hands it optional keys as
exact patterns where that keeps the schema's own order writable. Checked on the real tokenizer
(SmolLM2), each walk judged by jsonschema:
  - instances with their optional keys in other orders are accepted (the keys a merged object
    requires, and optional ones declared before them, stay where the schema declares them),
    and so is the schema's own order;
  - invalid variants (a moved key with a wrong value, a key repeated, an unknown key where
    objects are closed) are refused;
  - where a later part of a merge requires a key, earlier parts keep their keys declared (the
    declared order stays writable).
The shapes are those of the corpus schemas whose valid instances llguidance refused for key order
(asmdef, codeclimate, label-commenter-config, webjob-publish-settings)."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from constrained_spec.bitmask import new_bitmask
from constrained_spec.grammar import Vocabulary, compile_json_schema
from constrained_spec.grammar.json_key_order import any_order, exact_key
from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar


_BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)  # one token a byte, EOS 256

def _engine(compiled):
    while hasattr(compiled, "inner"):
        compiled = compiled.inner
    return compiled


def _accepts(compiled, tokenizer, vocab, text: str) -> bool:
    """The matcher's verdict on `text` in the model's own tokenization, EOS at the end."""
    mask, matcher = new_bitmask(1, vocab.size), compiled.matcher()

    def allowed(token: int) -> bool:
        matcher.fill_bitmask(mask)
        return bool((int(mask[0, token // 32]) >> (token % 32)) & 1)

    for token in tokenizer.encode(text, add_special_tokens=False):
        if not allowed(token):
            return False
        matcher.accept_token(token)
    return allowed(vocab.eos_token_id)


ENABLED = {"type": "object", "properties": {"enabled": {"type": "boolean"}}}
# name -> (schema, valid texts in other key orders (the first in the schema's own order), invalid texts)
CASES = {
    # asmdef: the root's keys next to an anyOf whose branches declare one of them again
    "merged-branches": ({"type": "object", "properties": {"name": {"type": "string"}, "refs": {"type": "array", "items": {"type": "string"}},
                                                          "include": {"type": "array"}},
                         "anyOf": [{"properties": {"include": {"minItems": 1}}}, {"properties": {"include": {"maxItems": 0}}}]},
                        ['{"name":"x","refs":["u"],"include":["a"]}', *(
                            "{" + ",".join(p) + "}" for p in itertools.permutations(['"name":"x"', '"refs":["u"]', '"include":["a"]']))],
                        ['{"include":"a","name":"x"}', '{"refs":["u"],"name":1}']),
    # codeclimate: a $ref next to properties (llguidance wrote the sibling's keys first)
    "ref-and-siblings": ({"type": "object", "properties": {"check": {"$ref": "#/$defs/enabled", "properties": {"config": {"type": "object"}}}},
                          "$defs": {"enabled": ENABLED}},
                         ['{"check":{"config":{"t":5},"enabled":true}}', '{"check":{"enabled":true,"config":{"t":5}}}'],
                         ['{"check":{"enabled":1,"config":{}}}', '{"check":{"config":{},"enabled":1}}', '{"check":{"config":1}}']),
    # label-commenter-config: array items with a $ref and properties of their own
    "items-ref": ({"type": "object", "properties": {"labels": {"type": "array", "items": {"$ref": "#/$defs/label", "properties": {"name": {"type": "string"}}}}},
                   "$defs": {"label": {"type": "object", "properties": {"labeled": {"type": "object"}, "unlabeled": {"type": "object"}}}}},
                  ['{"labels":[{"name":"bug","labeled":{}}]}', '{"labels":[{"labeled":{},"name":"bug","unlabeled":{}}]}',
                   '{"labels":[{"unlabeled":{},"labeled":{}}]}'],
                  ['{"labels":[{"labeled":{},"name":5}]}', '{"labels":[{"labeled":1,"name":"a"}]}']),
    # webjob-publish-settings: oneOf of references that require different keys
    "branch-requirements": ({"type": "object", "required": ["mode"], "$defs": {
                                "shared": {"properties": {"job": {"type": "string"}, "start": {"type": "string"}, "every": {"type": "integer"}}},
                                "scheduled": {"required": ["job", "start"], "allOf": [{"$ref": "#/$defs/shared"}], "properties": {"mode": {"const": "sched"}}},
                                "manual": {"required": ["mode"], "allOf": [{"$ref": "#/$defs/shared"}], "properties": {"mode": {"const": "manual"}}}},
                             "oneOf": [{"$ref": "#/$defs/scheduled"}, {"$ref": "#/$defs/manual"}]},
                            ['{"mode":"manual","job":"j","every":3}', '{"mode":"manual","every":3,"job":"j"}'],
                            ['{"mode":"manual","job":1}', '{"mode":"sched","every":3}', '{"mode":"manual","every":"x","job":"j"}']),
    # a required key declared between optional ones: optional keys after it in any order
    "required-middle": ({"type": "object", "properties": {"a": {"type": "string"}, "id": {"type": "integer"}, "b": {"type": "boolean"},
                                                          "c": {"type": "null"}}, "required": ["id"], "additionalProperties": {"type": "integer"}},
                        ['{"a":"x","id":1,"b":true,"c":null}', '{"a":"x","id":1,"c":null,"b":true}', '{"id":1,"c":null}', '{"id":1,"d":5,"b":true}'],
                        ['{"id":1,"b":1}', '{"id":1,"c":null,"d":"x"}', '{"id":1,"c":null,"c":null}']),
}


@pytest.mark.parametrize("case", list(CASES))
def test_optional_keys_in_any_order(case, smollm2_tokenizer, smollm2_vocab):
    schema, valid, invalid = CASES[case]
    compiled = compile_json_schema(schema, smollm2_vocab)
    assert isinstance(_engine(compiled), LLGuidanceGrammar), "these shapes stay on llguidance"
    validator = jsonschema.Draft202012Validator(schema)
    for text in valid:
        assert validator.is_valid(json.loads(text)), text
        assert _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), f"{case}: valid {text} refused"
    for text in invalid:
        assert not validator.is_valid(json.loads(text)) or '"c":null,"c":null' in text, text
        assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), f"{case}: invalid {text} accepted"
    first = valid[0]  # a key repeated (json.loads keeps the last: a validator never sees it)
    key, _, rest = first[2:].partition('"')
    repeated = first[:-1] + ',"' + key + '"' + rest.split(",")[0].rstrip("}") + "}"
    assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, repeated), f"{case}: repeated key in {repeated} accepted"


def test_a_later_requirement_keeps_earlier_keys_declared():
    """allOf [{a}, {c, required c}]: llguidance writes declared keys before patterned ones, so
    moving `a` would refuse the schema's own order `{"a":..,"c":..}`: nothing before the last
    node holding a kept key moves; what comes after it does."""
    schema = {"type": "object", "allOf": [{"properties": {"a": {}}}, {"properties": {"c": {}, "d": {}, "e": {}}, "required": ["c"]}]}
    out = any_order(schema)
    first, second = out["allOf"]
    assert first == {"properties": {"a": {}}}
    assert second["properties"] == {"c": {}} and second["patternProperties"] == {"^(?:d|e)$": {}}  # one schema, one pattern
    assert any_order({"type": "object", "properties": {"a": {}}, "required": ["a"]}) == {"type": "object", "properties": {"a": {}}, "required": ["a"]}


def test_shared_definitions_move_only_what_every_use_allows():
    """A definition used alone (all keys optional) and merged before a required key elsewhere
    keeps its keys declared: the stricter family decides."""
    shared = {"properties": {"x": {}, "y": {}}}
    schema = {"$defs": {"s": shared}, "properties": {"alone": {"$ref": "#/$defs/s"},
                                                     "merged": {"allOf": [{"$ref": "#/$defs/s"}, {"properties": {"z": {}}, "required": ["z"]}]}}}
    out = any_order(schema)
    assert out["$defs"]["s"] == shared
    assert any_order({"$defs": {"s": shared}, "properties": {"alone": {"$ref": "#/$defs/s"}}})["$defs"]["s"] == {
        "patternProperties": {"^(?:x|y)$": {}}}


def test_keys_other_patterns_match_stay_declared_and_unknown_references_move_nothing():
    schema = {"properties": {"xa": {}, "b": {}}, "patternProperties": {"^x": {"type": "integer"}}}
    assert any_order(schema)["properties"] == {"xa": {}} and set(any_order(schema)["patternProperties"]) == {"^x", "^b$"}
    remote = {"properties": {"a": {}, "b": {}}, "allOf": [{"$ref": "https://example.com/s.json"}]}
    assert any_order(remote) is remote
    assert any_order({"properties": {"a": {}, "b": {}}, "minProperties": 1}) == {"properties": {"a": {}, "b": {}}, "minProperties": 1}


def test_closed_objects_count_their_keys_and_never_dead_end(smollm2_tokenizer, smollm2_vocab):
    """In a closed object llguidance would still offer a `,` after every patterned key is used,
    and only a repeat could follow (the sampler's dead end CI found with a recursive pydantic
    model at T = 1). A closed object written from itself alone whose declared keys are required
    moves its optional keys with `maxProperties` = its key count (true of every instance): after
    the last key no `,`. Where the count would not tell (an optional key stays declared, a merge)
    nothing moves; nor where every key is required (the keys stay forced text)."""
    closed = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": False}
    assert any_order(closed) == {"type": "object", "patternProperties": {"^(?:a|b)$": {"type": "integer"}}, "additionalProperties": False, "maxProperties": 2}
    merged = {"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}, "additionalProperties": False}]}
    assert any_order(merged) is merged
    optional_first = {"type": "object", "properties": {"o": {}, "r": {}, "a": {}}, "required": ["r"], "additionalProperties": False}
    assert any_order(optional_first) is optional_first
    required_first = {"type": "object", "properties": {"r": {}, "a": {}, "b": {"type": "string"}}, "required": ["r"], "additionalProperties": False}
    assert any_order(required_first)["properties"] == {"r": {}} and any_order(required_first)["maxProperties"] == 3
    # every key required (OpenAI strict tools): no optional key to move (the required ones move
    # only with `released`, and not under closed_objects: test_required_keys.py's strict tests)
    every = {"type": "object", "properties": {"r": {"type": "string"}, "a": {"type": "integer"}}, "required": ["r", "a"],
             "additionalProperties": False}
    assert any_order(every) is every
    # a union branch beside a parent saying only `type: object` (Snowplow's PagerDuty contexts):
    # the parent bounds no key, so the branch still counts its own
    union = {"type": "object", "anyOf": [{**closed, "required": ["a"]}, {"properties": {"c": {}}, "required": ["c"], "additionalProperties": False}]}
    first = any_order(union)["anyOf"][0]  # with its copies in every key order (json_key_order._orders)
    forms = first.get("anyOf", [first])  # where a key moved, the count; else all declared, none moved
    assert all(form.get("maxProperties") == 2 if "patternProperties" in form else len(form["properties"]) == 2 for form in forms), first
    assert any("patternProperties" in form for form in forms), first
    comma = smollm2_tokenizer.encode(",", add_special_tokens=False)[0]
    for schema, full, valid, invalid in (
        (closed, '{"b":2,"a":1', ['{"b":2,"a":1}', '{"a":1}', "{}"], ['{"a":1,"c":2}', '{"a":1,"a":1}']),
        (union, '{"a":1,"b":2', ['{"a":1,"b":2}', '{"a":1}', '{"c":1}'], ['{"a":1,"c":2}', '{"b":1}', '{"a":1,"b":2,"b":2}', "{}"]),
        (required_first, '{"r":1,"b":"x","a":null', ['{"r":1,"b":"x","a":null}', '{"r":[],"a":1}', '{"a":1,"r":1}', '{"b":"x","a":2,"r":1}'],
         ['{"a":1}', '{"a":1,"b":"x"}', '{"r":1,"b":1}', '{"r":1,"z":1}', '{"a":1,"r":1,"r":1}'])):
        compiled = compile_json_schema(schema, smollm2_vocab)
        mask, matcher = new_bitmask(1, smollm2_vocab.size), compiled.matcher()
        for token in smollm2_tokenizer.encode(full, add_special_tokens=False):
            matcher.accept_token(token)
        matcher.fill_bitmask(mask)
        assert not (int(mask[0, comma // 32]) >> (comma % 32)) & 1, full
        validator = jsonschema.Draft202012Validator(schema)
        for text in valid:
            assert validator.is_valid(json.loads(text)) and _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), text
        for text in invalid:
            assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), text


@pytest.mark.parametrize("name", ["a.b", "x-y", "$ref", "a b", "é", "a\"b", "a\\b", "tab\tx", "^x$", "a+b*", "日本", ""])
def test_exact_key_patterns_match_the_key_alone(name):
    import re

    pattern = re.compile(exact_key(name))
    assert pattern.search(name) and not pattern.search(name + "z") and not pattern.search("z" + name)


def test_nothing_moves_inside_a_property_two_merged_members_declare():
    """llguidance merges the values of a key two allOf members declare, patterns included, and
    refuses overlapping ones: `c`'s `^(?:x|y)$` in one member and `^x$` in the other (jfrog-
    pipelines' resource configurations). Keys inside such values stay declared."""
    from constrained_spec.grammar.llguidance_backend import compile_llguidance
    from constrained_spec.grammar.llguidance_schema import llguidance_schema

    schema = {"type": "object", "allOf": [
        {"properties": {"c": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}}},
        {"properties": {"c": {"type": "object", "properties": {"x": {"type": "integer"}, "z": {"type": "string"}}}}}]}
    reordered = any_order(llguidance_schema(schema, closed_objects=False))
    compile_llguidance("json_schema", reordered, _BYTES)  # raises if refused
    values = [{**m.get("properties", {}), **m.get("patternProperties", {})} for m in reordered["allOf"]]
    assert all("patternProperties" not in (v.get("c") or v[exact_key("c")]) for v in values)


def test_nothing_moves_in_what_a_merged_value_references():
    """The same through references (minecraft-predicate's `predicate`: each condition's value a
    `$ref` to a definition sharing keys with the others): keys inside the referenced definitions
    stay declared, so llguidance takes the reordered schema and the rest of it (`a`, `b`) moves."""
    from constrained_spec.grammar.llguidance_backend import compile_llguidance
    from constrained_spec.grammar.llguidance_schema import llguidance_schema

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "allOf": [{"properties": {"c": {"$ref": "#/$defs/one"}}}, {"properties": {"c": {"$ref": "#/$defs/two"}}}],
              "$defs": {"one": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}},
                        "two": {"type": "object", "properties": {"x": {"type": "integer"}, "z": {"type": "integer"}}}}}
    reordered = any_order(llguidance_schema(schema, closed_objects=False))
    compile_llguidance("json_schema", reordered, _BYTES)  # raises if refused
    assert "patternProperties" not in reordered["$defs"]["one"] and "patternProperties" not in reordered["$defs"]["two"]
    assert "a" not in reordered.get("properties", {})  # the root's own keys moved


_CONTENT = {"$defs": {
    "text": {"type": "object", "properties": {"annotations": {"type": "object"}, "text": {"type": "string"}, "type": {"const": "text"}},
             "required": ["text", "type"]},
    "image": {"type": "object", "properties": {"annotations": {"type": "object"}, "data": {"type": "string"}, "mime": {"type": "string"},
                                               "type": {"const": "image"}}, "required": ["data", "mime", "type"]}}}


@pytest.mark.parametrize("schema", [
    {**_CONTENT, "anyOf": [{"$ref": "#/$defs/text"}, {"$ref": "#/$defs/image"}]},  # MCP's content
    {"oneOf": [_CONTENT["$defs"]["text"], _CONTENT["$defs"]["image"]]},  # inline branches
], ids=["references", "inline"])
def test_union_branches_also_name_their_kind_first(schema):
    """A union of objects told apart by a required key's constant (MCP's text or image content):
    llguidance wrote each branch's required keys in schema order (`annotations`, `text`, `type`)
    and they cannot move (which branch holds is known only from the value); each branch is now
    also written `type` first, then its other required keys, then the optional ones, and its
    required keys first. Every arrangement of each branch's keys (and a key of the other kind)
    against jsonschema: nothing invalid accepted; accepted: the kind first, the required keys
    first as declared, the schema's own order (212 valid texts, 29 accepted; 24 with the other required keys as declared, 8 before the copies)."""
    vocab = _BYTES
    compiled = compile_json_schema(schema, vocab)
    validator = jsonschema.Draft202012Validator(schema)
    values = {"annotations": "{}", "text": '"a"', "data": '"b"', "mime": '"c"'}
    accepted, judged = set(), {True: 0, False: 0}
    for kind, keys in (("text", ["annotations", "text", "type", "data"]), ("image", ["annotations", "data", "mime", "type", "text"])):
        for size in range(1, len(keys) + 1):
            for order in itertools.permutations(keys, size):
                text = "{" + ",".join(f'"{k}":' + (f'"{kind}"' if k == "type" else values[k]) for k in order) + "}"
                ids = list(text.encode()) + [256]
                valid = validator.is_valid(json.loads(text))
                taken = compiled.matcher().validate_tokens(ids) == len(ids)
                assert valid or not taken, text
                judged[valid] += 1
                if taken:
                    accepted.add(text)
    for text in ('{"type":"text","text":"a"}', '{"text":"a","type":"text"}', '{"annotations":{},"text":"a","type":"text"}',
                 '{"type":"text","text":"a","annotations":{}}', '{"text":"a","type":"text","annotations":{}}',
                 '{"type":"image","data":"b","mime":"c"}', '{"type":"image","data":"b","mime":"c","annotations":{}}'):
        assert text in accepted, text
    assert judged[True] == 212 and len(accepted) == 29, (judged, len(accepted))


@pytest.mark.parametrize("tags", [(3, 1), (True, 1), (None, 0.5)], ids=["integers", "boolean-and-one", "null-and-number"])
def test_union_branches_told_apart_by_a_scalar_constant_name_it_first(tags):
    """execution-environment's v3 or v1: closed objects told apart by `version`, an integer
    constant declared last and required with `deps`. Each branch is also written `version`
    first (before, only string constants told branches apart: the kind-first text was refused).
    Every arrangement of each branch's keys against jsonschema: nothing invalid accepted, the
    kind first and the declared order accepted. 1 and 1.0 are one constant, true and 1 two."""
    from constrained_spec.grammar.json_key_order import _tells_apart

    def branch(tag, own: str) -> dict:
        return {"type": "object", "additionalProperties": False, "required": ["version", "deps"],
                "properties": {own: {"type": "string"}, "deps": {"type": "object"}, "version": {"enum": [tag]}}}

    vocab = _BYTES
    schema = {"oneOf": [branch(tags[0], "images"), branch(tags[1], "prefix")]}
    compiled = compile_json_schema(schema, vocab)
    validator = jsonschema.Draft202012Validator(schema)
    accepted = set()
    for tag in tags:
        for size in range(1, 5):
            for order in itertools.permutations(["version", "deps", "images", "prefix"], size):
                values = {"version": json.dumps(tag), "deps": "{}", "images": '"i"', "prefix": '"p"'}
                text = "{" + ",".join(f'"{k}":{values[k]}' for k in order) + "}"
                ids = list(text.encode()) + [256]
                taken = compiled.matcher().validate_tokens(ids) == len(ids)
                assert validator.is_valid(json.loads(text)) or not taken, text
                if taken:
                    accepted.add(text)
    first, second = (json.dumps(tag) for tag in tags)
    for text in (f'{{"version":{first},"deps":{{}}}}', f'{{"version":{first},"deps":{{}},"images":"i"}}',
                 f'{{"images":"i","deps":{{}},"version":{first}}}', f'{{"version":{second},"deps":{{}},"prefix":"p"}}'):
        assert text in accepted, text
    assert not _tells_apart([branch(1, "a"), branch(1.0, "b")], "version")
    assert _tells_apart([branch(True, "a"), branch(1, "b")], "version")
    # a string constant names the kind before any other scalar declared first (`id` 1 or true)
    tagged = {"oneOf": [{"type": "object", "properties": {"id": {"const": 1}, "kind": {"enum": ["text"]}}, "required": ["kind", "id"]},
                        {"type": "object", "properties": {"id": {"const": True}, "kind": {"const": "image"}}, "required": ["kind", "id"]}]}
    text = list(b'{"kind":"text","id":1}') + [256]
    assert compile_json_schema(tagged, vocab).matcher().validate_tokens(text) == len(text)


@pytest.mark.parametrize("inline", [False, True], ids=["referenced-base", "inline-base"])
def test_union_branches_written_as_all_of_parts_name_their_kind_first(inline):
    """SchemaStore's accelerator writes each branch of a union as an allOf of its base object
    (a `$ref`) and a part giving `type` its constant; llguidance wrote the kind after the base's
    keys, and no key of the base could follow `"type":"Chain"` (every instance refused). Such a
    branch is read as the one object its plain parts mean (json_key_order._merged_parts), so it is
    also written kind first and its optional keys move. Every arrangement of each kind's keys
    (and a key only the other kind declares) against jsonschema: nothing invalid accepted; kind
    first, kind last and the base's own order accepted. A part saying more than type, properties
    and required (closed here) is not merged; parts saying no type still admit non-objects. 49 valid texts, 22 accepted (8 before: the declared order)."""
    bases = {"Chain-1": {"type": "object", "properties": {"name": {"type": "string"}, "steps": {"type": "array"}}},
             "Loop-1": {"type": "object", "properties": {"name": {"type": "string"}, "doc": {"type": "string"}}, "required": ["doc"]}}

    def branch(kind: str) -> dict:
        base = bases[f"{kind}-1"] if inline else {"$ref": f"#/definitions/{kind}-1"}
        return {"description": kind, "allOf": [base, {"type": "object", "properties": {"type": {"const": kind}}, "required": ["type"]}]}

    vocab = _BYTES
    schema = {"type": "object", "properties": {"engine": {"anyOf": [branch("Loop"), branch("Chain")]}}, "definitions": bases}
    compiled = compile_json_schema(schema, vocab)
    validator = jsonschema.Draft202012Validator(schema)
    values = {"name": '"n"', "steps": "[]", "doc": "1"}  # doc declared a string by Loop only: an extra key of Chain
    accepted, valid_count = set(), 0
    for kind in ("Chain", "Loop"):
        for size in range(1, 5):
            for order in itertools.permutations(["type", "name", "steps", "doc"], size):
                inner = ",".join(f'"{k}":' + (f'"{kind}"' if k == "type" else values[k]) for k in order)
                text = '{"engine":{' + inner + "}}"
                ids = list(text.encode()) + [256]
                valid = validator.is_valid(json.loads(text))
                taken = compiled.matcher().validate_tokens(ids) == len(ids)
                assert valid or not taken, text
                valid_count += valid
                if taken:
                    accepted.add(text)
    for inner in ('"type":"Chain","name":"n"', '"type":"Chain","steps":[],"name":"n"', '"name":"n","steps":[],"type":"Chain"',
                  '"type":"Chain","doc":1,"name":"n"'):
        assert '{"engine":{' + inner + "}}" in accepted, inner
    assert (valid_count, len(accepted)) == (49, 22), (valid_count, len(accepted))
    from constrained_spec.grammar.json_key_order import _merged_parts

    closed = {"type": "object", "properties": {"type": {"const": "Chain"}}, "required": ["type"], "additionalProperties": False}
    assert _merged_parts([bases["Chain-1"], closed], lambda ref: None) is None
    # parts saying no type admit non-objects, and so does the object they merge into (here the
    # node's own key goes into each merged branch, _spreads: a typed merge refused the string)
    untyped = {"properties": {"n": {"type": "string"}}, "anyOf": [
        {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"kind": {"const": k}}, "required": ["kind"]}]} for k in ("x", "y")]}
    compiled, validator = compile_json_schema(untyped, vocab), jsonschema.Draft202012Validator(untyped)
    for text in ('"s"', '{"kind":"x","a":1}', '{"a":1,"kind":"x"}', '{"kind":"y","n":"q","a":2}', '{"kind":"z"}', '{"a":"s","kind":"x"}'):
        ids = list(text.encode()) + [256]
        assert (compiled.matcher().validate_tokens(ids) == len(ids)) == validator.is_valid(json.loads(text)), text


def test_a_branch_many_unions_reference_is_written_kind_first_once_where_it_is_defined():
    """Generated schemas reference one definition per kind from many unions (accelerator: 15
    unions of the same 16 `$ref` branches). Copied into each union, the kind-first copies ran out
    of their size budget after a few unions, and the later ones kept the kind last. A branch that
    is only a `$ref` is now written with its copies once, at the definition (nothing points inside
    it), which every union then reads; a definition some `$ref` points inside is copied per union
    as before. Judged against jsonschema on a byte vocabulary: kind first and kind last accepted in
    every union, invalid texts refused. Also where no key tells every branch apart (one branch
    names no kind, two the same), the branches naming one are written with it first."""
    def base(i: int) -> dict:
        return {"type": "object", "properties": {"name": {"type": "string"}, **{f"p{i}_{n}": {"type": "integer", "description": "x" * 40} for n in range(25)}}}

    kinds = ["k0", "k1", "k2", "k3", "k3"]  # two branches name k3; a last one names none
    defs = {f"K{i}": {"allOf": [base(i), {"properties": {"kind": {"const": k}}, "required": ["kind"]}]} for i, k in enumerate(kinds)}
    defs["Plain"] = {"type": "object", "properties": {"name": {"type": "string"}, "other": {"type": "integer"}}, "additionalProperties": False}
    schema = {"type": "object", "properties": {f"u{j}": {"anyOf": [{"$ref": f"#/definitions/{name}"} for name in defs]} for j in range(12)},
              "definitions": defs}
    vocab = _BYTES
    compiled = compile_json_schema(schema, vocab)
    validator = jsonschema.Draft202012Validator(schema)

    def taken(text: str) -> bool:
        ids = list(text.encode()) + [256]
        return compiled.matcher().validate_tokens(ids) == len(ids)

    for j in range(12):
        for inner, valid in (('"kind":"k1","name":"n"', True), ('"name":"n","kind":"k1"', True), ('"kind":"k3","p3_0":1,"name":"n"', True),
                             ('"kind":"k3","p4_0":1,"name":"n"', True), ('"name":"n","other":2', True), ('"kind":"k9","name":"n"', False),
                             ('"kind":"k1","name":1', False), ('"kind":"k2","p2_0":"s"', False)):
            text = f'{{"u{j}":{{{inner}}}}}'
            assert validator.is_valid(json.loads(text)) == valid, text
            assert taken(text) == valid, text
    # a $ref pointing inside a definition keeps it as written: its branches are copied per union
    inside = {**schema, "properties": {**schema["properties"], "probe": {"$ref": "#/definitions/K1/allOf/0"}}}
    compiled = compile_json_schema(inside, vocab)
    assert taken('{"u0":{"kind":"k1","name":"n"}}') and taken('{"probe":{"name":"n"}}')


def test_a_tagged_branch_writes_its_other_required_keys_in_any_order_after_its_kind():
    """After the kind, a tagged branch's other required keys (up to 3) come in every order
    (json_key_order._PERMUTED; was: as declared, so `{"kind":"a","y":1,"x":1}` was refused where
    `x` is declared first). Every arrangement of each branch's keys against jsonschema on a byte
    vocabulary: nothing invalid accepted; kind first then any order of the required keys accepted
    (optional keys come after them: moved keys follow the declared ones)."""
    def branch(kind: str) -> dict:
        return {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "kind": {"const": kind}, "note": {"type": "string"}},
                "required": ["x", "y", "kind"]}

    schema = {"oneOf": [branch("a"), branch("b")]}
    vocab = _BYTES
    compiled, validator = compile_json_schema(schema, vocab), jsonschema.Draft202012Validator(schema)
    values = {"x": "1", "y": "2", "note": '"n"'}
    accepted = {text for _, _, text, _, taken in _arranged(compiled, validator, ["kind", "x", "y", "note"], "kind", ("a", "b"), values) if taken}
    for text in ('{"kind":"a","x":1,"y":2}', '{"kind":"a","y":2,"x":1}', '{"kind":"b","y":2,"x":1,"note":"n"}',
                 '{"x":1,"y":2,"kind":"a"}'):
        assert text in accepted, text



def _arranged(compiled, validator, keys: list[str], tag: str, kinds: tuple, values: dict, around: tuple = ("", "")):
    """Every arrangement of 1-4 of `keys` (`tag` valued by each kind in turn), as an object
    (inside `around`) walked byte by byte with EOS (id 256): (kind, order, text, valid per
    jsonschema, taken); nothing invalid is taken."""
    for kind in kinds:
        for size in range(1, 5):
            for order in itertools.permutations(keys, size):
                text = around[0] + "{" + ",".join(f'"{k}":' + (f'"{kind}"' if k == tag else values[k]) for k in order) + "}" + around[1]
                ids = list(text.encode()) + [256]
                valid = validator.is_valid(json.loads(text))
                taken = compiled.matcher().validate_tokens(ids) == len(ids)
                assert valid or not taken, f"invalid {text} accepted"
                yield kind, order, text, valid, taken


@pytest.mark.parametrize("size", [4, 5])
def test_a_union_of_many_branches_plans_each_branch_on_its_own(size):
    """A union of 40 open objects (Table Schema's field kinds, GitHub o70035 in JSONSchemaBench):
    past 32 ways the planner took every branch as one object, so no optional key moved in most
    branches and `{"name":..,"type":"k20","title":..}` was refused; up to _MAX_WAYS (64) each
    branch is planned on its own, and past it each branch's own choices count as taken at once
    before all of them do. Branches of 5 keys; of 4 keys, _discriminator_first writes the first
    six in every order (6 x 24 copies: 178 ways), the rest stay branches. Their required `name`
    stays declared, so first. Every arrangement of 1-4 keys for three kinds and one no branch
    has, walked byte by byte: nothing invalid accepted, every valid text with `name` first
    accepted (k0's in any order where copied)."""
    def branch(kind: str) -> dict:
        props = {"name": {"type": "string"}, "title": {"type": "string"}, "type": {"enum": [kind]}, "format": {"enum": ["default"]},
                 "rdfType": {"type": "string"}}
        return {"type": "object", "required": ["name"], "properties": dict(list(props.items())[:size])}

    schema = {"type": "array", "items": {"type": "object", "anyOf": [branch(f"k{i}") for i in range(40)]}}
    vocab = _BYTES
    compiled, validator = compile_json_schema(schema, vocab), jsonschema.Draft202012Validator(schema)
    values = {"name": '"x"', "title": '"T"', "format": '"default"'}
    name_first = 0
    for kind, order, text, valid, taken in _arranged(compiled, validator, ["name", "title", "type", "format"], "type",
                                                     ("k0", "k20", "k39", "zz"), values, ("[", "]")):
        if order[0] == "name" or (size == 4 and kind == "k0"):
            assert taken == valid, f"valid {text} refused"
            name_first += valid and order[0] == "name"
    assert name_first == 3 * 16 + 5, name_first  # zz: no `type` written


# a function-calling tool's shapes: the node declares every key and requires the kind, each
# branch gives the kind its constant and requires its own measures (Glaive's calculate_area form)
_SHAPES = {"type": "object", "properties": {"side": {"type": "number"}, "radius": {"type": "number"},
                                            "shape": {"type": "string", "enum": ["circle", "square"]}, "unit": {"type": "string"}},
           "required": ["shape"]}
_SHAPE_BRANCHES = [{"properties": {"shape": {"const": "circle"}}, "required": ["radius"]},
                   {"properties": {"shape": {"enum": ["square"]}}, "required": ["side", "shape"]}]


def _shape_texts(compiled, validator) -> tuple[set[str], dict]:
    """Every arrangement of 1-4 of the keys for each kind, walked byte by byte: the texts the
    matcher accepts (each checked valid against jsonschema) and the count of valid / invalid ones."""
    values = {"side": "2", "radius": "1", "unit": '"cm"'}
    accepted, judged = set(), {True: 0, False: 0}
    for _, _, text, valid, taken in _arranged(compiled, validator, ["radius", "shape", "side", "unit"], "shape", ("circle", "square"), values):
        judged[valid] += 1
        if taken:
            accepted.add(text)
    return accepted, judged


@pytest.mark.parametrize("union", ["oneOf", "anyOf"])
def test_union_node_keys_go_into_its_branches(union, monkeypatch):
    """A union whose node declares the keys itself and requires the kind, each branch a constant
    of it and the keys it requires (Glaive's calculate_area tools): llguidance merged the node's
    keys first, in its order, so a branch's required measure declared before the kind had to come
    first (`{"shape":"circle","radius":1}` refused). The node's keys now go into each branch
    (N and one of Bi is one of N-and-Bi), which is then written like any tagged branch: the kind
    first, its required keys first, or as declared; optional keys after them in any order. Every
    arrangement against jsonschema (128 texts, 76 valid): nothing invalid accepted, 24 accepted; without the spreading
    (the mutation below), 8 are accepted and no kind-first text."""
    from constrained_spec.grammar import json_key_order
    from constrained_spec.grammar.compiler import clear_cache

    schema = {**_SHAPES, union: _SHAPE_BRANCHES}
    vocab = _BYTES
    validator = jsonschema.Draft202012Validator(schema)
    clear_cache()
    accepted, judged = _shape_texts(compile_json_schema(schema, vocab), validator)
    kind_first = ['{"shape":"circle","radius":1}', '{"shape":"circle","radius":1,"unit":"cm"}', '{"shape":"circle","radius":1,"unit":"cm","side":2}',
                  '{"shape":"square","side":2}', '{"shape":"square","side":2,"unit":"cm","radius":1}']
    for text in [*kind_first, '{"radius":1,"shape":"circle"}', '{"side":2,"shape":"square","unit":"cm"}']:
        assert text in accepted, text
    assert judged == {True: 76, False: 52} and len(accepted) == 24, (judged, len(accepted))
    monkeypatch.setattr(json_key_order, "_spreads", lambda *args: False)
    clear_cache()
    try:
        unspread, _ = _shape_texts(compile_json_schema(schema, vocab), validator)
    finally:
        monkeypatch.undo()
        clear_cache()
    assert not set(kind_first) & unspread and len(unspread) == 8, sorted(unspread)


@pytest.mark.parametrize("union", ["oneOf", "anyOf"])
def test_union_node_keys_go_into_closed_branches_declaring_them(union):
    """livelyProperties' settings: the node declares and requires `type` and `value`, each
    branch is closed, declares both (its own constant and value type) and its own keys. A closed
    branch's additionalProperties would judge a node key it did not declare, so such branches
    were not merged with the node: llguidance wrote `type`, `value` first, and
    `{"type":"checkbox","text":..,"value":..}` (the branch's own order) was refused. Where every
    closed branch declares all the node's keys, N and Bi is Bi with the node's keys merged in.
    Every arrangement of the four keys for each kind (its own values), walked byte by byte
    against jsonschema: nothing invalid accepted, every valid text with `type` first accepted
    (a kind's other required keys in any order after it)."""
    def closed(kind: str, props: dict, required: list[str]) -> dict:
        return {"type": "object", "properties": {"type": {"const": kind}, **props}, "required": required, "additionalProperties": False}

    schema = {"type": "object", "properties": {"type": {"enum": ["slider", "label", "checkbox"]}, "value": {}},
              "required": ["type", "value"], union: [
                  closed("slider", {"value": {"type": "number"}, "text": {"type": "string"}, "max": {"type": "number"}}, ["text", "max"]),
                  closed("label", {"value": {"type": "string"}}, []),
                  closed("checkbox", {"text": {"type": "string"}, "value": {"type": "boolean"}}, ["text"])]}
    vocab = _BYTES
    compiled, validator = compile_json_schema(schema, vocab), jsonschema.Draft202012Validator(schema)
    kinds = {"slider": "1", "label": '"v"', "checkbox": "true", "zz": "1"}
    counted = {True: 0, False: 0}
    for kind, value in kinds.items():
        values = {"value": value, "text": '"t"', "max": "2"}
        for _, order, text, valid, taken in _arranged(compiled, validator, ["type", "value", "text", "max"], "type", (kind,), values):
            counted[valid] += 1
            if order[0] == "type":
                assert taken == valid, f"valid {text} refused"
    assert counted == {True: 24 + 2 + 6, False: 4 * 64 - 32}, counted  # every order of slider's 4 keys, label's 2, checkbox's 3


def _authentication(union: str, cookie: dict) -> dict:
    """aiproj's Authentication, cut down: a closed node, an object or null, declaring each kind's
    payload key (`Cookie`'s schema given) and `Type`; open branches by `Type` requiring their
    payload first, then `Type`; one more branch `{"type": "null"}`."""
    def kind(name: str, payload: str | None) -> dict:
        props = {"Type": {"enum": [name]}, **({payload: {"type": "object"}} if payload else {})}
        return {"type": "object", "required": [payload, "Type"] if payload else ["Type"], "properties": props}

    return {"type": ["object", "null"], "additionalProperties": False,
            "properties": {"Cookie": cookie, "Http": {"type": ["object", "null"]}, "Type": {"enum": ["RawCookie", "Http", "None"]}},
            union: [kind("RawCookie", "Cookie"), kind("Http", "Http"), kind("None", None), {"type": "null"}]}


@pytest.mark.parametrize("union", ["oneOf", "anyOf"])
def test_closed_union_node_keys_go_into_its_branches_beside_a_null(union):
    """aiproj's Authentication: a closed node, an object or null, declares `Type` and each
    kind's payload key; open branches by `Type` require their payload and `Type` (payload
    first), one more branch is `null`. The node's declared keys were written first, in its
    order (payload before `Type`), so `{"Type":"RawCookie","Cookie":{..}}` was refused; a closed
    node whose branches declare and require only its keys now goes into each branch, closed,
    and the null branch stays as it is. Every arrangement of 1-4 keys (an undeclared one too)
    for each kind and one no branch has, walked byte by byte against jsonschema: nothing
    invalid accepted, every valid text with `Type` first and the other keys as the node declares
    them accepted (optional keys keep that order in a branch); `null` accepted."""
    schema = _authentication(union, {"type": ["object", "null"]})
    vocab = _BYTES
    compiled, validator = compile_json_schema(schema, vocab), jsonschema.Draft202012Validator(schema)
    values = {"Cookie": "{}", "Http": "null", "zz": "1"}
    counted = {True: 0, False: 0, "kind first": 0}
    for _, order, text, valid, taken in _arranged(compiled, validator, ["Type", "Cookie", "Http", "zz"], "Type",
                                                  ("RawCookie", "Http", "None", "Basic"), values):
        counted[valid] += 1
        if order[0] == "Type" and list(order[1:]) == sorted(order[1:], key=["Cookie", "Http", "zz"].index):
            assert taken == valid, f"valid {text} refused"
            counted["kind first"] += valid
    assert counted == {True: 19, False: 4 * 64 - 19, "kind first": 6}, counted  # RawCookie: 2 keys or 3; None: 1-3
    assert compiled.matcher().validate_tokens(list(b"null") + [256]) == 5


def test_a_spread_takes_one_schema_more_than_the_copies_budget():
    """A union node's keys spread into its branches repeat the node's property schemas in each
    branch and its copies (aiproj's Authentication: every payload schema in each of three kinds,
    three copies each, about 3.2 times the schema). Such a spread may take one schema's size more
    than the copies' budget (twice the schema, past a small allowance), and no more: here a
    payload schema with 220 values spreads, one with 400 does not (its keys stay in schema order)."""
    from constrained_spec.grammar.json_key_order import _discriminator_first

    def schema(values: int) -> dict:
        return _authentication("oneOf", {"type": ["object", "null"], "properties": {"note": {"enum": [f"n{i}" for i in range(values)]}}})

    spread = _discriminator_first(schema(220))
    assert "properties" not in spread and "additionalProperties" not in spread, "the node's keys stayed"
    assert [b.get("type") for b in spread["oneOf"]][-1] == "null" and all(
        c["additionalProperties"] is False for b in spread["oneOf"][:3] for c in b["anyOf"])
    kept = _discriminator_first(schema(400))
    assert kept is None or "properties" in kept


def test_union_copies_stay_within_a_budget():
    """Unions nested in union branches multiply the copies (three ways a level): the copies are
    bounded (at most twice the schema's text more, past a small allowance); the outer unions are
    copied first, so the schema keeps working, the innermost branches keep schema order only."""
    from constrained_spec.grammar.json_key_order import _discriminator_first

    def level(depth: int) -> dict:
        def branch(kind: str) -> dict:
            props = {"note": {"enum": [f"n{i}" for i in range(300)]}, "data": {"type": "string"}, "kind": {"const": kind}}
            if depth:
                props["child"] = level(depth - 1)
            return {"type": "object", "properties": props, "required": ["data", "kind"]}
        return {"anyOf": [branch("a"), branch("b")]}

    spec = level(4)  # 31 unions
    copied = _discriminator_first(spec)
    assert copied is not None and len(json.dumps(copied)) <= 3 * len(json.dumps(spec)) + 10_000
    assert len(copied["anyOf"][0]["anyOf"]) == 3  # the outermost branches: two copies and the branch
    innermost = copied["anyOf"][0]["anyOf"][-1]
    for _ in range(3):
        innermost = innermost["properties"]["child"]["anyOf"][0]
        innermost = innermost["anyOf"][-1] if "anyOf" in innermost else innermost
    assert "anyOf" not in innermost["properties"]["child"]["anyOf"][0]  # past the budget: as written


@pytest.mark.parametrize("backend", ["default", "native", "llguidance"])
def test_schemas_differing_only_in_key_order_are_two_grammars(backend):
    """compile_json_schema keeps the grammars it made by the schema's text: that text once had
    its keys sorted, so a schema differing from an earlier one only in its properties' order got
    the earlier one's grammar, and its own order (every key required: written as declared) was
    refused (found by the tagged-union differential test, after a branch `{a, kind}` compiled
    before one `{kind, a}`)."""
    vocab = _BYTES

    def schema(order: list[str]) -> dict:
        props = {"a": {"type": "integer"}, "kind": {"const": "x"}}
        return {"type": "object", "properties": {k: props[k] for k in order}, "required": ["a", "kind"], "additionalProperties": False}

    for order, text in ((["a", "kind"], '{"a":1,"kind":"x"}'), (["kind", "a"], '{"kind":"x","a":1}')):
        ids = list(text.encode()) + [256]
        compiled = compile_json_schema(schema(order), vocab, backend=backend)
        assert compiled.matcher().validate_tokens(ids) == len(ids), (order, text)


def test_twin_property_schemas_keep_their_own_key_order():
    """Two property schemas equal but for the order of a nested object's keys are two
    schemas where keys are written in declared order: moved keys with one schema share a
    pattern (json_key_order._signature), and a declared key whose schema is a matching pattern's
    is written by the pattern (llguidance_schema._pattern_twins_as_true). Both compared texts with
    every key sorted, so `y`'s object took `x`'s order (`{"y":{"b":1,"a":2}}`, its own, refused)."""
    vocab = _BYTES

    def pair(order: list[str]) -> dict:  # every key required and the object closed: written as declared
        props = {"a": {"type": "integer"}, "b": {"type": "integer"}}
        return {"type": "object", "properties": {k: props[k] for k in order}, "required": ["a", "b"], "additionalProperties": False}

    moved = {"type": "object", "properties": {"x": pair(["a", "b"]), "y": pair(["b", "a"])}}
    twins = {"type": "object", "properties": {"y": pair(["b", "a"])}, "patternProperties": {"^[xy]$": pair(["a", "b"])}}
    for schema, own, other in ((moved, '{"y":{"b":1,"a":2}}', '{"x":{"a":1,"b":2}}'), (twins, '{"y":{"b":1,"a":2}}', '{"x":{"a":1,"b":2}}')):
        compiled = compile_json_schema(schema, vocab)
        for text in (own, other):
            ids = list(text.encode()) + [256]
            assert compiled.matcher().validate_tokens(ids) == len(ids), (schema, text)
