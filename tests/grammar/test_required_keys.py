"""Required keys in any order on the default backend (json_required.py, required_keys.py, issue 11).

llguidance writes required keys in schema order; where an object's schema node is fixed (known
from the path alone) and declares an optional key, the default backend moves its required keys
to exact patterns too and the required-keys tracker refuses to close an object missing one.
Checked on the real tokenizer (SmolLM2), every walk judged by jsonschema:
  - hand-written shapes: every key order accepted, a missing required key refused at every
    depth (through properties, $ref, allOf, additionalProperties and array items), the frame
    text of a tool call, fork and rollback; where a choice decides (anyOf), or every key of a
    closed object is required under `closed_objects=True` (strict tools: forced text), the keys
    stay in schema order;
  - a seeded generated family (random.Random(5), 60 schemas x 12 texts): valid values in
    shuffled key order (schema order in strict objects: closed, every key required) and the
    same with one required key dropped at a random depth;
    acceptance (EOS only at the end) equals jsonschema on every text, the mask agrees with
    validate_tokens at every step and is never empty on a valid prefix. Without the tracker
    the same family accepts invalid texts (checked, so the test can fail);
  - required keys no property declares (declared with the node's additionalProperties): hand-
    written shapes, and the family again with open objects requiring `zz` (random.Random(11));
  - unions of closed objects written as one object (json_closed_unions.py): hand-written shapes
    and a seeded generated family (random.Random(41), 80 schemas x 40 texts; 62 merged, 423
    valid texts there, every one accepted, nothing invalid accepted anywhere).
"""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter

import jsonschema
import pytest

from constrained_spec.bitmask import new_bitmask
from constrained_spec.grammar import GrammarError, compile_json_schema
from constrained_spec.grammar.json_key_order import any_order
from constrained_spec.grammar.json_required import Released, fixed_nodes
from constrained_spec.grammar.llguidance_schema import llguidance_schema
from constrained_spec.grammar.required_keys import RequiredKeysGrammar

from schema_oracle import walk


def _accepts(compiled, tokenizer, vocab, text: str) -> bool:
    """Whether the matcher takes `text` in the model's tokenization with EOS after it; the mask
    must agree with validate_tokens at every step (schema_oracle.walk checks)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    result = walk(compiled, ids, vocab.token_bytes, vocab.eos_token_id, check_mask=True)
    return result.refused_at is None and result.eos_at[-1][1]


def _permutations(pairs: list[str]) -> list[str]:
    return ["{" + ",".join(p) + "}" for p in itertools.permutations(pairs)]


NESTED = {"type": "object", "properties": {
    "name": {"type": "string"}, "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
    "meta": {"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}}, "required": ["id"]},
    "extra": {"type": "integer"}},
    "required": ["name", "meta"], "additionalProperties": {"type": "object", "properties": {"k": {}, "v": {}}, "required": ["k"]},
    "$defs": {"tag": {"allOf": [{"properties": {"label": {"type": "string"}}, "required": ["label"]}], "properties": {"color": {"enum": ["red", "blue"]}}}}}


def test_every_order_accepted_and_every_missing_key_refused(smollm2_tokenizer, smollm2_vocab):
    compiled = compile_json_schema(NESTED, smollm2_vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    validator = jsonschema.Draft202012Validator(NESTED)
    valid = _permutations(['"name":"a"', '"meta":{"note":"n","id":1}', '"extra":2'])
    valid += ['{"meta":{"id":1},"name":"a"}', '{"tags":[{"color":"red","label":"x"},{"label":"y"}],"meta":{"id":1},"name":"a"}',
              '{"other":{"v":1,"k":2},"name":"a","meta":{"id":3}}']
    invalid = ['{"name":"a"}', '{"meta":{"id":1}}', '{"name":"a","meta":{"note":"n"}}', '{"extra":1,"meta":{"id":1}}',
               '{"meta":{"id":1},"name":"a","tags":[{"color":"red"}]}', '{"meta":{"id":1},"name":"a","tags":[{"label":"x"},{}]}',
               '{"other":{"v":1},"name":"a","meta":{"id":3}}', '{"name":"a","meta":{"id":1},"name":"b"}']
    for text in valid:
        assert validator.is_valid(json.loads(text)), text
        assert _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), f"valid {text} refused"
    for text in invalid:
        assert not validator.is_valid(json.loads(text)) or text.count('"name"') == 2, text
        assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), f"invalid {text} accepted"


def test_closed_objects_with_an_endless_pattern_move_like_open_ones(smollm2_tokenizer, smollm2_vocab):
    """docker-compose's root: closed, `^x-` extension keys, `version` required and declared last.
    A pattern that admits keys beyond counting always leaves a new key to write after a `,`, so
    the keys move without `maxProperties` (which would cap the extension keys); a pattern with
    few keys (`^[0-9]$`) keeps the object as declared."""
    from constrained_spec.grammar.json_key_order import _endless

    schema = {"type": "object", "additionalProperties": False, "patternProperties": {"^x-": {}},
              "properties": {"services": {"type": "object"}, "volumes": {"type": "object"}, "version": {"type": "string"}},
              "required": ["version"]}
    compiled = compile_json_schema(schema, smollm2_vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    validator = jsonschema.Draft202012Validator(schema)
    valid = _permutations(['"version":"3"', '"services":{}', '"x-a":1']) + ['{"x-a":1,"x-b":2,"x-c":3,"version":"3","volumes":{}}']
    invalid = ['{"services":{}}', '{"version":"3","other":1}', '{"version":"3","x-a":1,"x-a":2}', '{"services":{},"version":"3","services":{}}']
    for text in valid:
        assert validator.is_valid(json.loads(text)) and _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), text
    for text in invalid:
        assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), text
    assert [_endless({"patternProperties": {p: {}}}) for p in ("^x-", ".+", "^[a-zA-Z0-9._-]+$", "^[0-9a-zA-Z_-]{1,255}$")] == [True] * 4
    assert [_endless({"patternProperties": {p: {}}}) for p in ("^[0-9]$", "^(default|mac)$", "^.{1,2}$", "^[a-z]{1,10}$")] == [False] * 4
    assert not _endless({"patternProperties": {"^x-": False}})
    digits = dict(schema, patternProperties={"^[0-9]$": {}})
    assert any_order(digits, Released()) is digits


@pytest.mark.parametrize("where", ["allOf", "anyOf"])
def test_a_required_key_two_members_declare_moves_where_both_move_it(where, smollm2_tokenizer, smollm2_vocab):
    """libman's root: `libs` required and declared by the node and by a part (allOf) or a branch
    (anyOf) that narrows its value. Both declarations move to the same exact pattern, which
    llguidance merges, and the tracker keeps the requirement: `version` may come first. Where
    the part keeps `libs` declared (a later key of its own stays declared: a pattern matches
    it), `libs` stays required in schema order (freed, it could not be written after `zeta`)."""
    part = {"properties": {"libs": {"maxItems": 2}}}
    schema = {"type": "object", "properties": {"libs": {"type": "array", "items": {"type": "integer"}}, "version": {"enum": ["1.0"]}},
              "required": ["libs"], where: [part] if where == "allOf" else [part, {"properties": {"other": {"type": "string"}}}]}
    compiled = compile_json_schema(schema, smollm2_vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    validator = jsonschema.Draft202012Validator(schema)
    valid = ['{"version":"1.0","libs":[1]}', '{"libs":[1,2],"version":"1.0"}', '{"libs":[]}']
    invalid = ['{"version":"1.0"}', '{}', '{"libs":["a"],"version":"1.0"}', '{"version":"1.0","libs":[1],"libs":[2]}']
    if where == "allOf":
        invalid.append('{"version":"1.0","libs":[1,2,3]}')
    else:
        valid += ['{"version":"1.0","other":"x","libs":[1,2,3]}']
    for text in valid:
        assert validator.is_valid(json.loads(text)) and _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), text
    for text in invalid:
        assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), text
    kept = dict(schema, **{where: [{"properties": {"libs": {"maxItems": 2}, "zeta": {"type": "integer"}}, "patternProperties": {"^z": {}}}]})
    released = Released()
    reordered = any_order(kept, released)
    assert reordered["required"] == ["libs"] and not released.freed
    assert "libs" in reordered[where][0]["properties"]
    kept_compiled = compile_json_schema(kept, smollm2_vocab)
    kept_validator = jsonschema.Draft202012Validator(kept)
    for text in ['{"libs":[1],"zeta":2}', '{"libs":[1],"version":"1.0","zeta":2}']:
        assert kept_validator.is_valid(json.loads(text)) and _accepts(kept_compiled, smollm2_tokenizer, smollm2_vocab, text), text
    for text in ['{"zeta":2}', '{"version":"1.0"}', '{"libs":[1,2,3],"zeta":2}']:
        assert not _accepts(kept_compiled, smollm2_tokenizer, smollm2_vocab, text), text


def test_a_missing_key_leaves_the_object_open_not_stuck(smollm2_tokenizer, smollm2_vocab):
    """After `{"name":"a"` the `}` is refused, EOS too, and `,` is allowed (the missing key can
    still come); fork and rollback keep the tracker in step with the wrapped matcher."""
    compiled = compile_json_schema(NESTED, smollm2_vocab)
    matcher, mask = compiled.matcher(), new_bitmask(1, smollm2_vocab.size)
    prefix = smollm2_tokenizer.encode('{"name":"a"', add_special_tokens=False)
    for token in prefix:
        matcher.accept_token(token)
    matcher.fill_bitmask(mask)
    bit = lambda text: bool(int(mask[0, smollm2_vocab.token_bytes.index(text) // 32]) >> (smollm2_vocab.token_bytes.index(text) % 32) & 1)  # noqa: E731
    assert not bit(b"}") and not bit(b'"}') and bit(b",")
    close = smollm2_vocab.token_bytes.index(b"}")
    with pytest.raises(GrammarError, match="required keys"):
        matcher.accept_token(close)
    fork = matcher.fork()
    rest = smollm2_tokenizer.encode(',"meta":{"id":1}}', add_special_tokens=False)
    for token in rest:
        fork.accept_token(token)
    assert fork.is_accepting() and not matcher.is_accepting()
    fork.rollback(len(rest))
    assert fork.validate_tokens([close]) == 0 and fork.validate_tokens(rest) == len(rest)


def test_a_byte_vocabulary_mask_keeps_the_object_open():
    """In a vocabulary where no token holds `}` after its first byte, the mask still clears `}`
    itself while a required key is missing (it returned before doing so, and a sampler took the
    `}` accept_token then refused), in step with validate_tokens at every byte."""
    from constrained_spec.bitmask import unpack_bitmask
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    compiled = compile_json_schema(NESTED, vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    text = b'{"name":"a","meta":{"id":1}}'
    matcher, mask = compiled.matcher(), new_bitmask(1, vocab.size)
    for i, byte in enumerate(text):
        matcher.fill_bitmask(mask)
        allowed = unpack_bitmask(mask, vocab.size)[0]
        for probe in (ord("}"), 256):
            assert bool(allowed[probe]) == (matcher.validate_tokens([probe]) == 1), (text[:i], probe)
        if text[:i] in (b"{", b'{"name":"a"', b'{"name":"a","meta":{'):  # outside strings, a key missing
            assert not allowed[ord("}")], text[:i]
        if text[:i] in (b'{"name":"a","meta":{"id":1', b'{"name":"a","meta":{"id":1}'):
            assert allowed[ord("}")], text[:i]
        matcher.accept_token(byte)
    assert matcher.is_accepting()


def test_required_keys_move_beside_a_unique_array_not_inside_its_items():
    """A schema holding uniqueItems kept every required key in schema order (SchemaStore's
    cryproj: a valid instance writing `$schema` first was refused). Now only the unique array's
    items keep it (the uniqueItems wrapper tells two items apart only once each is complete);
    the root's required keys move. Texts judged against jsonschema, byte by byte with EOS."""
    from constrained_spec.grammar import Vocabulary
    from constrained_spec.grammar.unique_items import UniqueItemsGrammar

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    item = {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}}, "required": ["k", "v"]}
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": item, "uniqueItems": True},
                                               "name": {"type": "string"}, "id": {"type": "integer"}},
              "required": ["name", "id"]}
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, UniqueItemsGrammar) and isinstance(compiled.inner, RequiredKeysGrammar)

    def accepted(text: str) -> bool:
        ids = list(text.encode()) + [256]
        return compiled.matcher().validate_tokens(ids) == len(ids)

    validator = jsonschema.Draft202012Validator(schema)
    for text in ('{"x":0,"id":1,"name":"a"}', '{"id":1,"tags":[{"k":"a","v":1},{"k":"a","v":2}],"name":"a"}'):
        assert validator.is_valid(json.loads(text)) and accepted(text), text
    for text in ('{"id":1,"x":0}', '{"name":"a","id":1,"tags":[{"k":"a","v":1},{"k":"a","v":1}]}', '{"name":"a","id":1,"tags":[{"k":"a"}]}'):
        assert not validator.is_valid(json.loads(text)) and not accepted(text), text
    assert not accepted('{"name":"a","id":1,"tags":[{"v":1,"k":"a"}]}')  # valid, but items keep schema order


@pytest.mark.parametrize("vacuous", [False, True], ids=["bare", "declared-true"])
def test_an_any_of_of_required_keys_is_lifted_to_the_tracker(vacuous):
    """"At least one of these keys" (an anyOf whose branches only require keys the node
    declares; 58 of the 172 JSONSchemaBench schemas with a valid instance refused held one) kept
    those keys, and the keys before them, in schema order. Lifted, the keys move and the tracker
    requires one branch's keys whole. Every arrangement of every subset of four keys (one
    undeclared) against jsonschema, byte by byte with EOS; where a branch is missing the mask
    clears `}` outside strings, as validate_tokens does."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    branch = (lambda *keys: {"required": list(keys), "properties": {k: True for k in keys}}) if vacuous else (lambda *keys: {"required": list(keys)})
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "integer"}, "d": {}},
              "required": ["c"], "anyOf": [branch("a"), branch("b", "d")]}
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    assert sorted(map(sorted, compiled.contexts.required[compiled.contexts.root])) == [["a", "c"], ["b", "c", "d"]]
    judged = _every_arrangement(compiled, jsonschema.Draft202012Validator(schema), vocab)
    assert judged[True] == 242 and judged[False] == 84, judged  # (326 texts)


def _every_arrangement(compiled, validator, vocab, closed: bool = False) -> Counter:
    """Every arrangement of every subset of five keys (`x` undeclared), byte by byte with EOS:
    accepted iff `validator` says valid, and the mask at the closing brace allows it iff so (as
    validate_tokens does; a closed object refuses `x` before). Returns the verdicts' counts."""
    from constrained_spec.bitmask import unpack_bitmask

    values, judged = {"a": "1", "b": '"x"', "c": "2", "d": "null", "x": "[]"}, Counter()
    for size in range(len(values) + 1):
        for keys in itertools.permutations(values, size):
            text = "{" + ",".join(f'"{k}":{values[k]}' for k in keys) + "}"
            ids = list(text.encode()) + [vocab.eos_token_id]
            valid = validator.is_valid(json.loads(text))
            assert (compiled.matcher().validate_tokens(ids) == len(ids)) is valid, text
            judged[valid] += 1
            if "x" in keys and closed:
                continue
            matcher, mask = compiled.matcher(), new_bitmask(1, vocab.size)
            if matcher.validate_tokens(ids[:-2]) < len(ids) - 2:  # a key refused before (one excluding another)
                assert not valid, text
                continue
            for token in ids[:-2]:  # up to the closing brace: allowed there iff the object is valid
                matcher.accept_token(token)
            matcher.fill_bitmask(mask)
            assert bool(unpack_bitmask(mask, vocab.size)[0][ord("}")]) is valid, text
    return judged


def _closable(compiled, validator, vocab, values: dict[str, str]) -> int:
    """Every object prefix the matcher takes (keys of `values` in any order, each value whole)
    can still be completed into a valid object by more of those keys and `}`, and where it takes
    a `,` one of those keys follows: no dead end. Returns how many prefixes were taken."""
    taken = 0

    def takes(text: str, eos: bool) -> bool:
        ids = list(text.encode()) + ([vocab.eos_token_id] if eos else [])
        return compiled.matcher().validate_tokens(ids) == len(ids)

    def closable(prefix: str, used: tuple[str, ...]) -> bool:
        nonlocal taken
        taken += 1
        alive = takes(prefix + "}", eos=True)
        assert alive is validator.is_valid(json.loads(prefix + "}")), prefix
        extended = False
        for key in values:
            longer = prefix + ("," if used else "") + f'"{key}":{values[key]}'
            if key not in used and takes(longer, eos=False):
                assert closable(longer, (*used, key)), longer  # every prefix taken can still close
                alive = extended = True
        if used and takes(prefix + ",", eos=False):  # a `,` taken leads to a key (a new undeclared one where open)
            assert extended or takes(prefix + ',"zz":null', eos=False), prefix
        return alive

    assert closable("{", ())
    return taken


@pytest.mark.parametrize("in_all_of", [False, True], ids=["beside", "in-allOf"])
@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
@pytest.mark.parametrize("branches", [[["a"], ["b", "d"]], [["a", "c"], ["b", "c"]], [["a"], ["b"], ["c", "d"]], [["a"], ["a", "b"]]],
                         ids=["disjoint", "sharing", "three", "nested"])
def test_an_overlapping_one_of_of_required_keys_is_lifted_to_the_tracker(branches, closed, in_all_of):
    """"Exactly one of these" (a oneOf whose branches only require keys the node declares:
    Glaive's calculate_area, `radius` or `length`+`width` or `base`+`height`) is written by
    llguidance_schema as branch i and not branch j; its keys, and those before them, stayed in
    schema order. On an open object the branches' keys move: the tracker requires one branch's
    keys whole, llguidance keeps each branch's "not all of another's" parts (less the branch's
    own keys; a branch whose keys hold another's can never hold, dropped). Every arrangement of
    every subset of five keys (one undeclared) against jsonschema, byte by byte with EOS, the
    mask at `}` as validate_tokens; and every prefix taken can still be closed validly (a part
    leaving out a key of the branch's own would let `{"b":..,"a":..` through with no valid end
    in the sharing case). A closed object the same, its parts written out as one branch per
    choice of left-out keys with the key count that choice leaves (else llguidance offered a
    `,` with every allowed key used: a dead end). The same with the oneOf in an allOf beside a
    bare `required` part (JSONSchemaBench o6184), read as the node's own."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    one_of = {"oneOf": [{"required": keys} for keys in branches]}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "integer"}, "d": {}},
              **({"allOf": [{"required": ["d"]}, one_of]} if in_all_of else one_of), **({"additionalProperties": False} if closed else {})}
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    held = {"d"} if in_all_of else set()  # in every object: a branch whose keys with them hold another's can never hold alone
    kept = [set(keys) | held for i, keys in enumerate(branches) if not any(set(o) <= set(keys) | held for j, o in enumerate(branches) if j != i)]
    assert sorted(map(sorted, compiled.contexts.required[compiled.contexts.root])) == sorted(map(sorted, kept))
    validator = jsonschema.Draft202012Validator(schema)
    judged = _every_arrangement(compiled, validator, vocab, closed)
    assert judged[True] and judged[False], judged
    values = {"a": "1", "b": '"x"', "c": "2", "d": "null", "x": "[]"}
    assert _closable(compiled, validator, vocab, values) > 10  # prefixes taken (15 to 60 here)


@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
@pytest.mark.parametrize("keyword", ["dependencies", "dependentRequired", "dependencies-schemas", "dependentSchemas"])
def test_dependent_required_keys_are_lifted_to_the_tracker(keyword, closed):
    """`dependentRequired` (draft 4's list `dependencies`) was a condition llguidance read with
    the keys it names, and the keys before them, in schema order (docker-compose's services,
    closed: `memswap_limit` needs `mem_limit`). Lifted, the keys move and the tracker adds the
    keys a written key requires (unless written before; `d` needs `a`, which needs `b`). Every
    arrangement of every subset of five keys (one undeclared) against jsonschema, byte by byte
    with EOS; where a required key is missing the mask clears `}`, as validate_tokens does.
    The same where the condition is a schema that only requires keys (`dependencies` or
    `dependentSchemas` values `{"required": [...]}`, an unknown keyword beside: SchemaStore's
    nodemon, whose `$schema` key first was refused with every declared key in schema order)."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    needs = {"a": ["b"], "d": ["a"]}
    if keyword.endswith(("-schemas", "Schemas")):
        needs = {"a": {"required": ["b"]}, "d": {"required": ["a"], "exec": {"const": "node"}}}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "integer"}, "d": {}},
              "required": ["c"], keyword.removesuffix("-schemas"): needs, **({"additionalProperties": False} if closed else {})}
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    assert compiled.contexts.dependent[compiled.contexts.root] == {"a": {"b"}, "d": {"a"}}
    validator = (jsonschema.Draft7Validator if keyword.startswith("dependencies") else jsonschema.Draft202012Validator)(schema)
    judged = _every_arrangement(compiled, validator, vocab, closed)
    assert judged == ({True: 33, False: 293} if closed else {True: 185, False: 141}), judged  # (326 texts)


@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
def test_dependencies_on_undeclared_keys_are_lifted_where_any_key_is_writable(closed):
    """Glaive's calculate_area `dimensions` (`dependencies: {"shape": ["circle"]}`, neither key
    declared) kept its required measures in schema order: a family still requiring an undeclared
    key writes nothing moved. In an object taking any key the condition is lifted too (an
    undeclared key is written among the undeclared ones): `x` needs `d`, `a` needs `x`; every
    arrangement of every subset of five keys against jsonschema, every prefix taken still
    closable. A closed object cannot write `x`: not lifted, its keys as declared, `a` refused."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "integer"}, "d": {}},
              "required": ["c", "b"], "dependencies": {"x": ["d"], "a": ["x"]}, **({"additionalProperties": False} if closed else {})}
    compiled = compile_json_schema(schema, vocab)
    validator = jsonschema.Draft7Validator(schema)
    if closed:  # `a` needs `x`, which no object writes: `a` is never written (the keys as declared, never an invalid text)
        for text in ('{"b":"x","c":1}', '{"b":"x","c":1,"d":null}', '{"a":1,"b":"x","c":1}', '{"b":"x","c":1,"x":[]}'):
            ids = list(text.encode()) + [256]
            assert (compiled.matcher().validate_tokens(ids) == len(ids)) is validator.is_valid(json.loads(text)), text
        return
    assert isinstance(compiled, RequiredKeysGrammar)
    assert compiled.contexts.dependent[compiled.contexts.root] == {"x": {"d"}, "a": {"x"}}
    judged = _every_arrangement(compiled, validator, vocab)
    assert judged == {True: 152, False: 174}, judged  # (326 texts)
    assert _closable(compiled, validator, vocab, {"a": "1", "b": '"x"', "c": "2", "d": "null", "x": "[]"}) > 50


def test_required_keys_move_under_patterns_every_reader_agrees_on():
    """A value under `patternProperties` is fixed where the key's text tells which patterns apply
    (explicit characters: `^[a-z]+$`; not `\\w`, read differently by Python, ECMA and llguidance):
    docker-compose's services under `^[a-zA-Z0-9._-]+$` kept their keys in schema order. A key
    meets its property's schema and every matching pattern's, additionalProperties only where
    neither: all three checked against jsonschema, every arrangement of the inner keys."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    service = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}}, "required": ["a", "b"],
               "additionalProperties": False}
    schema = {"type": "object", "properties": {"ab": {"type": "object", "properties": {"q": {}}, "required": ["q"]}},
              "patternProperties": {"^[a-z]+$": service, "^[0-9]+$": {"type": "object", "required": ["n"], "properties": {"n": {}}}},
              "additionalProperties": {"type": "object", "properties": {"z": {}}, "required": ["z"]}}
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    contexts = compiled.contexts
    assert contexts.required[contexts.of_key(contexts.root, "web")] == (frozenset({"a", "b"}),)
    assert contexts.required[contexts.of_key(contexts.root, "ab")] == (frozenset({"a", "b", "q"}),)
    assert contexts.required[contexts.of_key(contexts.root, "12")] == (frozenset({"n"}),)
    assert contexts.required[contexts.of_key(contexts.root, "A-1")] == (frozenset({"z"}),)
    validator, judged = jsonschema.Draft202012Validator(schema), Counter()
    pairs = {"a": '"a":1', "b": '"b":"x"', "c": '"c":null', "q": '"q":2', "n": '"n":3', "z": '"z":4'}
    for key in ("web", "ab", "12", "A-1"):
        candidates = ["a", "z", "n"] if key == "A-1" else ["a", "b", "q", "n"]
        for size in range(len(candidates) + 1):
            for keys in itertools.permutations(candidates, size):
                text = '{"%s":{%s}}' % (key, ",".join(pairs[k] for k in keys))
                ids = list(text.encode()) + [256]
                valid = validator.is_valid(json.loads(text))
                assert (compiled.matcher().validate_tokens(ids) == len(ids)) is valid, text
                judged[valid] += 1
    assert judged == {True: 62, False: 149}, judged  # (211 texts)
    wide = {"type": "object", "patternProperties": {"^\\w+$": service}}  # \w: Unicode in Python, ASCII elsewhere
    released = Released()
    any_order(llguidance_schema(wide, False), released)
    assert not released.freed  # its keys stay in schema order


def test_dependent_keys_the_plan_keeps_declared_stay_with_llguidance():
    """Where the pattern budget keeps a dependency's keys declared (60 keys of distinct schemas,
    the first ones stay in schema order), lifting them would let a later key shut them out while
    the tracker waits for them: the condition stays with llguidance, keys in schema order."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    schema = {"type": "object", "properties": {f"k{i}": {"const": i} for i in range(60)}, "dependentRequired": {"k0": ["k1"]}}
    compiled = compile_json_schema(schema, vocab)
    assert not isinstance(compiled, RequiredKeysGrammar)  # nothing left to the tracker
    for text, valid in (('{"k0":0,"k1":1}', True), ('{"k0":0}', False), ('{"k0":0,"k2":2}', False), ('{"k59":59}', True),
                        ('{"k1":1,"k0":0}', False)):  # valid, but the first keys keep schema order
        ids = list(text.encode()) + [256]
        assert (compiled.matcher().validate_tokens(ids) == len(ids)) is valid, text


@pytest.mark.parametrize("name", ["default", "enum", "properties"])
def test_nothing_moves_under_a_property_of_a_unique_item_whatever_its_name(name):
    """The walk over a unique array's items goes by keyword, not by dict key: a property named
    like a data keyword (`default`, `enum`) is a schema too, and its object keeps its required
    keys in place (walked as dict keys, its subtree was skipped and `k`, `v` were freed)."""
    inner = {"type": "object", "properties": {"k": {"type": "integer"}, "v": {"type": "integer"}, "w": {}}, "required": ["k", "v"]}
    items = {"type": "object", "properties": {name: inner}}
    released = Released(unique_at=[""])
    any_order({"type": "array", "items": items}, released)
    assert not released.freed
    outside = Released(unique_at=["/properties/list"])  # the same object beside the unique array: its keys move
    any_order({"type": "object", "properties": {"list": {"type": "array", "items": {}}, name: inner}}, outside)
    assert list(outside.freed.values()) == [frozenset({"k", "v"})]


def test_frame_text_around_a_tool_call(smollm2_tokenizer, smollm2_vocab):
    """The server writes a tool call as frame text around the arguments: the tracker skips the
    prefix and checks the arguments object."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}},
              "required": ["city", "days"]}
    frame = ("<tool_call> weather ", " </tool_call>")
    compiled = compile_json_schema(schema, smollm2_vocab, frame=frame)
    assert isinstance(compiled, RequiredKeysGrammar)
    for pairs in itertools.permutations(['"city":"x"', '"unit":"c"', '"days":2']):
        assert _accepts(compiled, smollm2_tokenizer, smollm2_vocab, frame[0] + "{" + ",".join(pairs) + "}" + frame[1])
    for args in ('{"unit":"c","city":"x"}', '{"days":1}', "{}"):
        assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, frame[0] + args + frame[1]), args


def test_choices_and_strict_objects_keep_schema_order():
    """A node under anyOf is not fixed (which branch holds depends on the value): its required
    keys stay declared, and with them the keys declared before them (the root's `d`). Where every
    declared key of a closed object is required (OpenAI strict tools), with `forced_order` (what
    `closed_objects=True`, the generation surfaces' mode, asks for) nothing moves: the keys stay
    forced text; by default they go in any order (the tracker holds them). A required key no member declares keeps the family's
    required keys declared (llguidance writes it before every pattern; llguidance_schema declares
    such keys where it can: test_required_keys_no_property_declares)."""
    branch = {"properties": {"a": {}, "b": {}}, "required": ["a"]}
    schema = {"type": "object", "anyOf": [branch, {"properties": {"c": {}}}], "properties": {"d": {}, "e": {}}, "required": ["d"]}
    fixed = fixed_nodes(schema, lambda ref: None)
    assert id(schema) in fixed and id(branch) not in fixed
    released = Released()
    out = any_order(schema, released)
    assert not released.freed and out["anyOf"][0]["required"] == ["a"] and "d" in out["properties"]  # before the branch: kept
    strict = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b", "a"], "additionalProperties": False}
    released = Released()
    assert any_order(strict, released, forced_order=True) is strict and not released.freed
    released = Released()
    out = any_order(strict, released)
    assert out["patternProperties"] == {"^(?:a|b)$": {}} and out["maxProperties"] == 2 and "required" not in out
    assert list(released.freed.values()) == [frozenset({"a", "b"})]
    undeclared = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "zz"]}
    released = Released()
    any_order(undeclared, released)
    assert not released.freed



# Snowplow's self-describing JSON (sp_247, sp_351, sp_352 in JSONSchemaBench): a closed object
# whose declared keys are all required, nested in another such object
SELF_DESCRIBING = {"type": "object", "additionalProperties": False, "required": ["schema", "data"], "properties": {
    "schema": {"type": "string", "pattern": "^iglu:"},
    "data": {"type": "object", "additionalProperties": False, "required": ["id", "tags"],
             "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}}


def test_closed_objects_with_every_key_required_take_any_order_unless_closed_objects(smollm2_tokenizer, smollm2_vocab):
    """By default a closed object whose declared keys are all required takes them in any order
    (was: schema order always, refusing 13 valid JSONSchemaBench instances: Snowplow's
    self-describing JSON, schema-catalog, o76580, o79009, o88110, o90913); with
    closed_objects=True (strict mode, the generation surfaces' default) they stay in schema
    order, each next key forced text. Every order of both levels on the real tokenizer, judged
    by jsonschema, with a key missing, repeated or unknown."""
    inner = _permutations(['"id":1', '"tags":["a"]'])
    texts = [text.replace("DATA", data) for text in _permutations(['"schema":"iglu:x"', '"data":DATA']) for data in inner]
    invalid = ['{"schema":"iglu:x"}', '{"data":{"id":1,"tags":[]}}', '{"data":{"tags":[],"id":1},"schema":"iglu:x","x":1}',
               '{"data":{"id":1},"schema":"iglu:x"}', '{"data":{"tags":[],"id":1,"id":2},"schema":"iglu:x"}',
               '{"schema":"iglu:x","data":{"id":1,"tags":[]},"schema":"iglu:y"}', '{"schema":"x","data":{"id":1,"tags":[]}}']
    validator = jsonschema.Draft202012Validator(SELF_DESCRIBING)
    assert all(validator.is_valid(json.loads(text)) for text in texts) and len(texts) == 4
    compiled = compile_json_schema(SELF_DESCRIBING, smollm2_vocab)
    strict = compile_json_schema(SELF_DESCRIBING, smollm2_vocab, closed_objects=True)
    for text in texts:
        assert _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), f"valid {text} refused"
        assert _accepts(strict, smollm2_tokenizer, smollm2_vocab, text) == (text == '{"schema":"iglu:x","data":{"id":1,"tags":["a"]}}'), text
    for text in invalid:
        if "\"id\":1,\"id\":2" not in text and text.count('"schema"') < 2:  # repeats: json.loads keeps the last
            assert not validator.is_valid(json.loads(text)), text
        assert not _accepts(compiled, smollm2_tokenizer, smollm2_vocab, text), f"invalid {text} accepted"
        assert not _accepts(strict, smollm2_tokenizer, smollm2_vocab, text), f"invalid {text} accepted in strict mode"


def _judged(schema: dict, texts: list[str], any_order_expected: bool, tokenizer, vocab):
    """Compiles `schema` and walks `texts`: no invalid one accepted (jsonschema judges), some
    accepted and some invalid (so the case can fail), and every valid one accepted where the
    keys are expected in any order. Returns the compiled grammar."""
    validator = jsonschema.Draft202012Validator(schema)
    compiled = compile_json_schema(schema, vocab)
    verdicts = [(text, validator.is_valid(json.loads(text)), _accepts(compiled, tokenizer, vocab, text)) for text in texts]
    assert not [text for text, valid, accepted in verdicts if accepted and not valid]
    assert any(accepted for _, _, accepted in verdicts) and not all(valid for _, valid, _ in verdicts)
    if any_order_expected:
        assert [text for text, valid, accepted in verdicts if valid and not accepted] == []
    return compiled


UNDECLARED = [  # required keys the node does not declare (llguidance_schema._required_keys_declared):
    # (schema, texts, whether every valid text is accepted: keys in any order)
    ({"type": "object", "properties": {"colors": {"enum": ["dark", "light"]}}, "required": ["color"]},  # JSONSchemaBench's o27044
     [*_permutations(['"colors":"dark"', '"color":"red"']), '{"colors":"dark"}', '{"color":[1]}', '{"colors":"x","color":1}'], True),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["n"], "additionalProperties": {"type": "integer"}},
     [*_permutations(['"a":"x"', '"n":1']), '{"a":"x","n":"y"}', '{"n":2,"m":3}', '{"n":2,"m":"z"}', '{"a":"x"}'], True),
    ({"type": "object", "allOf": [{"required": ["b"]}], "properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}},
     ['{"b":"x"}', '{"b":1}', '{"a":1,"b":"s"}', '{"b":"s","a":1}', '{"a":1}'], True),  # b stays unevaluated: a string
    # closed, every key required: schema order (strict tools)
    ({"type": "object", "properties": {"a": {}}, "patternProperties": {"^n": {"type": "integer"}}, "additionalProperties": False,
      "required": ["a", "n1"]}, [*_permutations(['"a":0', '"n1":1']), '{"a":0,"n1":"x"}', '{"n1":1}', '{"a":0,"n1":1,"b":2}'], False),
    # required by the root, declared by a part or the root's $ref target (JSONSchemaBench's o91096):
    # freed where that member moves it (json_key_order's `lent`)
    ({"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": {}}, "required": ["a", "c"]},
     [*_permutations(['"a":1', '"b":0', '"c":null']), '{"a":"x","c":1}', '{"a":1,"b":0}', '{"b":0,"c":1}'], True),
    ({"$ref": "#/$defs/light", "required": ["power", "kind"],
      "$defs": {"light": {"type": "object", "properties": {"level": {"type": "integer"}, "power": {"enum": ["on", "off"]}, "kind": {}}}}},
     [*_permutations(['"level":1', '"power":"on"', '"kind":2']), '{"level":1,"power":"on"}', '{"kind":1,"power":"up"}'], True),
    # required in a branch (not fixed); llguidance writes the branch's keys first
    ({"type": "object", "anyOf": [{"required": ["p"]}, {"required": ["q"]}], "properties": {"r": {"type": "integer"}}},
     ['{"r":1,"p":0}', '{"p":0,"r":1}', '{"q":0,"r":1}', '{"r":1}', '{"p":0,"r":"x"}'], False),
    # propertyNames constrains names: left undeclared (written first)
    ({"type": "object", "propertyNames": {"maxLength": 3}, "required": ["abc"]}, ['{"abc":1}', '{"ab":1,"abc":2}', '{"abc":1,"abcd":1}', '{"ab":1}'], False),
]


@pytest.mark.parametrize("schema, texts, any_order_expected", UNDECLARED, ids=range(len(UNDECLARED)))
def test_required_keys_no_property_declares(schema, texts, any_order_expected, smollm2_tokenizer, smollm2_vocab):
    """Declared with the schema the node gives them anyway (its patterns', else its
    additionalProperties'), they move like declared keys: every order of a valid object is
    accepted where the node is fixed and the key its own. Never an invalid text accepted
    (jsonschema judges): not a key propertyNames constrains, nor one unevaluatedProperties
    would see as evaluated once declared."""
    _judged(schema, texts, any_order_expected, smollm2_tokenizer, smollm2_vocab)


# ---- a generated family -----------------------------------------------------------------------

_SCALARS = [{"type": "string", "maxLength": 3}, {"type": "integer"}, {"type": "boolean"}, {"enum": ["x", "y"]}]
_NAMES = ["a", "b", "c", "id", "name", "kind", "x1", "tags"]


def _object_schema(rng: random.Random, depth: int) -> dict:
    props = {}
    for name in rng.sample(_NAMES, rng.randint(1, 4)):
        roll = rng.random()
        if depth < 2 and roll < 0.25:
            props[name] = _object_schema(rng, depth + 1)
        elif depth < 2 and roll < 0.4:
            props[name] = {"type": "array", "items": _object_schema(rng, depth + 1), "maxItems": 2}
        else:
            props[name] = dict(rng.choice(_SCALARS))
    node: dict = {"type": "object", "properties": props}
    required = [k for k in props if rng.random() < 0.6]
    rng.shuffle(required)
    if required:
        node["required"] = required
    roll = rng.random()
    if roll < 0.3:
        node["additionalProperties"] = False
    elif roll < 0.45:
        node["additionalProperties"] = {"type": "integer"}
    return node


def _wrapped(rng: random.Random, node: dict) -> dict:
    """The same language through a $ref, or with part of it in an allOf part (which may declare
    one of the node's own keys again, with the same schema)."""
    roll = rng.random()
    if roll < 0.3:
        return {"$ref": "#/$defs/root", "$defs": {"root": node}}
    if roll < 0.55 and len(node["properties"]) > 1 and "additionalProperties" not in node:
        names = list(node["properties"])
        moved = names[: len(names) // 2]
        part = {"properties": {k: node["properties"][k] for k in moved}}
        if any(k in moved for k in node.get("required", [])):
            part["required"] = [k for k in node["required"] if k in moved]
        rest = {k: v for k, v in node.items() if k not in ("properties", "required")}
        rest["properties"] = {k: v for k, v in node["properties"].items() if k not in moved}
        if any(k not in moved for k in node.get("required", [])):
            rest["required"] = [k for k in node["required"] if k not in moved]
        scalars = [k for k, v in rest["properties"].items() if v.get("type") not in ("object", "array")]
        if scalars and rng.random() < 0.5:  # the part declares one of the node's keys too (llguidance merges the
            twice = rng.choice(scalars)  # two; keys inside a merged object value keep schema order: scalars only)
            part["properties"][twice] = rest["properties"][twice]
        return {**rest, "allOf": [part]}
    return node


def _value(rng: random.Random, schema: dict):
    if schema.get("type") == "object":
        required = schema.get("required", [])
        keys = [k for k in schema["properties"] if k in required or rng.random() < 0.5]
        out = {k: _value(rng, schema["properties"][k]) for k in keys}
        extra = schema.get("additionalProperties", True)
        if extra is not False and ("zz" in required or rng.random() < 0.3):
            out["zz"] = rng.randint(0, 9) if extra is not True else "w"
        items = list(out.items())
        if not (extra is False and set(schema["properties"]) <= set(required)):  # strict objects keep schema order
            rng.shuffle(items)
        return dict(items)
    if schema.get("type") == "array":
        return [_value(rng, schema["items"]) for _ in range(rng.randint(0, 2))]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    return {"string": lambda: rng.choice(["", "p", "qr"]), "integer": lambda: rng.randint(-3, 30), "boolean": lambda: rng.random() < 0.5}[schema["type"]]()


def _objects_holding_required(value, schema: dict, out: list) -> list:
    """Paths to the objects in `value` holding a key their schema requires."""
    def visit(v, s, path):
        if isinstance(v, dict) and s.get("type") == "object":
            if any(k in v for k in s.get("required", [])):
                out.append((path, [k for k in s["required"] if k in v]))
            for k, child in v.items():
                if k in s["properties"]:
                    visit(child, s["properties"][k], (*path, k))
        elif isinstance(v, list) and s.get("type") == "array":
            for i, child in enumerate(v):
                visit(child, s["items"], (*path, i))
    visit(value, schema, ())
    return out


def _dropped(value, path: tuple, key: str):
    if not path:
        return {k: v for k, v in value.items() if k != key}
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        return [(_dropped(v, rest, key) if i == head else v) for i, v in enumerate(value)]
    return {k: (_dropped(v, rest, key) if k == head else v) for k, v in value.items()}


def _texts(rng: random.Random, plain: dict) -> list[str]:
    """A valid value of `plain` (keys shuffled), and the same with one required key dropped at a
    random depth where it holds one."""
    value = _value(rng, plain)
    texts = [json.dumps(value, separators=(",", ":"))]
    holders = _objects_holding_required(value, plain, [])
    if holders:
        path, keys = rng.choice(holders)
        texts.append(json.dumps(_dropped(value, path, rng.choice(keys)), separators=(",", ":")))
    return texts


def _walk_family(rng: random.Random, count: int, make, tokenizer, vocab, on_text=None) -> Counter:
    """`count` generated schemas (`make(rng)` -> (the plain schema values come from, the schema
    compiled)) x 6 values: every text's acceptance must equal jsonschema's. Returns the counts
    (`on_text(compiled, text, valid, counts)` may add its own)."""
    problems, counts = [], Counter()
    for _ in range(count):
        plain, schema = make(rng)
        compiled = compile_json_schema(schema, vocab)
        validator = jsonschema.Draft202012Validator(schema)
        counts["schemas"] += 1
        counts["tracked"] += isinstance(compiled, RequiredKeysGrammar)
        for _ in range(6):
            for text in _texts(rng, plain):
                valid = validator.is_valid(json.loads(text))
                counts["texts"] += 1
                counts["valid"] += valid
                if _accepts(compiled, tokenizer, vocab, text) != valid:
                    problems.append(f"{json.dumps(schema)}: {text} valid={valid}")
                if on_text is not None:
                    on_text(compiled, text, valid, counts)
    print(dict(counts))
    assert not problems, "\n".join(problems[:10])
    return counts


def test_generated_schemas_match_jsonschema_in_any_key_order(smollm2_tokenizer, smollm2_vocab):
    def without_tracker(compiled, text, valid, counts):
        if not valid and isinstance(compiled, RequiredKeysGrammar):
            counts["invalid accepted without the tracker"] += _accepts(compiled.inner, smollm2_tokenizer, smollm2_vocab, text)

    def make(rng):
        plain = _object_schema(rng, 0)
        return plain, _wrapped(rng, plain)

    stats = _walk_family(random.Random(5), 60, make, smollm2_tokenizer, smollm2_vocab, without_tracker)
    assert stats["tracked"] >= 20 and stats["valid"] >= 200, stats  # the family exercises the tracker
    assert stats["invalid accepted without the tracker"] >= 10, stats  # the tracker is what refuses them


def _objects_changed(rng: random.Random, node: dict, change) -> dict:
    """`node` (an _object_schema) with `change(rng, object)` applied to every object in it,
    innermost first (each gets a copy, its properties already changed)."""
    props = {k: _objects_changed(rng, v, change) if v.get("type") == "object" else
             {**v, "items": _objects_changed(rng, v["items"], change)} if v.get("type") == "array" else v
             for k, v in node["properties"].items()}
    return change(rng, {**node, "properties": props})


def _with_dependencies(rng: random.Random, node: dict) -> dict:
    """`node` (an _object_schema) where some objects' keys require others (`dependentRequired`:
    one or two keys each to one or two other declared keys)."""
    return _objects_changed(rng, node, _add_dependencies)


def _add_dependencies(rng: random.Random, out: dict) -> dict:
    names = list(out["properties"])
    if len(names) > 1 and rng.random() < 0.7:
        keys = rng.sample(names, min(len(names), rng.randint(1, 2)))
        out["dependentRequired"] = {
            k: rng.sample([n for n in names if n != k], min(len(names) - 1, rng.randint(1, 2))) for k in keys}
    return out


def test_generated_schemas_with_dependent_required_keys(smollm2_tokenizer, smollm2_vocab):
    """The family again with keys requiring other keys (random.Random(23), 60 schemas x 12
    texts): the tracker adds what a written key requires; acceptance equals jsonschema's."""
    def make(rng):  # (beside other allOf parts a condition is left to llguidance: keys in schema order)
        plain = _with_dependencies(rng, _object_schema(rng, 0))
        return plain, {"$ref": "#/$defs/root", "$defs": {"root": plain}} if rng.random() < 0.3 else plain

    def dependent(compiled, text, valid, counts):
        if isinstance(compiled, RequiredKeysGrammar) and any(compiled.contexts.dependent):
            counts["dependencies tracked"] += 1
            if not valid:
                counts["invalid accepted without the tracker"] += _accepts(compiled.inner, smollm2_tokenizer, smollm2_vocab, text)

    stats = _walk_family(random.Random(23), 60, make, smollm2_tokenizer, smollm2_vocab, dependent)
    assert stats["dependencies tracked"] >= 150 and stats["valid"] >= 200, stats  # the family exercises the lift
    assert stats["invalid accepted without the tracker"] >= 20, stats  # the tracker is what refuses them


def _undeclared_required(rng: random.Random, node: dict) -> dict:
    """`node` (an _object_schema) where some open objects also require the undeclared key `zz`."""
    def add(rng: random.Random, out: dict) -> dict:
        if out.get("additionalProperties", True) is not False and rng.random() < 0.5:
            out["required"] = [*out.get("required", []), "zz"]
        return out

    return _objects_changed(rng, node, add)


def test_generated_schemas_with_undeclared_required_keys(smollm2_tokenizer, smollm2_vocab):
    """The generated family above where open objects also require `zz`, a key no property
    declares (declared by llguidance_schema with the node's additionalProperties): valid values
    in shuffled key order and the same with one required key dropped (often `zz`), acceptance
    equal to jsonschema's on every text (random.Random(11), 40 schemas x 6 values)."""
    def make(rng):
        plain = _undeclared_required(rng, _object_schema(rng, 0))
        return plain, _wrapped(rng, plain)

    def with_zz(compiled, text, valid, counts):
        counts["with zz"] += '"zz"' in text

    counts = _walk_family(random.Random(11), 40, make, smollm2_tokenizer, smollm2_vocab, with_zz)
    assert counts["valid"] >= 150 and counts["texts"] - counts["valid"] >= 50 and counts["with zz"] >= 60, counts


def _with_choices(rng: random.Random, node: dict) -> dict:
    """`node` (an _object_schema) where some objects require one of several key sets: a oneOf
    ("exactly one": overlapping) or anyOf ("at least one") of two or three bare `required`
    branches over their declared keys."""
    return _objects_changed(rng, node, _add_choices)


def _add_choices(rng: random.Random, out: dict) -> dict:
    names = list(out["properties"])
    if len(names) > 1 and rng.random() < 0.8:
        sets = {frozenset(rng.sample(names, rng.randint(1, min(2, len(names))))) for _ in range(rng.randint(2, 3))}
        required = set(out.get("required", []))
        sets = sorted((keys for keys in sets if not keys <= required and not any(other < keys for other in sets)), key=sorted)
        if len(sets) > 1:  # (one branch inside another or the node's required keys: oneOf admits no object, refused by name)
            out["oneOf" if rng.random() < 0.7 else "anyOf"] = [{"required": sorted(keys)} for keys in sets]
    return out


def test_generated_schemas_with_one_of_required_keys(smollm2_tokenizer, smollm2_vocab):
    """The family again where objects require one of several key sets (oneOf, or anyOf, of bare
    `required` branches; random.Random(31), 60 schemas x 12 texts), open and closed: keys in
    shuffled order, acceptance equal to jsonschema's on every text; lifted to the tracker on
    many of them."""
    def make(rng):
        plain = _with_choices(rng, _object_schema(rng, 0))
        return plain, {"$ref": "#/$defs/root", "$defs": {"root": plain}} if rng.random() < 0.3 else plain

    def lifted(compiled, text, valid, counts):
        if isinstance(compiled, RequiredKeysGrammar) and any(len(ways) > 1 for ways in compiled.contexts.required):
            counts["choices tracked"] += 1

    stats = _walk_family(random.Random(31), 60, make, smollm2_tokenizer, smollm2_vocab, lifted)
    assert stats["choices tracked"] >= 100 and stats["valid"] >= 150 and stats["texts"] - stats["valid"] >= 150, stats


TYPED_BRANCHES = [  # anyOf/oneOf branches that hold wherever they can apply (json_required._typed_branches)
    # the only object branch, the only array branch (JSONSchemaBench's o59186: an assertion or a list of them)
    ({"type": "object", "properties": {"allow": {"oneOf": [{"$ref": "#/$defs/one"}, {"type": "array", "items": {"$ref": "#/$defs/one"}}]}},
      "$defs": {"one": {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}, "r": {}}, "required": ["r"]}}},
     ['{"allow":{"b":1,"r":2}}', '{"allow":{"r":2,"a":0,"b":1}}', '{"allow":{"b":1}}', '{"allow":[{"b":1,"r":1},{"a":1}]}',
      '{"allow":[{"a":0,"r":1}]}', '{"allow":[]}', '{"allow":"x"}'], True),
    # the only branch (o78043's `oneOf: [{$ref: person-object}]`)
    ({"type": "object", "properties": {"p": {"anyOf": [{"type": "object", "properties": {"e": {}, "n": {}}, "required": ["n"]}]}}},
     ['{"p":{"e":1,"n":2}}', '{"p":{"n":2}}', '{"p":{"e":1}}', '{"p":3}'], True),
    # a string shorthand or the full object
    ({"type": "object", "properties": {"s": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"x": {}, "y": {}}, "required": ["y"]}]}}},
     ['{"s":"a"}', '{"s":{"x":1,"y":2}}', '{"s":{"y":2,"x":1}}', '{"s":{"x":1}}'], True),
    # the object branch also says `items`: not taken as fixed (its required key keeps its place)
    ({"type": "object", "properties": {"s": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"x": {}, "y": {}},
                                                                           "required": ["y"], "items": {"required": ["q"]}}]}}},
     ['{"s":"a"}', '{"s":{"x":1,"y":2}}', '{"s":{"x":1}}'], False),
    # a branch of no stated type beside the object one: which holds depends on the value
    ({"type": "object", "properties": {"s": {"anyOf": [{"minLength": 2}, {"type": "object", "properties": {"x": {}, "y": {}}, "required": ["y"]}]}}},
     ['{"s":"ab"}', '{"s":{"x":1,"y":2}}', '{"s":{"x":1}}', '{"s":"a"}'], False),
]


@pytest.mark.parametrize("schema, texts, any_order_expected", TYPED_BRANCHES, ids=range(len(TYPED_BRANCHES)))
def test_branches_every_object_meets(schema, texts, any_order_expected, smollm2_tokenizer, smollm2_vocab):
    """A branch every object (array) at its place meets is fixed: its required keys move, the
    tracker enforcing them, in objects and in the elements of the array branch's items. Never an
    invalid text accepted (jsonschema judges); every valid one where the branch is fixed."""
    compiled = _judged(schema, texts, any_order_expected, smollm2_tokenizer, smollm2_vocab)
    assert isinstance(compiled, RequiredKeysGrammar) or not any_order_expected


def _typed_unions(rng: random.Random, node: dict) -> dict:
    """`node` (an _object_schema) where some object values sit in a union with a string or with
    an array of themselves (the objects they admit unchanged)."""
    props = {}
    for name, value in node["properties"].items():
        if value.get("type") == "object":
            value = _typed_unions(rng, value)
            roll = rng.random()
            if roll < 0.35:
                value = {"oneOf": [{"type": "string"}, value]}
            elif roll < 0.7:
                value = {"anyOf": [value, {"type": "array", "items": value, "maxItems": 2}]}
        props[name] = value
    return {**node, "properties": props}


def test_generated_schemas_with_typed_unions(smollm2_tokenizer, smollm2_vocab):
    """The generated family with object values in typed unions (random.Random(13), 40 schemas x
    6 values, shuffled key order and one required key dropped): acceptance equals jsonschema's."""
    def make(rng):
        plain = _object_schema(rng, 0)
        return plain, _wrapped(rng, _typed_unions(rng, plain))

    counts = _walk_family(random.Random(13), 40, make, smollm2_tokenizer, smollm2_vocab)
    assert counts["valid"] >= 150 and counts["texts"] - counts["valid"] >= 50 and counts["tracked"] >= 20, counts


def _closed(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_INT, _STR = {"type": "integer"}, {"type": "string"}


@pytest.mark.parametrize("union", ["oneOf", "anyOf"])
@pytest.mark.parametrize("shape", ["marked", "one-requires-shared-only", "by-ref"])
def test_a_union_of_closed_objects_is_one_object_with_branch_ways(union, shape):
    """A union of closed objects (F5's AS3 `frontend`: an iApp object or a virtual server
    object) kept each branch's required keys, and the optional keys declared before them, in
    schema order: `{"a":1,"c":2}` was refused where branch A declares c first. Written as one
    closed object (json_closed_unions.py) and lifted, the tracker requires some branch's keys,
    a branch ruled out once a key it does not declare is written (B requires only the shared
    `b` in one shape: `{"b":"x","a":1}` must not close as B). Every arrangement of every subset
    of five keys (x undeclared) against jsonschema, byte by byte with EOS, the mask at `}` as
    validate_tokens; every prefix taken can still be closed validly (13 or 14 valid texts of
    326). Under a key with the branches referenced, hand-picked texts."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    # five keys a branch: fewer are written in every order instead (json_key_order._orders)
    a = _closed({"c": _INT, "e": _INT, "f": _INT, "b": _STR, "a": _INT}, ["a"])
    b = _closed({"g": _INT, "h": _INT, "d": {}, "i": _INT, "b": _STR}, ["b"] if shape == "one-requires-shared-only" else ["b", "d"])
    schema = {union: [a, b]}
    if shape == "by-ref":
        schema = {"$defs": {"A": a, "B": b}, "type": "object", "properties": {"u": {union: [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]}}}
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, RequiredKeysGrammar)
    contexts = compiled.contexts
    if shape == "by-ref":  # the union under a key, its branches referenced: the objects under `u`
        def accepted(text: str) -> bool:
            ids = list(text.encode()) + [256]
            return compiled.matcher().validate_tokens(ids) == len(ids)

        validator = jsonschema.Draft202012Validator(schema)
        texts = ['{"u":{"a":1,"c":2}}', '{"u":{"b":"x","c":2,"a":1}}', '{"u":{"d":null,"b":"x"}}', '{"u":{"b":"x","a":1,"d":null}}',
                 '{"u":{"b":"x"}}', '{"u":{"c":2}}', '{"u":{"a":1,"x":[]}}', '{"u":{}}']
        for text in texts:
            assert accepted(text) is validator.is_valid(json.loads(text)), text
        assert sum(validator.is_valid(json.loads(t)) for t in texts) == 3
        return
    ways = sorted(zip(map(sorted, contexts.required[contexts.root]), map(sorted, contexts.ruled_out[contexts.root])))
    assert ways == [(["a"], ["d", "g", "h", "i"]), (["b"] if shape == "one-requires-shared-only" else ["b", "d"], ["a", "c", "e", "f"])]
    validator = jsonschema.Draft202012Validator(schema)
    judged = _every_arrangement(compiled, validator, vocab, closed=True)
    valid = 11 + (3 if shape == "one-requires-shared-only" else 2)  # A: a with any of b, c in any order; B: b (and d)
    assert judged[True] == valid and judged[False] == 326 - valid, judged
    every = {"a": "1", "b": '"x"', "c": "2", "d": "null", "x": "[]", **{k: "3" for k in "efghi"}}
    assert _closable(compiled, validator, vocab, every) > 300  # prefixes taken


def test_a_one_of_of_closed_objects_an_object_may_meet_twice_stays_a_one_of():
    """Where an object can meet two closed branches (A's required keys B declares and the
    other way round), oneOf refuses it while one merged object would not: no merge, and
    `{"a":1}` (both branches) stays refused. The same union as anyOf is merged, and takes it."""
    from constrained_spec.grammar import Vocabulary
    from constrained_spec.grammar.json_closed_unions import closed_unions_merged

    a = _closed({"a": _INT, "b": _STR, "e": _INT, "f": _INT, "g": _INT}, ["a"])
    b = _closed({"b": _STR, "a": _INT, "c": _INT, "e": _INT, "f": _INT, "g": _INT}, ["a"])
    for union in ("oneOf", "anyOf"):
        schema = {"type": "object", "properties": {"u": {union: [a, b]}}}
        merged = closed_unions_merged(schema, fixed_nodes(schema, lambda ref: None), lambda branch: branch, set)
        assert (merged is None) is (union == "oneOf"), union
    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    for union in ("oneOf", "anyOf"):
        schema = {"type": "object", "properties": {"u": {union: [a, b]}}}
        validator = jsonschema.Draft202012Validator(schema)
        try:
            compiled = compile_json_schema(schema, vocab)
        except GrammarError:
            assert union == "oneOf"  # refused by name is fine; accepted wrongly is not
            continue
        for text in ('{"u":{"a":1}}', '{"u":{"b":"x","a":1}}', '{"u":{"a":1,"c":2}}', '{"u":{"c":2,"b":"x","a":1}}', '{"u":{"b":"x"}}'):
            ids = list(text.encode()) + [256]
            accepted = compiled.matcher().validate_tokens(ids) == len(ids)
            if union == "anyOf":
                assert accepted is validator.is_valid(json.loads(text)), (union, text)
            else:  # the union as llguidance writes it: a branch's keys as declared (c after a), never an invalid text
                assert not accepted or validator.is_valid(json.loads(text)), (union, text)
        held = compiled.matcher().validate_tokens(list(b'{"u":{"a":1}}') + [256]) == 14
        assert held is (union == "anyOf"), union  # it meets both branches


def test_a_union_of_closed_objects_stays_a_union_where_a_shared_key_differs():
    """A key both branches declare with different schemas (`b` a string in A, an integer in B):
    which schema applies is the branch's, so no merge; the union is still sound (its branches'
    keys as declared: `b` after `a` in A)."""
    from constrained_spec.grammar import Vocabulary
    from constrained_spec.grammar.json_closed_unions import closed_unions_merged

    five = {"e": _INT, "f": _INT, "g": _INT}
    schema = {"type": "object", "properties": {"u": {"oneOf": [_closed({"a": _INT, "b": _STR, **five}, ["a"]), _closed({"b": _INT, "d": {}, **five}, ["d"])]}}}
    assert closed_unions_merged(schema, fixed_nodes(schema, lambda ref: None), lambda branch: branch, set) is None
    same = json.loads(json.dumps(schema).replace('"b": {"type": "integer"}', '"b": {"type": "string"}'))
    assert closed_unions_merged(same, fixed_nodes(same, lambda ref: None), lambda branch: branch, set) is not None
    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    compiled, validator = compile_json_schema(schema, vocab), jsonschema.Draft202012Validator(schema)
    for text in ('{"u":{"a":1,"b":"x"}}', '{"u":{"b":"x","a":1}}', '{"u":{"b":1,"d":2}}', '{"u":{"b":"x","d":2}}', '{"u":{"d":2,"b":1}}',
                 '{"u":{"a":1,"b":1}}', '{"u":{"b":"x","d":2}}'):
        ids = list(text.encode()) + [256]
        accepted = compiled.matcher().validate_tokens(ids) == len(ids)
        assert not accepted or validator.is_valid(json.loads(text)), text
        assert accepted or text in ('{"u":{"b":"x","a":1}}', '{"u":{"d":2,"b":1}}') or not validator.is_valid(json.loads(text)), text


def test_generated_unions_of_closed_objects():
    """A seeded generated family (random.Random(41), 80 schemas, 40 texts each): an anyOf or
    oneOf of two or three closed objects of 5-7 keys out of ten, 1-3 of them required, at the
    root or under a key; a shared key given another type in some. Texts: a branch's keys (or any
    keys) in random order, values mostly of the right type. Where the union can be one object
    (json_closed_unions: a shared key has one schema, a oneOf's branches cannot meet one object)
    acceptance (EOS only at the end) equals jsonschema on every text; elsewhere nothing invalid
    is accepted (those keep their branches' schema order)."""
    from constrained_spec.grammar import Vocabulary

    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    rng = random.Random(41)
    names, values = list("abcdefghij"), {"integer": "1", "string": '"s"', "boolean": "true"}
    counts = Counter()
    for _ in range(80):
        kinds = {k: rng.choice(list(values)) for k in names}
        branches = []
        for _ in range(rng.choice([2, 2, 3])):
            keys = rng.sample(names, rng.randint(5, 7))
            own = {k: {"type": kinds[k]} for k in keys}
            if rng.random() < 0.15:
                own[keys[0]] = {"type": rng.choice(list(values))}
            branches.append({"type": "object", "properties": own, "required": rng.sample(keys, rng.randint(1, 3)), "additionalProperties": False})
        union, nested = rng.choice(["anyOf", "oneOf"]), rng.random() < 0.5
        schema = {"type": "object", "properties": {"u": {union: branches}}, "required": ["u"]} if nested else {union: branches}
        seen: dict[str, dict] = {}
        one_schema = all(seen.setdefault(k, v) == v for b in branches for k, v in b["properties"].items())
        apart = union == "anyOf" or not any(set(x["required"]) <= set(y["properties"]) and set(y["required"]) <= set(x["properties"])
                                            for i, x in enumerate(branches) for y in branches[i + 1:])
        merged = one_schema and apart
        compiled, validator = compile_json_schema(schema, vocab), jsonschema.Draft202012Validator(schema)
        counts["merged"] += merged
        for _ in range(40):
            branch = rng.choice(branches)
            pool = list(branch["properties"]) if rng.random() < 0.7 else names
            keys = rng.sample(pool, rng.randint(0, min(len(pool), 6)))
            body = ",".join(f'"{k}":' + (values[branch["properties"][k]["type"]] if k in branch["properties"] and rng.random() < 0.9
                                         else rng.choice(list(values.values()))) for k in keys)
            text = f'{{"u":{{{body}}}}}' if nested else f"{{{body}}}"
            ids = list(text.encode()) + [vocab.eos_token_id]
            accepted, valid = compiled.matcher().validate_tokens(ids) == len(ids), validator.is_valid(json.loads(text))
            assert not accepted or valid, (schema, text)
            if merged:
                assert accepted is valid, (schema, text)
                counts["valid merged"] += valid
            counts["valid"] += valid
    assert counts["merged"] >= 50 and counts["valid merged"] >= 300 and counts["valid"] >= 400, counts
